//! Masking of personal data in job text the API shows: Indian PANs and e-mail addresses.
//!
//! - A PAN (5 letters, 4 digits, 1 letter, standing alone: no letter or digit touching
//!   it) keeps its first two and last two characters: `ABCDE1234F` → `ABXXXXXX4F`.
//!   The two kept at the front are a series code and the two at the back a digit and
//!   the check letter; the holder type (4th) and the surname initial (5th) go. Either
//!   case is matched: masking a look-alike code is cheaper than showing a real PAN.
//! - An e-mail address keeps the first character of its local part and its domain:
//!   `r.sharma@example.com` → `r***@example.com` (always three stars, so the length of
//!   the name is not shown either). The domain must have a dot and end in a label of at
//!   least two letters; local parts are the common `A-Z a-z 0-9 . _ % + -`.
//!
//! [`json`] masks inside every string of a JSON text, keys included, and treats each
//! escape sequence (`\n`, `\u00e9`) as a boundary, so a PAN right after a `\n` is still
//! found and an escape is never cut in half: the output has the same structure and is
//! valid JSON whenever the input was. Only ASCII letters and digits are replaced, by
//! ASCII, so UTF-8 stays intact.
//!
//! A hand scan rather than the `regex` crate: the JSON walk is needed either way, the
//! "standing alone" rule is a look-around `regex` does not have, and it keeps the
//! server's dependencies as they were. The tests below are its specification.

use std::borrow::Cow;
use std::ops::Range;

/// `text` with every PAN and e-mail address in it masked; borrowed when there is none.
pub fn text(text: &str) -> Cow<'_, str> {
    let found = find(text.as_bytes());
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for m in found {
        out.push_str(&text[at..m.span.start]);
        let original = &text[m.span.clone()];
        match m.kind {
            Kind::Pan => {
                out.push_str(&original[..2]);
                out.push_str("XXXXXX");
                out.push_str(&original[8..]);
            }
            Kind::EmailName => {
                out.push_str(&original[..1]);
                out.push_str("***");
            }
        }
        at = m.span.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

/// JSON text with every PAN and e-mail address inside its strings masked; borrowed
/// when there is none.
pub fn json(json: &str) -> Cow<'_, str> {
    let b = json.as_bytes();
    let mut out: Option<String> = None;
    // Copied to `out` up to here.
    let mut copied = 0;
    let mut i = 0;
    let mut in_string = false;
    // Start of the current stretch of string content without escapes.
    let mut plain = 0;
    while i < b.len() {
        if !in_string {
            if b[i] == b'"' {
                in_string = true;
                plain = i + 1;
            }
            i += 1;
            continue;
        }
        match b[i] {
            b'"' | b'\\' => {
                if let Cow::Owned(masked) = text(&json[plain..i]) {
                    let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
                    out.push_str(&json[copied..plain]);
                    out.push_str(&masked);
                    copied = i;
                }
                if b[i] == b'"' {
                    in_string = false;
                    i += 1;
                } else {
                    i += if b.get(i + 1) == Some(&b'u') { 6 } else { 2 };
                    i = i.min(b.len());
                }
                plain = i;
            }
            _ => i += 1,
        }
    }
    match out {
        None => Cow::Borrowed(json),
        Some(mut out) => {
            out.push_str(&json[copied..]);
            Cow::Owned(out)
        }
    }
}

#[derive(Debug)]
enum Kind {
    Pan,
    /// The local part of an e-mail address (before the `@`).
    EmailName,
}

#[derive(Debug)]
struct Found {
    span: Range<usize>,
    kind: Kind,
}

/// PANs and e-mail local parts in `b`, in order, not overlapping.
fn find(b: &[u8]) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    // Where the last e-mail address ended: a local part never reaches back past it.
    let mut floor = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'@' {
            if let Some((name, domain_end)) = email_at(b, i, floor) {
                // A PAN-like local part is masked as the e-mail address it is.
                while found.last().is_some_and(|f| f.span.start >= name.start) {
                    found.pop();
                }
                found.push(Found {
                    span: name,
                    kind: Kind::EmailName,
                });
                floor = domain_end;
                i = domain_end;
                continue;
            }
        } else if is_pan_at(b, i) {
            found.push(Found {
                span: i..i + 10,
                kind: Kind::Pan,
            });
            i += 10;
            continue;
        }
        i += 1;
    }
    found
}

