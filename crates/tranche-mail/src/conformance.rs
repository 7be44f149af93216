//! The suite every [`Mailer`] passes, run unchanged against each implementation.
//!
//! `read_back(message_id)` returns the stored or delivered message with that
//! `Message-ID` as the receiving side has it (an `.eml` file, a mailbox file), or
//! `None`; it should panic if it finds the id more than once.

use std::sync::atomic::{AtomicU64, Ordering};

use mail_parser::{MessageParser, MimeHeaders};

use crate::{Attachment, Mail, MailError, Mailer};

/// A stand-in for a signed contract note: `len` bytes holding every byte value and the
/// sequences a careless SMTP client mangles (`\r\n.\r\n`, bare `\n`, `\r`, NUL).
pub fn sample_pdf(len: usize) -> Vec<u8> {
    let mut bytes = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\r\n.\r\n\n.\n\r\0From x\r\n".to_vec();
    let mut x: u32 = 0x2545_f491;
    while bytes.len() < len {
        // xorshift: every byte value, no structure a transfer could get right by luck.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.push((x >> 24) as u8);
    }
    bytes.truncate(len);
    bytes
}

/// A contract-note mail as the pipeline sends it: text and one PDF of `pdf_len` bytes.
pub fn sample_mail(message_id: &str, to: &str, pdf_len: usize) -> Mail {
    Mail {
        message_id: message_id.to_string(),
        from: "Brokér Securities <notes@broker.example>".into(),
        to: to.to_string(),
        subject: "Contract note cum tax invoice 2026-11-20 — net ₹ 1,23,456.70".into(),
        text: "Dear client,\n\nPlease find attached your contract note for 2026-11-20.\n\
               The PDF is protected with your PAN.\n\n-- \nBrokér Securities\n"
            .into(),
        attachments: vec![Attachment {
            filename: "CN-2026-11-20-C0001.pdf".into(),
            content_type: "application/pdf".into(),
            bytes: sample_pdf(pdf_len),
        }],
    }
}

/// Runs every check against `mailer`, reading each sent message back through
/// `read_back` (see above); panics at the first failure. Closes the mailer once along the
/// way and checks that it still sends after.
pub async fn exercise(mailer: &dyn Mailer, read_back: &dyn Fn(&str) -> Option<Vec<u8>>) {
    delivers_a_note_with_its_pdf(mailer, read_back).await;
    each_message_reaches_its_own_recipient(mailer, read_back).await;
    text_survives_line_endings_dots_and_non_ascii(mailer, read_back).await;
    mail_without_attachments(mailer, read_back).await;
    several_attachments(mailer, read_back).await;
    invalid_mail_is_refused_without_echoing_it(mailer, read_back).await;
    sends_after_close(mailer, read_back).await;
}

fn unique_id(tag: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("CN-{tag}-{nanos}-{n}@conformance.tranche.example")
}

async fn send_ok(mailer: &dyn Mailer, mail: &Mail) {
    let sent = mailer
        .send(mail)
        .await
        .unwrap_or_else(|e| panic!("sending {}: {e}", mail.message_id));
    assert_eq!(sent.message_id, mail.message_id);
    assert!(!sent.reply.is_empty(), "a reply or a path");
}

fn fetch(read_back: &dyn Fn(&str) -> Option<Vec<u8>>, id: &str) -> Vec<u8> {
    read_back(id).unwrap_or_else(|| panic!("{id} was sent but cannot be read back"))
}

fn lf(s: &str) -> String {
    s.replace("\r\n", "\n").trim_end().to_string()
}

/// Parses `raw` and checks every field of `mail` survived.
fn assert_same(raw: &[u8], mail: &Mail) {
    let parsed = MessageParser::default()
        .parse(raw)
        .unwrap_or_else(|| panic!("{}: not a parseable message", mail.message_id));
    let id = &mail.message_id;
    assert_eq!(parsed.message_id(), Some(id.as_str()), "Message-ID");
    assert_eq!(
        parsed.subject(),
        Some(mail.subject.as_str()),
        "{id}: Subject"
    );
    let expect: lettre::message::Mailbox = mail.from.parse().unwrap();
    let from = parsed.from().and_then(|a| a.first()).expect("From");
    assert_eq!(from.address(), Some(expect.email.as_ref()), "{id}: From");
    assert_eq!(from.name(), expect.name.as_deref(), "{id}: From name");
    let expect: lettre::message::Mailbox = mail.to.parse().unwrap();
    let to = parsed.to().and_then(|a| a.first()).expect("To");
    assert_eq!(to.address(), Some(expect.email.as_ref()), "{id}: To");
    assert!(parsed.header_raw("Date").is_some(), "{id}: Date");
    let text = parsed.body_text(0).expect("a text part");
    assert_eq!(lf(&text), lf(&mail.text), "{id}: text");
    let got: Vec<_> = parsed.attachments().collect();
    assert_eq!(got.len(), mail.attachments.len(), "{id}: attachments");
    for (part, want) in got.iter().zip(&mail.attachments) {
        assert_eq!(part.attachment_name(), Some(want.filename.as_str()), "{id}");
        let ct = part.content_type().expect("Content-Type");
        assert_eq!(
            format!("{}/{}", ct.ctype(), ct.subtype().unwrap_or("")),
            want.content_type,
            "{id}: {}",
            want.filename
        );
        assert!(
            part.contents() == want.bytes.as_slice(),
            "{id}: {} differs from what was sent ({} bytes read, {} sent)",
            want.filename,
            part.contents().len(),
            want.bytes.len()
        );
    }
}

