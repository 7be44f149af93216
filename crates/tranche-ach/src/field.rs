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

/// `s` as it is safe to show in an error: quoted, with control and non-ASCII
/// characters escaped.
pub(crate) fn shown(s: &str) -> String {
    format!("{s:?}")
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

/// Check a free-text field of an entry: at most `max` characters of the NACHA set,
/// and not blank when `required`.
pub(crate) fn check_text(
    field: &'static str,
    value: &str,
    max: usize,
    required: bool,
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
            shown(value),
        ));
    } else if required && blank_or_zeros(value.as_bytes()) {
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
    fn the_character_set_is_printable_ascii() {
        assert!(is_nacha_text("ACME CORP. #1 ~{}"));
        assert!(!is_nacha_text("CAFÉ"));
        assert!(!is_nacha_text("TAB\t"));
        assert!(!is_nacha_byte(0x7F));
    }
}
