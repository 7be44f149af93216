//! What a field must be: the NACHA character set, lengths, and the error that names a
//! field, what it must be and what it was.

use std::fmt;

/// A field that is not what it must be: its name, what was expected, what was got.
///
/// Callers that read entries from a file or a request add where (`line 12: `, `[3]: `).
/// `got` never holds a whole account number: it is masked (see [`mask_account`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[error("{field}: expected {expected}, got {got}")]
pub struct FieldError {
    /// The field, as [`Entry`](crate::Entry) names it (`rdfi_routing`, `amount_cents`).
    pub field: &'static str,
    /// What it must be.
    pub expected: String,
    /// What it was (account numbers masked).
    pub got: String,
}

impl FieldError {
    pub(crate) fn new(
        field: &'static str,
        expected: impl Into<String>,
        got: impl Into<String>,
    ) -> Self {
        FieldError {
            field,
            expected: expected.into(),
            got: got.into(),
        }
    }
}

/// Whether a byte is in the NACHA character set: printable ASCII, space (0x20) to
/// tilde (0x7E). NACHA allows any character above 0x1F; bytes of 0x7F and above are
/// not ASCII, and no bank front end we know of takes them.
#[inline]
pub fn is_nacha_byte(b: u8) -> bool {
    (0x20..=0x7E).contains(&b)
}

/// Whether every character of `s` is in the NACHA character set ([`is_nacha_byte`]).
#[inline]
pub fn is_nacha_text(s: &str) -> bool {
    s.bytes().all(is_nacha_byte)
}

/// The most of a value an error shows, or a rejected entry keeps of a field over its
/// limit: its first 64 bytes (cut at a character boundary). A row of a 10 MB field is
/// said, and stored, in a few hundred bytes; the length is said beside the excerpt.
pub const EXCERPT_BYTES: usize = 64;

/// The first [`EXCERPT_BYTES`] bytes of `s` at most, cut at a character boundary.
pub fn excerpt(s: &str) -> &str {
    if s.len() <= EXCERPT_BYTES {
        return s;
    }
    let mut end = EXCERPT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` as it is safe to show in an error: quoted, with control and non-ASCII
/// characters escaped, and past [`EXCERPT_BYTES`] bytes cut, with its length:
/// `"AAAA…"… (10485760 bytes)`. Never for personal data (see [`shown_personal`]).
pub fn shown(s: &str) -> String {
    let cut = excerpt(s);
    if cut.len() == s.len() {
        format!("{s:?}")
    } else {
        format!("{cut:?}… ({} bytes)", s.len())
    }
}

/// What an error says of a personal field (a receiver's name, identification or
/// addenda) that is not printable ASCII: where the first byte outside the set is,
/// never the text.
pub(crate) fn shown_personal(s: &str) -> String {
    match s.bytes().position(|b| !is_nacha_byte(b)) {
        Some(i) => format!(
            "byte 0x{:02X} at position {} (of {} bytes)",
            s.as_bytes()[i],
            i + 1,
            s.len()
        ),
        None => format!("{} bytes", s.len()),
    }
}

/// An account number with all but its last four characters replaced by `*`:
/// `"123456789"` → `"*****6789"`. Shorter numbers are shown as `*` only.
pub fn mask_account(account: &str) -> String {
    let chars: Vec<char> = account.chars().collect();
    if chars.len() <= 4 {
        return "*".repeat(chars.len());
    }
    let keep = chars.len() - 4;
    let mut out = "*".repeat(keep);
    out.extend(&chars[keep..]);
    out
}

/// Whose text a field is: the originator's own (shown in errors, cut to an excerpt),
/// or the receiver's (personal data: never shown).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Text {
    /// The originator's or the caller's (company, description, ids, bank).
    Shown,
    /// The receiver's (name, identification, addenda): errors say lengths and
    /// positions only.
    Personal,
}

/// Check a free-text field of an entry: at most `max` characters of the NACHA set,
/// and not blank when `required`. Errors show a [`Text::Personal`] field's lengths and
/// positions only.
pub(crate) fn check_text(
    field: &'static str,
    value: &str,
    max: usize,
    required: bool,
    whose: Text,
    errors: &mut Vec<FieldError>,
) {
    if value.len() > max {
        errors.push(FieldError::new(
            field,
            format!("at most {max} characters"),
            format!("{} characters", value.chars().count()),
        ));
    }
    if !is_nacha_text(value) {
        errors.push(FieldError::new(
            field,
            "characters of the NACHA set (printable ASCII)",
            match whose {
                Text::Shown => shown(value),
                Text::Personal => shown_personal(value),
            },
        ));
    } else if required && blank_or_zeros(value.as_bytes()) {
        // Only spaces and zeros: nothing personal, but possibly long.
        errors.push(FieldError::new(
            field,
            "not blank (nor only zeros)",
            shown(value),
        ));
    }
}

/// Whether a field is only spaces and zeros: a required field must not be (NACHA
/// "mandatory" fields; moov-io/ach rejects them too).
pub(crate) fn blank_or_zeros(b: &[u8]) -> bool {
    b.iter().all(|&c| c == b' ' || c == b'0')
}

/// Writes an account number masked ([`mask_account`]).
pub(crate) struct Masked<'a>(pub &'a str);

impl fmt::Debug for Masked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", mask_account(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_all_but_the_last_four() {
        assert_eq!(mask_account("123456789"), "*****6789");
        assert_eq!(mask_account("12345"), "*2345");
        assert_eq!(mask_account("1234"), "****");
        assert_eq!(mask_account(""), "");
    }

    #[test]
    fn long_values_are_shown_as_an_excerpt_with_their_length() {
        assert_eq!(shown("ABC"), "\"ABC\"");
        let long = "A".repeat(10 << 20);
        let s = shown(&long);
        assert!(s.len() < 100, "{s}");
        assert!(s.ends_with("… (10485760 bytes)"), "{s}");
        assert!(
            s.starts_with(&format!("{:?}", "A".repeat(EXCERPT_BYTES))),
            "{s}"
        );
        // Cut at a character boundary.
        let accents = "É".repeat(40);
        assert_eq!(excerpt(&accents).len(), 64);
        let odd = format!("A{}", "É".repeat(40));
        assert_eq!(excerpt(&odd).len(), 63);
        assert!(odd.starts_with(excerpt(&odd)));
    }

    #[test]
    fn personal_text_is_said_by_position_never_shown() {
        assert_eq!(
            shown_personal("JOSÉ"),
            "byte 0xC3 at position 4 (of 5 bytes)"
        );
        let mut errors = Vec::new();
        check_text(
            "individual_name",
            "JOSÉ",
            22,
            true,
            Text::Personal,
            &mut errors,
        );
        assert_eq!(errors.len(), 1);
        assert!(!errors[0].to_string().contains("JOS"), "{}", errors[0]);
    }

    #[test]
    fn the_character_set_is_printable_ascii() {
        assert!(is_nacha_text("ACME CORP. #1 ~{}"));
        assert!(!is_nacha_text("CAFÉ"));
        assert!(!is_nacha_text("TAB\t"));
        assert!(!is_nacha_byte(0x7F));
    }
}
