//! The fleet ledger passes the suite against a real PostgreSQL (skipped, saying why,
//! when PostgreSQL is not installed, unless TRANCHE_REQUIRE_TOOLS=1), two connection
//! pools standing for two machines; it rides out a server restart.

use std::sync::Arc;
use std::time::Duration;

use tranche_ach_ledger::conformance::{self, sample_entry, sample_file, ACCOUNT};
use tranche_ach_ledger::{
    Ledger, LedgerError, PackageOutcome, PostgresLedger, PostgresOptions, State, PASSWORD_ENV,
    PASSWORD_FILE_ENV,
};
use tranche_test_support::Postgres;
use tranche_types::SystemClock;

fn options(url: String) -> PostgresOptions {
    PostgresOptions {
        url,
        password: None,
        pool_size: 4,
        clock: Arc::new(SystemClock),
    }
}

async fn ledger(pg: &Postgres, db: &str) -> PostgresLedger {
    PostgresLedger::connect_with(options(pg.url(db)))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_ledger_passes_the_suite() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("suite");
    let a = ledger(&pg, "suite").await;
    let b = ledger(&pg, "suite").await;
    conformance::exercise(Arc::new(a), Arc::new(b)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn races_hold_for_more_seeds() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("races");
    let a: Arc<dyn Ledger> = Arc::new(ledger(&pg, "races").await);
    let b: Arc<dyn Ledger> = Arc::new(ledger(&pg, "races").await);
    for seed in 100..103 {
        conformance::concurrent_packagers_never_share_an_entry(a.clone(), b.clone(), seed).await;
        conformance::cancels_racing_packagers_and_submitters(a.clone(), b.clone(), seed).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_says_the_server_is_down_and_reconnects_when_it_is_back() {
    let Some(pg) = Postgres::start() else { return };
    let log = Log::capture();
    pg.create_database("restart");
    let ledger = ledger(&pg, "restart").await;
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    ledger
        .import(vec![
            sample_entry("k-1", "k", d, 1),
            sample_entry("k-2", "k", d, 2),
        ])
        .await
        .unwrap();
    let out = ledger
        .package(sample_file("k-F", "k", d), vec!["k-1".into()])
        .await
        .unwrap();
    assert!(matches!(out, PackageOutcome::Packaged(_)));

    pg.kill();
    match ledger.entry("k-1").await {
        Err(e @ LedgerError::Unavailable { .. }) => {
            let text = format!("{e}");
            assert!(
                text.contains("unavailable") && text.contains("127.0.0.1"),
                "{text}"
            );
            assert!(!text.contains("tranche@"), "the user is hidden: {text}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    pg.restart();
    let stored = tranche_test_support::poll_until_async(
        "the ledger reconnects",
        Duration::from_secs(30),
        async || ledger.entry("k-1").await.ok(),
    )
    .await
    .expect("k-1 survived");
    assert_eq!(stored.state, State::Packaged);
    assert_eq!(
        ledger.cancel("k-2", "x").await.unwrap(),
        tranche_ach_ledger::CancelOutcome::Cancelled {
            known: true,
            file_id: None
        }
    );
    assert_eq!(
        ledger.entry("k-2").await.unwrap().unwrap().state,
        State::Cancelled
    );
    // Every call failed while the server was down; the log says it once, and once
    // that it is back.
    let said = log.text();
    assert_eq!(said.matches("is unreachable").count(), 1, "{said}");
    assert_eq!(said.matches("is back after").count(), 1, "{said}");
}

/// The process's log, kept for a test to read (each test runs in its own process
/// under nextest; under `cargo test`, only this test installs a subscriber).
#[derive(Clone, Default)]
struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

impl Log {
    fn capture() -> Log {
        let log = Log::default();
        let writer = log.clone();
        tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_env_filter("tranche_ach_ledger=warn")
            .init();
        log
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_password_in_the_url_is_refused_without_being_shown() {
    let err = PostgresLedger::connect_with(options("postgres://bob:hunter2@127.0.0.1:1/x".into()))
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, LedgerError::Config(_)), "{text}");
    assert!(!text.contains("hunter2") && !text.contains("bob"), "{text}");
    assert!(text.contains(PASSWORD_ENV), "{text}");
}

#[tokio::test]
async fn the_password_comes_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pw");
    tranche_test_support::write_secret(&file, "from-file\n");
    std::env::remove_var(PASSWORD_ENV);
    std::env::set_var(PASSWORD_FILE_ENV, &file);
    let o = PostgresOptions::from_env("postgres://u@h/db").unwrap();
    assert_eq!(o.password.as_deref(), Some("from-file"));
    assert!(!format!("{o:?}").contains("from-file"), "{o:?}");
    std::env::set_var(PASSWORD_ENV, "from-env");
    assert!(matches!(
        PostgresOptions::from_env("postgres://u@h/db"),
        Err(LedgerError::Config(_))
    ));
    std::env::remove_var(PASSWORD_FILE_ENV);
    let o = PostgresOptions::from_env("postgres://u@h/db").unwrap();
    assert_eq!(o.password.as_deref(), Some("from-env"));
    std::env::remove_var(PASSWORD_ENV);
}

#[tokio::test]
async fn a_database_of_a_newer_version_is_refused() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("newer");
    drop(ledger(&pg, "newer").await);
    let out = pg.psql("newer", "INSERT INTO ledger_version VALUES (99)");
    assert!(out.status.success());
    match PostgresLedger::connect_with(options(pg.url("newer"))).await {
        Err(LedgerError::Newer { found: 99, .. }) => {}
        other => panic!("expected Newer, got {other:?}"),
    }
    // Connecting again to a current database changes nothing.
    pg.create_database("again");
    drop(ledger(&pg, "again").await);
    let again = ledger(&pg, "again").await;
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    let out = again
        .import(vec![sample_entry("a-1", "a", d, 1)])
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    let shown = format!("{:?}", again.entry("a-1").await.unwrap());
    assert!(!shown.contains(ACCOUNT), "{shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_ledger_migrates_to_member_runs_and_batch_keys() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("v2");
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    let ids: Vec<String> = (1..=6).map(|i| format!("m-{i}")).collect();
    {
        let ledger = ledger(&pg, "v2").await;
        let entries = ids.iter().map(|id| sample_entry(id, "m", d, 5)).collect();
        ledger.import(entries).await.unwrap();
        for (file, members) in [("m-F1", vec![0, 1, 3]), ("m-F2", vec![4])] {
            let members = members.into_iter().map(|i| ids[i].clone()).collect();
            let out = ledger
                .package(sample_file(file, "m", d), members)
                .await
                .unwrap();
            assert!(matches!(out, PackageOutcome::Packaged(_)), "{out:?}");
        }
    }
    // Back to version 2's shape: a row per entry in `members`.
    let out = pg.psql(
        "v2",
        "CREATE TABLE members (seq bigint PRIMARY KEY, file_id text NOT NULL); \
         CREATE INDEX members_file ON members (file_id, seq); \
         INSERT INTO members SELECT generate_series(lower(seqs), upper(seqs) - 1), file_id \
         FROM member_runs; \
         DROP TABLE member_runs; ALTER TABLE entries DROP COLUMN batch_key; \
         ALTER TABLE files DROP COLUMN submission_began; DROP INDEX files_name; \
         DELETE FROM ledger_version WHERE version > 2;",
    );
    assert!(out.status.success(), "{out:?}");

    let ledger = ledger(&pg, "v2").await;
    // Files recorded before version 5 are taken to have begun their submission: their
    // names stay spent.
    let f1 = ledger.file("m-F1").await.unwrap().unwrap().record;
    assert!(f1.submission_began && f1.holds_name(), "{f1:?}");
    let mut files = Vec::new();
    let mut seqs = Vec::new();
    for id in &ids {
        let e = ledger.entry(id).await.unwrap().unwrap();
        files.push(e.file_id.clone());
        seqs.push(e.seq);
        let expected = if e.file_id.is_some() {
            State::Packaged
        } else {
            State::Accepted
        };
        assert_eq!(e.state, expected, "{id}");
    }
    // The rows imported before version 4 got their batch keys in the migration.
    let keyed = ledger.batch_keys_at(&seqs).await.unwrap();
    let whole = ledger.entries_at(&seqs).await.unwrap();
    assert_eq!(keyed.entries.len(), ids.len());
    for (k, e) in keyed.entries.iter().zip(&whole) {
        assert_eq!(keyed.keys[k.key], e.entry.batch_key(), "seq {}", k.seq);
    }
    let held = |f: &str| Some(f.to_string());
    assert_eq!(
        files,
        [
            held("m-F1"),
            held("m-F1"),
            None,
            held("m-F1"),
            held("m-F2"),
            None
        ]
    );
    let out = ledger
        .package(sample_file("m-F3", "m", d), vec![ids[1].clone()])
        .await
        .unwrap();
    assert!(matches!(out, PackageOutcome::Refused(_)), "{out:?}");
    let out = ledger
        .package(
            sample_file("m-F3", "m", d),
            vec![ids[2].clone(), ids[5].clone()],
        )
        .await
        .unwrap();
    assert!(matches!(out, PackageOutcome::Packaged(_)), "{out:?}");
    let detail = ledger.file("m-F1").await.unwrap().unwrap();
    assert_eq!(
        detail.entry_ids,
        [ids[0].clone(), ids[1].clone(), ids[3].clone()]
    );
}

/// Ten rejected entries of a 10 MB field each (100 MB sent, of text that does not
/// compress) grow the database by well under a megabyte: each keeps an excerpt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_entries_of_huge_fields_do_not_grow_the_database() {
    let Some(pg) = Postgres::start() else { return };
    pg.create_database("growth");
    let ledger = ledger(&pg, "growth").await;
    let d = chrono::NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
    let size = || -> u64 {
        let out = pg.psql("growth", "SELECT pg_total_relation_size('entries')");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    conformance::huge_rejected_fields_stay_small(&ledger, d, size).await;
}
