//! The embedded backend's own retention on a nightly workload: each night a run is
//! enqueued and worked, then the (manual) clock moves a day. With a retention the
//! file stops growing once the retention window is full, because the writer prunes
//! old runs by itself and SQLite reuses the freed pages; without one it keeps growing
//! (the control, which shows the measure can see growth).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    Clock, Completion, CompletionAck, EnqueueItem, EnqueueRequest, JobSpec, ManualClock,
    ReserveRequest, Resolution, RunName, Timestamp,
};

const DAY: Duration = Duration::from_secs(86_400);
const JOBS_PER_NIGHT: usize = 300;

/// Enqueue a night's run and work every job: one attempt fails once (an attempt error
/// row), every job ends with a result.
async fn night(b: &SqliteBackend, clock: &ManualClock, n: usize) {
    let run = RunName::new(format!("night/{n}")).unwrap();
    let items = (0..JOBS_PER_NIGHT)
        .map(|i| {
            let args = format!("{{\"client\":{i},\"pad\":\"{}\"}}", "x".repeat(800));
            EnqueueItem::Job(JobSpec::new("note", args).queue("notes"))
        })
        .collect();
    b.enqueue(EnqueueRequest {
        run: run.clone(),
        items,
        on_done: None,
    })
    .await
    .unwrap();
    let mut retried = false;
    loop {
        let jobs = b
            .reserve(ReserveRequest {
                queue: "notes".into(),
                max: 100,
                lease: Duration::from_secs(60),
                wait: Duration::ZERO,
            })
            .await
            .unwrap();
        if jobs.is_empty() {
            break;
        }
        let batch = jobs
            .iter()
            .map(|j| Completion {
                lease: j.lease(),
                resolution: if retried {
                    Resolution::Succeeded {
                        result: format!("\"{}\"", "r".repeat(200)),
                    }
                } else {
                    retried = true;
                    Resolution::Retry {
                        error: "smtp busy".into(),
                        at: clock.now(),
                    }
                },
            })
            .collect();
        let acks = b.complete(batch).await.unwrap();
        assert!(acks.iter().all(|a| *a == CompletionAck::Applied));
    }
    let p = b.run_progress(&run).await.unwrap().unwrap();
    assert_eq!(
        p.succeeded as usize, JOBS_PER_NIGHT,
        "night {n} worked whole"
    );
}

/// Pages the database holds (free ones included: they are what the file's size is).
fn pages(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open(dir.join(SqliteBackend::FILE_NAME)).unwrap();
    conn.query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap()
}

/// A fresh backend with `retention`, on a manual clock.
fn on_a_manual_clock(
    retention: Option<Duration>,
) -> (tempfile::TempDir, ManualClock, SqliteBackend) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Timestamp(1_800_000_000_000_000));
    let b = SqliteBackend::open(
        dir.path(),
        SqliteOptions {
            clock: Arc::new(clock.clone()),
            retention,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    (dir, clock, b)
}

/// Ten nights; the page count after nights 5 and 10, and the runs left at the end.
async fn ten_nights(retention: Option<Duration>) -> (i64, i64, usize) {
    let (dir, clock, b) = on_a_manual_clock(retention);
    let mut at_five = 0;
    for n in 1..=9 {
        night(&b, &clock, n).await;
        if n == 5 {
            at_five = pages(dir.path());
        }
        clock.advance(DAY);
    }
    night(&b, &clock, 10).await;
    // Measured before the clock moves again: the writer may go on pruning by itself
    // once the next day's cut-off is due.
    let at_ten = pages(dir.path());
    let runs = b.list_runs(100).await.unwrap().len();
    (at_five, at_ten, runs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_retention_the_file_stops_growing_over_ten_nights() {
    let (five, ten, runs) = ten_nights(Some(2 * DAY)).await;
    // Night n prunes the runs that finished before day n - 2: three nights are kept.
    assert_eq!(runs, 3, "runs kept at the end of night 10");
    assert!(
        ten <= five + five / 20,
        "expected the page count after night 10 within 5% of night 5's ({five}), got {ten}"
    );

    let (five, ten, runs) = ten_nights(None).await;
    assert_eq!(runs, 10, "without a retention every run is kept");
    assert!(
        ten > five + five / 2,
        "expected the page count to keep growing without a retention ({five} after night 5), got {ten}"
    );
}

/// Records written ended (an ended workflow's header, a step's log) go the retention
/// after their last write, as finished runs do: by the writer's own prune, and by a
/// prune on demand; a record kept, or ended and then written again kept, stays.
#[tokio::test]
async fn ended_records_go_with_the_retention() {
    use tranche_types::{Commit, RecordWrite};
    let (_dir, clock, b) = on_a_manual_clock(Some(2 * DAY));
    let put = |key: &str, expect: u64, ended: bool| Commit {
        records: vec![RecordWrite::new(key, expect, "{}").ended(ended)],
        ..Commit::default()
    };
    let present = async |keys: &[&str]| -> Vec<bool> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        b.records(&keys)
            .await
            .unwrap()
            .iter()
            .map(Option::is_some)
            .collect()
    };
    b.commit(put("kept", 0, false)).await.unwrap();
    b.commit(put("ended", 0, true)).await.unwrap();
    b.commit(put("revived", 0, true)).await.unwrap();
    b.commit(put("revived", 1, false)).await.unwrap();
    clock.advance(DAY);
    b.commit(put("young", 0, true)).await.unwrap();
    // Within the retention: all there.
    assert_eq!(
        present(&["kept", "ended", "revived", "young"]).await,
        [true; 4]
    );
    // Past it for `ended` (3 days), not for `young` (2): the writer's own prune, at
    // the next command, takes only `ended`.
    clock.advance(2 * DAY);
    b.commit(put("other", 0, false)).await.unwrap();
    tranche_test_support::poll_until_async(
        "the writer's prune",
        Duration::from_secs(10),
        async || b.records(&["ended".into()]).await.unwrap()[0].is_none(),
    )
    .await;
    assert_eq!(present(&["kept", "revived", "young"]).await, [true; 3]);
    // On demand, up to now: `young` goes too, counted.
    let pruned = b.prune(clock.now(), 100).await.unwrap();
    assert_eq!(pruned.records, 1);
    assert_eq!(
        present(&["kept", "revived", "young", "other"]).await,
        [true, true, false, true]
    );
}
