//! aiosmtpd handlers that fail on purpose (tests/smtp_server/faults.py): 4xx replies
//! are retried within a send, 5xx are permanent with the server's reply.

use crate::smtp_server;

use std::time::Duration;

use smtp_server::{header, Aiosmtpd};
use tranche_mail::{conformance, MailError, Mailer, SmtpConfig, SmtpMailer};

fn mailer(url: &str, max_attempts: u32) -> SmtpMailer {
    SmtpMailer::new(SmtpConfig {
        max_attempts,
        pool_size: 2,
        ..SmtpConfig::new(url)
    })
    .unwrap()
    .with_retry_backoff(Duration::from_millis(20))
}

#[tokio::test]
async fn a_451_is_retried_and_the_mail_delivered_once() {
    let Some(server) = Aiosmtpd::with_handler("faults.TempFailFirst", &["2"]) else {
        return;
    };
    let smtp = mailer(&server.url(), 3);
    let mail = conformance::sample_mail("CN-1@broker.example", "client@client.example", 20_000);
    let sent = smtp.send(&mail).await.unwrap();
    assert!(sent.reply.starts_with("250"), "{}", sent.reply);
    let messages = server.messages();
    assert_eq!(messages.len(), 1, "delivered exactly once");
    assert_eq!(
        header(&messages[0], "Message-ID").as_deref(),
        Some("<CN-1@broker.example>")
    );
    assert_eq!(
        header(&messages[0], "X-RcptTo").as_deref(),
        Some("client@client.example")
    );
}

#[tokio::test]
async fn a_451_past_the_attempts_is_temporary() {
    let Some(server) = Aiosmtpd::with_handler("faults.TempFailFirst", &["5"]) else {
        return;
    };
    let smtp = mailer(&server.url(), 2);
    let mail = conformance::sample_mail("CN-1@broker.example", "client@client.example", 100);
    match smtp.send(&mail).await {
        Err(MailError::Temporary(m)) => {
            assert!(
                m.contains("451") && m.contains("temporarily rejected"),
                "{m}"
            );
            assert!(m.contains("after 2 attempts"), "{m}");
        }
        other => panic!("expected Temporary, got {other:?}"),
    }
    assert!(server.messages().is_empty());
    // The engine retries the job later: three more 451s, then the server accepts.
    let smtp = mailer(&server.url(), 4);
    smtp.send(&mail).await.unwrap();
    assert_eq!(server.messages().len(), 1);
}

#[tokio::test]
async fn a_550_is_permanent_with_the_reply_and_no_address() {
    let Some(server) = Aiosmtpd::with_handler("faults.RejectRecipient", &[]) else {
        return;
    };
    let smtp = mailer(&server.url(), 3);
    let mail = conformance::sample_mail("CN-1@broker.example", "asha@client.example", 100);
    match smtp.send(&mail).await {
        Err(MailError::Permanent(m)) => {
            assert!(m.starts_with("550 "), "{m}");
            assert!(
                m.contains("Recipient address rejected: User unknown"),
                "{m}"
            );
            assert!(!m.contains("asha@client.example"), "{m}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    assert_eq!(smtp.connections_opened(), 1, "a 5xx is not retried");
    assert!(server.messages().is_empty());
}
