//! The one place a [`Mail`] becomes RFC 5322 bytes, so the outbox and SMTP agree.

use lettre::address::Envelope;
use lettre::message::header::{ContentTransferEncoding, ContentType};
use lettre::message::{Attachment as Part, Body, Mailbox, MultiPart, SinglePart};
use lettre::Message;

use crate::{Mail, MailError, Reason};

/// The RFC 5322 bytes of `mail`: CRLF line endings, 7-bit clean (headers encoded per
/// RFC 2047/2231, text quoted-printable when needed, attachments base64), a `Date` of
/// now and `Message-ID: <mail.message_id>`. Refuses malformed input with
/// [`MailError::Invalid`], naming the field but never echoing its value.
pub fn build_message(mail: &Mail) -> Result<Vec<u8>, MailError> {
    Ok(compose(mail)?.1)
}

/// The SMTP envelope (from the `From` and `To` addresses) and the message bytes.
pub(crate) fn compose(mail: &Mail) -> Result<(Envelope, Vec<u8>), MailError> {
    check_message_id(&mail.message_id)?;
    let from = mailbox("from", &mail.from)?;
    let to = mailbox("to", &mail.to)?;
    one_line("subject", &mail.subject)?;
    let envelope = Envelope::new(Some(from.email.clone()), vec![to.email.clone()])
        .map_err(|_| invalid("to", "an envelope with one recipient"))?;

    let builder = Message::builder()
        .message_id(Some(format!("<{}>", mail.message_id)))
        .from(from)
        .to(to)
        .subject(mail.subject.clone());
    // A String body gets CRLF line endings and the cheapest of 7bit / quoted-printable /
    // base64; never 8bit, so no server needs 8BITMIME.
    let text = SinglePart::plain(mail.text.clone());
    let message = if mail.attachments.is_empty() {
        builder.singlepart(text)
    } else {
        let mut parts = MultiPart::mixed()
            // Derived from the id, not random: the bytes depend only on the mail and
            // the date.
            .boundary(boundary(&mail.message_id))
            .singlepart(text);
        for (i, a) in mail.attachments.iter().enumerate() {
            let field = format!("attachments[{i}]");
            if a.filename.trim().is_empty() {
                return Err(invalid(&field, "a file name, got an empty one"));
            }
            one_line(&format!("{field}.filename"), &a.filename)?;
            let content_type = ContentType::parse(&a.content_type).map_err(|_| {
                invalid(
                    &format!("{field}.content_type"),
                    "a MIME type such as application/pdf",
                )
            })?;
            let body = Body::new_with_encoding(a.bytes.clone(), ContentTransferEncoding::Base64)
                .map_err(|_| invalid(&field, "bytes that base64 can carry"))?;
            parts = parts.singlepart(Part::new(a.filename.clone()).body(body, content_type));
        }
        builder.multipart(parts)
    }
    .map_err(|e| MailError::Invalid(Reason::because("building the message", e)))?;
    Ok((envelope, message.formatted()))
}

fn invalid(field: &str, expected: &str) -> MailError {
    MailError::Invalid(format!("{field}: expected {expected}").into())
}

fn mailbox(field: &str, value: &str) -> Result<Mailbox, MailError> {
    value.parse::<Mailbox>().map_err(|_| {
        invalid(
            field,
            "one address as `Name <user@host>` or `user@host`, got something else",
        )
    })
}

fn one_line(field: &str, value: &str) -> Result<(), MailError> {
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(invalid(
            field,
            "one line of text, got a line break or control character",
        ));
    }
    Ok(())
}

/// `id-left "@" id-right` of RFC 5322 in its dot-atom form, which is what brokers'
/// ids look like (`CN-2026-11-20-C0001@broker.example`); brackets are added here.
fn check_message_id(id: &str) -> Result<(), MailError> {
    let atext = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c);
    let dot_atom =
        |s: &str| !s.is_empty() && s.split('.').all(|a| !a.is_empty() && a.chars().all(atext));
    let ok =
        id.len() <= 250 && matches!(id.split_once('@'), Some((l, r)) if dot_atom(l) && dot_atom(r));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "message_id",
            "`left@right` of letters, digits, dots and -_ (no <>, spaces or second @)",
        ))
    }
}

fn boundary(message_id: &str) -> String {
    // FNV-1a: stable across releases, unlike std's hasher.
    let h = message_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("=_tranche_{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Attachment;

    fn mail() -> Mail {
        Mail {
            message_id: "CN-2026-11-20-C0001@broker.example".into(),
            from: "Broker Ltd <notes@broker.example>".into(),
            to: "Asha Rao <asha@client.example>".into(),
            subject: "Contract note 2026-11-20 ₹".into(),
            text: "Dear client,\nplease find attached.\n.\nEnd".into(),
            attachments: vec![Attachment {
                filename: "CN-2026-11-20-C0001.pdf".into(),
                content_type: "application/pdf".into(),
                bytes: (0..=255u8).cycle().take(5000).collect(),
            }],
        }
    }

    #[test]
    fn crlf_only_and_seven_bit() {
        let bytes = build_message(&mail()).unwrap();
        assert!(bytes.is_ascii());
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                assert_eq!(bytes[i - 1], b'\r', "bare LF at {i}");
            }
        }
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.contains("Message-ID: <CN-2026-11-20-C0001@broker.example>\r\n"));
        assert!(text.contains("Content-Transfer-Encoding: base64"));
    }

    #[test]
    fn message_ids_are_dot_atoms() {
        for good in [
            "a@b",
            "CN-2026-11-20-C0001@broker.example",
            "x.y_z@h-1.example",
        ] {
            check_message_id(good).unwrap();
        }
        for bad in [
            "", "a", "<a@b>", "a b@c", "a@b@c", "a@", "@b", "a..b@c", "a@b\r\n",
        ] {
            assert!(check_message_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_list_of_recipients_is_refused() {
        let mut m = mail();
        m.to = "a@x.example, b@y.example".into();
        let err = build_message(&m).unwrap_err();
        assert!(matches!(err, MailError::Invalid(_)), "{err}");
        assert!(!err.to_string().contains("x.example"), "{err}");
    }
}
