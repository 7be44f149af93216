//! The shared conformance suite, run against the embedded backend.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_backend_tests as suite;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::Clock;

/// Each backend gets its own directory, kept alive for the whole test process.
fn fresh_dir() -> PathBuf {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().to_path_buf();
    std::mem::forget(dir);
    path
}

fn open(dir: &Path, clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
    let options = SqliteOptions {
        clock,
        poll_interval: Duration::from_millis(100),
        ..SqliteOptions::default()
    };
    Arc::new(SqliteBackend::open(dir, options).expect("open sqlite backend"))
}

async fn make(clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
    open(&fresh_dir(), clock)
}

macro_rules! area {
    ($($name:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            suite::$name::all(&make).await;
        }
    )*};
}

area!(
    enqueue,
    reserve,
    outcomes,
    chains,
    groups,
    commits,
    runs,
    cancel,
    locks,
    effects,
    queues,
    stats,
    feed,
    worker,
    worker_faults,
    unique,
    retention,
    pause,
    jobs,
    schedules,
    trace,
    limits
);

/// A resume wakes a reserve waiting on the queue, not its poll: here idle reserves
/// look again only every minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_wakes_without_polling() {
    async fn slow_poll(clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
        let options = SqliteOptions {
            clock,
            poll_interval: Duration::from_secs(60),
            ..SqliteOptions::default()
        };
        Arc::new(SqliteBackend::open(fresh_dir(), options).expect("open sqlite backend"))
    }
    suite::pause::resume_wakes_a_waiting_reserve(&slow_poll).await;
}

/// Two backends on one file, as two processes sharing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_across_handles() {
    let dir = fresh_dir();
    let clock: Arc<dyn Clock> = Arc::new(tranche_types::SystemClock);
    suite::pause::holds_across_handles(open(&dir, clock.clone()), open(&dir, clock)).await;
}

/// Two backends on one file, as two processes sharing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_handles() {
    let dir = fresh_dir();
    let clock: Arc<dyn Clock> = Arc::new(tranche_types::SystemClock);
    suite::limits::hold_across_handles(open(&dir, clock.clone()), open(&dir, clock)).await;
}

/// The same file opened again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_survive_a_reopen() {
    let dir = fresh_dir();
    let same = move |clock: Arc<dyn Clock>| {
        let dir = dir.clone();
        async move { open(&dir, clock) }
    };
    suite::limits::survive_a_reopen(&same).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_kill_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let backend = open(&data, Arc::new(tranche_types::SystemClock));
    let data_s = data.display().to_string();
    let child = tranche_test_support::libtest_name(module_path!(), suite::crash::CHILD_TEST);
    suite::crash::kill_and_resume(backend, dir.path(), 2000, |log| {
        suite::crash::spawn_self(&child, log, &[("TRANCHE_CRASH_DATA", data_s.clone())])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of crash_kill_and_resume"]
async fn crash_child() {
    let (Ok(log), Ok(data)) = (
        std::env::var(suite::crash::CHILD_ENV),
        std::env::var("TRANCHE_CRASH_DATA"),
    ) else {
        return;
    };
    let backend = open(Path::new(&data), Arc::new(tranche_types::SystemClock));
    suite::crash::child(backend, PathBuf::from(log)).await;
}