fn is_pan_at(b: &[u8], i: usize) -> bool {
    let Some(candidate) = b.get(i..i + 10) else {
        return false;
    };
    let alone = (i == 0 || !b[i - 1].is_ascii_alphanumeric())
        && b.get(i + 10).is_none_or(|c| !c.is_ascii_alphanumeric());
    alone
        && candidate[..5].iter().all(u8::is_ascii_alphabetic)
        && candidate[5..9].iter().all(u8::is_ascii_digit)
        && candidate[9].is_ascii_alphabetic()
}

/// The local part of the e-mail address whose `@` is at `at`, and where its domain
/// ends, or None when the text around the `@` is not an address.
fn email_at(b: &[u8], at: usize, floor: usize) -> Option<(Range<usize>, usize)> {
    let is_name = |c: u8| c.is_ascii_alphanumeric() || b"._%+-".contains(&c);
    let mut start = at;
    while start > floor && is_name(b[start - 1]) {
        start -= 1;
    }
    // A sentence's dots are not part of the name: "see ...r@example.com".
    while start < at && b[start] == b'.' {
        start += 1;
    }
    if start == at {
        return None;
    }
    let is_domain = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'-';
    let mut end = at + 1;
    while end < b.len() && is_domain(b[end]) {
        end += 1;
    }
    // Nor is the full stop that ends a sentence.
    while end > at + 1 && matches!(b[end - 1], b'.' | b'-') {
        end -= 1;
    }
    let domain = &b[at + 1..end];
    let mut labels = domain.split(|&c| c == b'.');
    let last = labels.next_back()?;
    let valid = domain.contains(&b'.')
        && labels.all(|l| !l.is_empty() && l[0].is_ascii_alphanumeric())
        && last.len() >= 2
        && last.iter().all(u8::is_ascii_alphabetic);
    valid.then_some((start..at, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> String {
        text(s).into_owned()
    }

    #[test]
    fn pans_keep_two_characters_at_each_end() {
        assert_eq!(t("ABCDE1234F"), "ABXXXXXX4F");
        assert_eq!(t("PAN: ABCDE1234F."), "PAN: ABXXXXXX4F.");
        assert_eq!(t("abcde1234f"), "abXXXXXX4f", "either case");
        assert_eq!(
            t("ABCDE1234F,PQRST6789Z"),
            "ABXXXXXX4F,PQXXXXXX9Z",
            "one after the other"
        );
        assert_eq!(t("pan_ABCDE1234F_x"), "pan_ABXXXXXX4F_x", "_ is a boundary");
        assert_eq!(t("é ABCDE1234F ü"), "é ABXXXXXX4F ü", "UTF-8 around it");
        assert_eq!(
            t("éABCDE1234Fü"),
            "éABXXXXXX4Fü",
            "non-ASCII letters touch it"
        );
    }

    #[test]
    fn what_is_not_a_pan_is_left_alone() {
        for s in [
            "XABCDE1234F",  // a letter before
            "ABCDE1234FX",  // a letter after
            "1ABCDE1234F",  // a digit before
            "ABCDE1234F1",  // a digit after
            "ABCD1234F",    // four letters
            "ABCDE123F",    // three digits
            "ABCDE12345",   // a digit last
            "ABCDE1234",    // short
            "ABCDE-1234-F", // separated
            "contract-notes/2026-11-20",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "https://artifacts.example.invalid/notes/2026-11-20/C1.pdf",
            "bad PAN on line 7",
            "",
        ] {
            assert!(matches!(text(s), Cow::Borrowed(_)), "{s:?} was masked");
        }
    }

    #[test]
    fn emails_keep_the_first_letter_and_the_domain() {
        assert_eq!(t("r.sharma@example.com"), "r***@example.com");
        assert_eq!(t("a@b.co"), "a***@b.co");
        assert_eq!(
            t("mail to <Ravi.Sharma+notes@mail.example.co.in> failed"),
            "mail to <R***@mail.example.co.in> failed"
        );
        assert_eq!(
            t("bounced: r@example.com."),
            "bounced: r***@example.com.",
            "the full stop is not the domain's"
        );
        assert_eq!(t("see ...r@example.com"), "see ...r***@example.com");
        assert_eq!(t("to=r_s@example.org"), "to=r***@example.org");
        assert_eq!(t("mailto:r1@ex-ample.com"), "mailto:r***@ex-ample.com");
        assert_eq!(
            t("a@x.com,b@y.org"),
            "a***@x.com,b***@y.org",
            "one after the other"
        );
        assert_eq!(
            t("ABCDE1234F@example.com"),
            "A***@example.com",
            "a PAN-like name is masked as a name"
        );
        assert_eq!(
            t("r@example.com ABCDE1234F"),
            "r***@example.com ABXXXXXX4F",
            "both"
        );
    }

    #[test]
    fn what_is_not_an_email_is_left_alone() {
        for s in [
            "@example.com",           // no name
            "r@",                     // no domain
            "r@localhost",            // no dot
            "r@example.c",            // one-letter top-level domain
            "r@example.123",          // numeric top-level domain
            "r@.example.com",         // empty label
            "r@example..com",         // empty label
            "run contract-notes#7@2", // a run name
            "a @ b.com",
            "user@@example.com",
        ] {
            assert!(matches!(text(s), Cow::Borrowed(_)), "{s:?} was masked");
        }
    }

    #[test]
    fn json_strings_are_masked_and_stay_json() {
        let args = r#"{"client":{"pan":"ABCDE1234F","email":"r.sharma@example.com","name":"R Sharma","line":7},"r.sharma@example.com":1}"#;
        let masked = json(args);
        assert_eq!(
            masked,
            r#"{"client":{"pan":"ABXXXXXX4F","email":"r***@example.com","name":"R Sharma","line":7},"r***@example.com":1}"#
        );
        serde_json::from_str::<serde_json::Value>(&masked).expect("still JSON");
    }

    #[test]
    fn json_escapes_are_boundaries_and_stay_whole() {
        // After `\n` a PAN still stands alone; an address is found after `\t`.
        assert_eq!(
            json(r#""line 1\nABCDE1234F\tr.sharma@example.com""#),
            r#""line 1\nABXXXXXX4F\tr***@example.com""#
        );
        // Never cut into an escape: `\u0041` stays, the name starts after it.
        assert_eq!(
            json(r#""\u0041b.c@example.com""#),
            r#""\u0041b***@example.com""#
        );
        // An escaped quote does not end the string.
        assert_eq!(
            json(r#"["say \"ABCDE1234F\"", "ABCDE1234F"]"#),
            r#"["say \"ABXXXXXX4F\"", "ABXXXXXX4F"]"#
        );
        for s in [
            r#""\\ABCDE1234F""#,
            r#"{"\u00e9":"r@example.com\\"}"#,
            r#""\"r@example.com\"""#,
        ] {
            let masked = json(s);
            assert!(matches!(masked, Cow::Owned(_)), "{s}");
            serde_json::from_str::<serde_json::Value>(&masked)
                .unwrap_or_else(|e| panic!("{s} → {masked}: {e}"));
        }
    }

    #[test]
    fn json_outside_strings_and_without_personal_data_is_untouched() {
        for s in [
            "null",
            "12345",
            r#"{"n":1.50,"big":123456789012345678901234567890}"#,
            r#"{"pan":null,"trades":[1,2,3]}"#,
            r#"["ABCDE1234"]"#,
        ] {
            assert!(matches!(json(s), Cow::Borrowed(_)), "{s}");
        }
        // Text that is not JSON (never given: payloads pass through `wire::raw` first)
        // neither panics nor grows.
        assert_eq!(
            json(r#""unterminated ABCDE1234F"#),
            r#""unterminated ABCDE1234F"#
        );
        assert_eq!(json(r#""\"#), r#""\"#);
        assert_eq!(json(r#""\u00"#), r#""\u00"#);
    }

    #[test]
    fn a_payload_of_many_clients_is_masked_throughout() {
        let clients: Vec<serde_json::Value> = (0..200)
            .map(|i| {
                serde_json::json!({
                    "pan": format!("ABCDE{:04}F", i),
                    "email": format!("client{i}@example.com"),
                })
            })
            .collect();
        let raw = serde_json::to_string(&clients).unwrap();
        let masked = json(&raw);
        let back: Vec<serde_json::Value> = serde_json::from_str(&masked).unwrap();
        for (i, c) in back.iter().enumerate() {
            assert_eq!(c["pan"], format!("ABXXXXXX{}F", i % 10));
            assert_eq!(c["email"], "c***@example.com");
        }
    }
}
