//! `tranche prune` against a real data directory: a dry run lists what would go and
//! removes nothing; the real one removes finished runs before the date and never an
//! unfinished one; a bad or future date is a clear error.

use crate::support;

use support::{streams as text, tranche_on as tranche};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tranche_core::Client;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobSpec, ManualClock, ReserveRequest, Resolution,
    RunName, Timestamp,
};

/// On 2020-06-01 (UTC): `old/1` worked to the end (two jobs), `open/1` never worked.
async fn two_runs(data: &Path) {
    let clock = ManualClock::new(Timestamp(1_590_969_600_000_000));
    let options = SqliteOptions {
        clock: Arc::new(clock),
        ..SqliteOptions::default()
    };
    let b = Client::new(SqliteBackend::open(data, options).unwrap());
    for (run, queue) in [("old/1", "old"), ("open/1", "open")] {
        let items = (0..2)
            .map(|i| EnqueueItem::Job(JobSpec::new("note", i.to_string()).queue(queue)))
            .collect();
        b.enqueue(EnqueueRequest {
            run: RunName::new(run).unwrap(),
            items,
            on_done: None,
        })
        .await
        .unwrap();
    }
    let js = b
        .worker_protocol()
        .reserve(ReserveRequest {
            queue: "old".into(),
            max: 2,
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    let done = js
        .iter()
        .map(|j| Completion {
            lease: j.lease(),
            resolution: Resolution::Succeeded {
                result: "null".into(),
            },
        })
        .collect();
    b.worker_protocol().complete(done).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_finished_runs_before_the_date_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    two_runs(&data).await;

    let out = tranche(&data, &["prune", "--before", "2021-01-01", "--dry-run"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("old/1\t2 job(s)\tfinished 2020-06-01"),
        "{stdout}"
    );
    assert!(!stdout.contains("open/1"), "{stdout}");
    assert!(
        stdout.contains("would remove 1 run(s) and 2 job(s)"),
        "{stdout}"
    );
    assert!(
        text(&tranche(&data, &["runs"])).0.contains("old/1"),
        "a dry run removes nothing"
    );

    let out = tranche(&data, &["prune", "--before", "2020-06-01"]);
    assert!(out.status.success());
    assert!(
        text(&out).0.contains("removed 0 run(s)"),
        "{:?}",
        text(&out)
    );

    let out = tranche(&data, &["prune", "--before", "2021-01-01T00:00:00Z"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("removed 1 run(s) and 2 job(s)"), "{stdout}");
    let (runs, _) = text(&tranche(&data, &["runs"]));
    assert!(!runs.contains("old/1") && runs.contains("open/1"), "{runs}");
}

#[test]
fn a_bad_or_future_date_is_refused_with_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = tranche(&data, &["prune", "--before", "last tuesday"]);
    assert!(!out.status.success());
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("expected a date (YYYY-MM-DD, UTC)"),
        "{stderr}"
    );
    assert!(stderr.contains("last tuesday"), "{stderr}");

    std::fs::create_dir_all(&data).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(two_runs(&data));
    let out = tranche(&data, &["prune", "--before", "2999-01-01"]);
    assert!(!out.status.success());
    let (_, stderr) = text(&out);
    assert!(stderr.contains("expected --before in the past"), "{stderr}");
}
