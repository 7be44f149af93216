//! The outbox mailer: the conformance suite, and the files it leaves.

use tranche_mail::{build_message, conformance, Mailer, OutboxMailer};

#[tokio::test]
async fn outbox_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path().join("outbox")).unwrap();
    conformance::exercise(&outbox, &|id| std::fs::read(outbox.path_for(id)).ok()).await;
}

#[tokio::test]
async fn one_eml_per_message_named_by_its_id_and_no_temporaries() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path()).unwrap();
    let mail = conformance::sample_mail(
        "CN-2026-11-20-C0001+x@broker.example",
        "c@client.example",
        1000,
    );
    let sent = outbox.send(&mail).await.unwrap();
    let path = dir.path().join("CN-2026-11-20-C0001_x_broker.example.eml");
    assert_eq!(sent.reply, path.display().to_string());
    // A redelivered job that sends again replaces the file: still one per message.
    outbox.send(&mail).await.unwrap();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["CN-2026-11-20-C0001_x_broker.example.eml".to_string()]
    );

    // What SMTP would carry: CRLF only, 7-bit. (Date and nothing else may differ.)
    let eml = std::fs::read(&path).unwrap();
    assert!(eml.is_ascii());
    assert!(
        !eml.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'),
        "bare LF"
    );
    let fresh = build_message(&mail).unwrap();
    let without_date = |b: &[u8]| -> Vec<String> {
        String::from_utf8(b.to_vec())
            .unwrap()
            .split("\r\n")
            .filter(|l| !l.starts_with("Date: "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(without_date(&eml), without_date(&fresh));
}

#[tokio::test]
async fn an_unwritable_outbox_is_a_temporary_failure() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path().join("gone")).unwrap();
    std::fs::remove_dir(dir.path().join("gone")).unwrap();
    let mail = conformance::sample_mail("a@b.example", "c@client.example", 10);
    let err = outbox.send(&mail).await.unwrap_err();
    assert!(err.is_temporary(), "{err}");
    assert!(!err.to_string().contains("c@client.example"), "{err}");
}

#[tokio::test]
async fn the_outbox_and_its_messages_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let outbox = OutboxMailer::new(dir.path().join("outbox")).unwrap();
    let mail = conformance::sample_mail("m1@broker.example", "c@client.example", 10);
    outbox.send(&mail).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("outbox")), 0o700);
    assert_eq!(mode(&outbox.path_for("m1@broker.example")), 0o600);
}
