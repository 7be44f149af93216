//! The embedded ledger passes the suite, two handles on one file standing for two
//! processes; what it wrote survives closing and reopening.

use std::sync::Arc;

use tranche_ach_ledger::conformance::{self, sample_entry, sample_file};
use tranche_ach_ledger::{Ledger, LedgerError, PackageOutcome, SqliteLedger, State, FILE_NAME};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ledger_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let a = SqliteLedger::open(dir.path()).unwrap();
    let b = SqliteLedger::open(dir.path()).unwrap();
    conformance::exercise(Arc::new(a), Arc::new(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn races_hold_for_more_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let a: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(dir.path()).unwrap());
    let b: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(dir.path()).unwrap());
    for seed in 100..103 {
        conformance::concurrent_packagers_never_share_an_entry(a.clone(), b.clone(), seed).await;
        conformance::cancels_racing_packagers_and_submitters(a.clone(), b.clone(), seed).await;
    }
}

#[tokio::test]
async fn what_was_written_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    {
        let ledger = SqliteLedger::open(dir.path()).unwrap();
        assert_eq!(ledger.path(), dir.path().join(FILE_NAME));
        ledger
            .import(vec![
                sample_entry("r-1", "r", d, 1),
                sample_entry("r-2", "r", d, 2),
            ])
            .await
            .unwrap();
        let out = ledger
            .package(sample_file("r-F", "r", d), vec!["r-1".into()])
            .await
            .unwrap();
        assert!(matches!(out, PackageOutcome::Packaged(_)));
        ledger.cancel("r-2", "x").await.unwrap();
    }
    let ledger = SqliteLedger::open(dir.path()).unwrap();
    assert_eq!(
        ledger.entry("r-1").await.unwrap().unwrap().state,
        State::Packaged
    );
    assert_eq!(
        ledger.entry("r-2").await.unwrap().unwrap().state,
        State::Cancelled
    );
    assert_eq!(
        ledger.file("r-F").await.unwrap().unwrap().entry_ids,
        vec!["r-1"]
    );
}

#[tokio::test]
async fn a_file_of_a_newer_version_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteLedger::open(dir.path()).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join(FILE_NAME)).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    match SqliteLedger::open(dir.path()) {
        Err(e @ LedgerError::Newer { found: 99, .. }) => {
            assert!(e.to_string().contains("ledger.sqlite"), "{e}")
        }
        other => panic!("expected Newer, got {other:?}"),
    }
}

/// Ten rejected entries of a 10 MB field each (100 MB sent) grow the ledger's file
/// (and its write-ahead log) by well under a megabyte: each keeps an excerpt.
#[tokio::test]
async fn rejected_entries_of_huge_fields_do_not_grow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    let ledger = SqliteLedger::open(dir.path()).unwrap();
    let size = || {
        ["", "-wal"]
            .iter()
            .map(|s| {
                std::fs::metadata(dir.path().join(format!("{FILE_NAME}{s}"))).map_or(0, |m| m.len())
            })
            .sum::<u64>()
    };
    conformance::huge_rejected_fields_stay_small(&ledger, d, size).await;
}
