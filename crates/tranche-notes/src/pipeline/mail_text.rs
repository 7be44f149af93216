//! The wording of the contract-note e-mail, kept in `templates/contract-note-mail.txt`
//! (its header says how it is written) so that it changes without touching Rust. Filled
//! by plain `{name}` replacement: the mail needs no more than that.

use chrono::NaiveDate;

const TEMPLATE: &str = include_str!("../../templates/contract-note-mail.txt");

/// What the mail says about one note.
pub(crate) struct NoteMail<'a> {
    pub(crate) number: &'a str,
    pub(crate) date: NaiveDate,
    pub(crate) client_name: &'a str,
    pub(crate) broker_name: &'a str,
    /// The note a corrected note replaces.
    pub(crate) replaces: Option<&'a str>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MailText {
    pub(crate) subject: String,
    /// With CRLF line endings, as mail wants them.
    pub(crate) body: String,
}

impl NoteMail<'_> {
    pub(crate) fn text(&self) -> MailText {
        let date = self.date.to_string();
        let replaces = self.replaces.unwrap_or_default();
        let mut values = vec![
            ("number", self.number),
            ("date", &date),
            ("client", self.client_name),
            ("broker", self.broker_name),
            ("replaces", replaces),
        ];
        let (subject, correction) = match self.replaces {
            None => (section("subject"), String::new()),
            Some(_) => (
                section("corrected subject"),
                fill(section("correction"), &values),
            ),
        };
        values.push(("correction", &correction));
        MailText {
            subject: fill(subject, &values).trim_end().to_string(),
            body: fill(section("body"), &values).replace('\n', "\r\n"),
        }
    }
}

/// The lines below `[name]` up to the next section, each with its line ending, without
/// the blank lines at the end.
fn section(name: &str) -> &'static str {
    let header = format!("\n[{name}]\n");
    let start = TEMPLATE
        .find(&header)
        .map(|at| at + header.len())
        .unwrap_or_else(|| panic!("the mail template has a [{name}] section"));
    let rest = &TEMPLATE[start..];
    let end = rest.find("\n[").map_or(rest.len(), |at| at + 1);
    let text = rest[..end].trim_end_matches('\n');
    &rest[..text.len() + 1]
}

/// `text` with each `{name}` of `values` replaced by its value, in one pass (a value
/// that itself holds braces is left alone); other braces stay as they are.
fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let known = after.find('}').and_then(|close| {
            let name = &after[..close];
            values
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v, close))
        });
        match known {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 20).unwrap()
    }

    // The wording as it was written in Rust before it moved to the template.
    #[test]
    fn a_note_reads_as_before() {
        let text = NoteMail {
            number: "CN/20261120/0000003",
            date: date(),
            client_name: "Asha Rao",
            broker_name: "Example Securities",
            replaces: None,
        }
        .text();
        assert_eq!(
            text.subject,
            "Contract note CN/20261120/0000003 for trades of 2026-11-20"
        );
        assert_eq!(
            text.body,
            "Dear Asha Rao,\r\n\r\nPlease find attached your contract note cum tax invoice CN/20261120/0000003 for your trades of 2026-11-20.\r\nThe PDF is digitally signed by Example Securities and protected with a password (as notified to you).\r\n\r\nThis is an automated message.\r\n"
        );
    }

    #[test]
    fn a_corrected_note_reads_as_before() {
        let text = NoteMail {
            number: "CN/20261120/0000011",
            date: date(),
            client_name: "Asha Rao",
            broker_name: "Example Securities",
            replaces: Some("CN/20261120/0000003"),
        }
        .text();
        assert_eq!(
            text.subject,
            "Corrected contract note CN/20261120/0000011 for trades of 2026-11-20 (replaces CN/20261120/0000003)"
        );
        assert_eq!(
            text.body,
            "Dear Asha Rao,\r\n\r\nPlease find attached your contract note cum tax invoice CN/20261120/0000011 for your trades of 2026-11-20.\r\n\r\nIt replaces contract note CN/20261120/0000003, which was sent to you with incorrect details: please disregard that one.\r\nThe PDF is digitally signed by Example Securities and protected with a password (as notified to you).\r\n\r\nThis is an automated message.\r\n"
        );
    }

    #[test]
    fn values_are_not_filled_again_and_unknown_braces_stay() {
        let values = [("client", "{date} {x"), ("date", "2026-11-20")];
        assert_eq!(
            fill("{client} on {date}, {other} {", &values),
            "{date} {x on 2026-11-20, {other} {"
        );
    }

    #[test]
    fn every_placeholder_of_the_template_is_known() {
        for name in ["subject", "corrected subject", "body", "correction"] {
            let filled = fill(
                section(name),
                &[
                    ("number", "N"),
                    ("date", "D"),
                    ("client", "C"),
                    ("broker", "B"),
                    ("replaces", "R"),
                    ("correction", "X"),
                ],
            );
            assert!(!filled.contains('{'), "[{name}]: {filled}");
        }
    }
}
