//! The SMTP mailer against a real aiosmtpd: the conformance suite, envelopes, the
//! connection pool under load, and a server that is down or silent.

use crate::smtp_server;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use smtp_server::{header, Aiosmtpd};
use tranche_mail::{conformance, MailError, Mailer, SmtpConfig, SmtpMailer};

fn mailer(url: &str, pool_size: u32) -> SmtpMailer {
    SmtpMailer::new(SmtpConfig {
        pool_size,
        timeout: Duration::from_secs(20),
        ..SmtpConfig::new(url)
    })
    .unwrap()
    .with_retry_backoff(Duration::from_millis(20))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smtp_passes_the_suite() {
    let Some(server) = Aiosmtpd::start() else {
        return;
    };
    let smtp = mailer(&server.url(), 4);
    conformance::exercise(&smtp, &|id| server.read_back(id)).await;
}

#[tokio::test]
async fn a_note_arrives_once_at_its_recipient_with_the_pdf_intact() {
    let Some(server) = Aiosmtpd::start() else {
        return;
    };
    let smtp = mailer(&server.url(), 1);
    let mail = conformance::sample_mail(
        "CN-2026-11-20-C0001@broker.example",
        "Asha Rao <asha.rao@client.example>",
        150_000,
    );
    let sent = smtp.send(&mail).await.unwrap();
    assert!(sent.reply.starts_with("250"), "{}", sent.reply);
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    let m = &messages[0];
    assert_eq!(
        header(m, "X-RcptTo").as_deref(),
        Some("asha.rao@client.example")
    );
    assert_eq!(
        header(m, "X-MailFrom").as_deref(),
        Some("notes@broker.example")
    );
    let parsed = mail_parser::MessageParser::default().parse(m).unwrap();
    assert_eq!(parsed.subject(), Some(mail.subject.as_str()));
    let pdf = parsed.attachments().next().unwrap();
    assert!(
        pdf.contents() == mail.attachments[0].bytes.as_slice(),
        "PDF bytes differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_sends_share_a_pool_of_four() {
    let Some(server) = Aiosmtpd::start() else {
        return;
    };
    let smtp = mailer(&server.url(), 4);
    let mails: Vec<_> = (0..200)
        .map(|i| {
            conformance::sample_mail(
                &format!("CN-2026-11-20-C{i:04}@broker.example"),
                &format!("client{i}@client.example"),
                2_000,
            )
        })
        .collect();
    let started = Instant::now();
    let results = futures::future::join_all(mails.iter().map(|m| smtp.send(m))).await;
    let took = started.elapsed();
    for r in &results {
        r.as_ref().unwrap();
    }

    let messages = server.messages();
    assert_eq!(messages.len(), 200, "every message once");
    let mut by_id: HashMap<String, String> = HashMap::new();
    let mut peers = HashSet::new();
    for m in &messages {
        let id = header(m, "Message-ID").unwrap();
        let rcpt = header(m, "X-RcptTo").unwrap();
        assert!(by_id.insert(id, rcpt).is_none(), "a message arrived twice");
        peers.insert(header(m, "X-Peer").unwrap());
    }
    for (i, m) in mails.iter().enumerate() {
        assert_eq!(
            by_id
                .get(&format!("<{}>", m.message_id))
                .map(String::as_str),
            Some(format!("client{i}@client.example").as_str())
        );
    }
    // Connections are bounded by the pool and reused: one client port per connection.
    assert!(
        peers.len() <= 4,
        "{} connections used: {peers:?}",
        peers.len()
    );
    assert!(
        smtp.connections_opened() <= 4,
        "{} opened",
        smtp.connections_opened()
    );
    eprintln!("200 messages over {} connections in {took:?}", peers.len());
    smtp.close().await;
}

#[tokio::test]
async fn a_server_that_is_down_is_a_temporary_failure() {
    let port = smtp_server::free_port();
    let smtp = SmtpMailer::new(SmtpConfig {
        max_attempts: 2,
        ..SmtpConfig::new(format!("smtp://127.0.0.1:{port}"))
    })
    .unwrap()
    .with_retry_backoff(Duration::from_millis(10));
    let mail = conformance::sample_mail("a@b.example", "secret@client.example", 10);
    match smtp.send(&mail).await {
        Err(MailError::Temporary(m)) => {
            assert!(m.contains("after 2 attempts"), "{m}");
            assert!(!m.contains("secret@client.example"), "{m}");
        }
        other => panic!("expected Temporary, got {other:?}"),
    }
}

#[tokio::test]
async fn a_silent_server_times_out_as_temporary() {
    // Accepts connections and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(4) {
            held.push(stream);
        }
        std::thread::park();
    });
    let smtp = SmtpMailer::new(SmtpConfig {
        timeout: Duration::from_millis(300),
        max_attempts: 2,
        ..SmtpConfig::new(format!("smtp://127.0.0.1:{port}"))
    })
    .unwrap()
    .with_retry_backoff(Duration::from_millis(10));
    let started = Instant::now();
    let err = smtp
        .send(&conformance::sample_mail(
            "a@b.example",
            "c@client.example",
            10,
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, MailError::Temporary(_)), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