async fn delivers_a_note_with_its_pdf(
    mailer: &dyn Mailer,
    read_back: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    let mail = sample_mail(
        &unique_id("pdf"),
        "Asha Rao <asha.rao@client.example>",
        150_000,
    );
    send_ok(mailer, &mail).await;
    assert_same(&fetch(read_back, &mail.message_id), &mail);
}

/// A night's end closes the mailer; a worker serving the next night sends again.
async fn sends_after_close(mailer: &dyn Mailer, read_back: &dyn Fn(&str) -> Option<Vec<u8>>) {
    mailer.close().await;
    let mail = sample_mail(&unique_id("closed"), "asha.rao@client.example", 1_000);
    send_ok(mailer, &mail).await;
    assert_same(&fetch(read_back, &mail.message_id), &mail);
    mailer.close().await;
}

async fn each_message_reaches_its_own_recipient(
    mailer: &dyn Mailer,
    read_back: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    let mails: Vec<Mail> = (0..6)
        .map(|i| {
            let mut m = sample_mail(
                &unique_id(&format!("each{i}")),
                &format!("client{i}@client{i}.example"),
                2_000 + i * 1_000,
            );
            m.subject = format!("Contract note C{i:04}");
            m
        })
        .collect();
    futures::future::join_all(mails.iter().map(|m| send_ok(mailer, m))).await;
    for m in &mails {
        assert_same(&fetch(read_back, &m.message_id), m);
    }
}

async fn text_survives_line_endings_dots_and_non_ascii(
    mailer: &dyn Mailer,
    read_back: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    let mut mail = sample_mail(&unique_id("text"), "client@client.example", 100);
    mail.text = format!(
        "bare LF\nCRLF\r\n.\n..two dots\nFrom the desk\n\
         पता: मुंबई, ₹ 1,000 ✓\n{}\nend",
        "long line ".repeat(150)
    );
    send_ok(mailer, &mail).await;
    assert_same(&fetch(read_back, &mail.message_id), &mail);
}

async fn mail_without_attachments(
    mailer: &dyn Mailer,
    read_back: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    let mut mail = sample_mail(&unique_id("plain"), "client@client.example", 0);
    mail.attachments.clear();
    send_ok(mailer, &mail).await;
    assert_same(&fetch(read_back, &mail.message_id), &mail);
}

async fn several_attachments(mailer: &dyn Mailer, read_back: &dyn Fn(&str) -> Option<Vec<u8>>) {
    let mut mail = sample_mail(&unique_id("multi"), "client@client.example", 30_000);
    mail.attachments.push(Attachment {
        filename: "Annexure – trades ₹.csv".into(),
        content_type: "text/csv".into(),
        bytes: "trade_id,qty\r\nT1,10\nT2,20\n".into(),
    });
    send_ok(mailer, &mail).await;
    assert_same(&fetch(read_back, &mail.message_id), &mail);
}

async fn invalid_mail_is_refused_without_echoing_it(
    mailer: &dyn Mailer,
    read_back: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    let secret = "secret.client@private.example";
    let base = || sample_mail(&unique_id("invalid"), secret, 10);
    let cases: Vec<(&str, Mail)> = vec![
        (
            "message id in brackets",
            Mail {
                message_id: format!("<{}>", unique_id("x")),
                ..base()
            },
        ),
        (
            "message id with a space",
            Mail {
                message_id: "a b@c.example".into(),
                ..base()
            },
        ),
        (
            "message id without @",
            Mail {
                message_id: "no-at-sign".into(),
                ..base()
            },
        ),
        (
            "two recipients",
            Mail {
                to: format!("{secret}, other@private.example"),
                ..base()
            },
        ),
        (
            "recipient not an address",
            Mail {
                to: format!("Client <{secret}"),
                ..base()
            },
        ),
        (
            "sender not an address",
            Mail {
                from: "notes at broker".into(),
                ..base()
            },
        ),
        (
            "header injection",
            Mail {
                subject: format!("Note\r\nBcc: {secret}"),
                ..base()
            },
        ),
        ("bad content type", {
            let mut m = base();
            m.attachments[0].content_type = "pdf".into();
            m
        }),
        ("file name with a line break", {
            let mut m = base();
            m.attachments[0].filename = "a\r\nb.pdf".into();
            m
        }),
    ];
    for (case, mail) in cases {
        match mailer.send(&mail).await {
            Err(MailError::Invalid(message)) => {
                assert!(
                    !message.contains(secret),
                    "{case}: the error echoes the address: {message}"
                );
                assert!(
                    !message.contains("Dear client"),
                    "{case}: the error echoes the body"
                );
            }
            other => panic!("{case}: expected Invalid, got {other:?}"),
        }
        assert!(
            read_back(&mail.message_id).is_none(),
            "{case}: was delivered"
        );
    }
}
