//! The outbox: the conformance suite, and what only a local directory has (modes,
//! an absolute location, a directory made on demand).

use std::os::unix::fs::PermissionsExt;

use tranche_ach_delivery::{conformance, Delivery, DeliveryError, Outbox};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new(dir.path().join("outbox")).unwrap();
    conformance::exercise(&outbox, outbox.dir()).await;
}

#[tokio::test]
async fn the_directory_is_made_owner_only_and_named_absolutely() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/outbox");
    let outbox = Outbox::new(&nested).unwrap();
    let mode = std::fs::metadata(&nested).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let abs = std::fs::canonicalize(&nested).unwrap();
    assert_eq!(outbox.location(), format!("outbox:{}", abs.display()));
    assert_eq!(outbox.dir(), abs);

    // A relative path is named by where it is.
    let here = std::env::current_dir().unwrap();
    let relative = pathdiff(&nested, &here);
    let again = Outbox::new(&relative).unwrap();
    assert_eq!(again.location(), outbox.location());
}

/// `to` relative to `from` (`../..` as needed).
fn pathdiff(to: &std::path::Path, from: &std::path::Path) -> std::path::PathBuf {
    let to = std::fs::canonicalize(to).unwrap();
    let from = std::fs::canonicalize(from).unwrap();
    let common = to
        .components()
        .zip(from.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = std::path::PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    for c in to.components().skip(common) {
        rel.push(c);
    }
    rel
}

#[tokio::test]
async fn an_outbox_that_cannot_be_made_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    let err = Outbox::new(file.join("outbox")).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("a-file/outbox"), "{message}");
    assert!(!err.is_transient(), "{err:?}");
}

#[tokio::test]
async fn a_vanished_outbox_fails_naming_the_file_and_needs_a_person() {
    let dir = tempfile::tempdir().unwrap();
    let outbox = Outbox::new(dir.path().join("gone")).unwrap();
    std::fs::remove_dir(dir.path().join("gone")).unwrap();
    let err = outbox.deliver("PAY.ach", b"101").await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&outbox.location()), "{message}");
    assert!(message.contains("PAY.ach"), "{message}");
    assert!(!err.is_transient(), "{err:?}");
    assert!(matches!(err, DeliveryError::Failed { .. }), "{err:?}");
}

#[tokio::test]
async fn a_full_disk_is_transient_and_leaves_no_file() {
    let Some(disk) = tranche_test_support::SmallDisk::mount("256k") else {
        return;
    };
    let outbox = Outbox::new(disk.path().join("outbox")).unwrap();
    let filler = disk.fill_but("filler", 16 * 1024);
    let bytes = conformance::sample_file(1, 100_000);
    let err = outbox.deliver("PAY.ach", &bytes).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(outbox.find("PAY.ach").await.unwrap(), None);
    let left: Vec<_> = std::fs::read_dir(outbox.dir()).unwrap().collect();
    assert!(left.is_empty(), "the temporary was left: {left:?}");
    // Space freed, the same file goes.
    std::fs::remove_file(filler).unwrap();
    outbox.deliver("PAY.ach", &bytes).await.unwrap();
    assert_eq!(
        outbox.find("PAY.ach").await.unwrap(),
        Some(tranche_ach_delivery::sha256_hex(&bytes))
    );
}
