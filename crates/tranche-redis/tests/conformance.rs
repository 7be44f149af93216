//! The shared conformance suite, run against a real redis-server (one per test process,
//! a fresh key prefix per backend).

use crate::server;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tranche_backend::Backend;
use tranche_backend_tests as suite;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::Clock;

/// The server shared by this process's tests; None when redis-server is missing.
fn shared() -> Option<&'static str> {
    static SERVER: OnceLock<Option<(tempfile::TempDir, server::Server, String)>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if !server::available() {
                return None;
            }
            let dir = tempfile::tempdir().expect("temp dir");
            let s = server::Server::start(dir.path(), false);
            let url = s.url();
            Some((dir, s, url))
        })
        .as_ref()
        .map(|(_, _, url)| url.as_str())
}

async fn open(url: &str, prefix: String, clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
    let options = RedisOptions {
        url: url.to_string(),
        prefix,
        clock,
        poll_interval: Duration::from_millis(100),
        ..RedisOptions::default()
    };
    Arc::new(
        RedisBackend::connect(options)
            .await
            .expect("connect redis backend"),
    )
}

async fn make(clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
    let url = shared().expect("checked by the test");
    open(url, server::fresh_prefix(), clock).await
}

macro_rules! area {
    ($make:ident: $($name:ident),*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            if shared().is_none() {
                return;
            }
            suite::$name::all(&$make).await;
        }
    )*};
}

area!(
    make: enqueue, reserve, outcomes, chains, groups, commits, runs, cancel, locks, effects, queues,
    stats, feed, worker, worker_faults, unique, retention, pause, jobs, schedules, trace, limits
);

/// A resume wakes a reserve waiting on the queue through the wake channel, not its
/// poll: here idle reserves look again only every minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_wakes_without_polling() {
    let Some(url) = shared() else { return };
    let slow_poll = move |clock: Arc<dyn Clock>| async move {
        let options = RedisOptions {
            url: url.to_string(),
            prefix: server::fresh_prefix(),
            clock,
            poll_interval: Duration::from_secs(60),
            ..RedisOptions::default()
        };
        let backend: Arc<dyn Backend> = Arc::new(
            RedisBackend::connect(options)
                .await
                .expect("connect redis backend"),
        );
        backend
    };
    suite::pause::resume_wakes_a_waiting_reserve(&slow_poll).await;
}

/// Two backends on one prefix, as two machines of a fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_holds_across_handles() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let clock: Arc<dyn Clock> = Arc::new(tranche_types::SystemClock);
    suite::pause::holds_across_handles(
        open(url, prefix.clone(), clock.clone()).await,
        open(url, prefix, clock).await,
    )
    .await;
}

/// Two backends on one prefix, as two machines of a fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_across_handles() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let clock: Arc<dyn Clock> = Arc::new(tranche_types::SystemClock);
    suite::limits::hold_across_handles(
        open(url, prefix.clone(), clock.clone()).await,
        open(url, prefix, clock).await,
    )
    .await;
}

/// A new connection on the same prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_survive_a_reopen() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let same = move |clock: Arc<dyn Clock>| {
        let prefix = prefix.clone();
        async move { open(url, prefix, clock).await }
    };
    suite::limits::survive_a_reopen(&same).await;
}

/// The suite again through `tranche_core::Reconnecting`, which the long-running
/// commands wrap this backend in: while the server is up it must change nothing.
mod reconnecting {
    use super::*;

    async fn make_reconnecting(clock: Arc<dyn Clock>) -> Arc<dyn Backend> {
        let inner = make(clock).await;
        Arc::new(tranche_core::Reconnecting::new(
            inner,
            Duration::from_secs(5),
            |outage| panic!("no outage expected: {outage:?}"),
        ))
    }

    area!(
        make_reconnecting: enqueue, reserve, outcomes, chains, groups, commits, runs, cancel,
        locks, effects, queues, stats, feed, worker, worker_faults, unique, retention, pause, jobs, schedules,
        trace, limits
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_kill_and_resume() {
    let Some(url) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let prefix = server::fresh_prefix();
    let backend = open(url, prefix.clone(), Arc::new(tranche_types::SystemClock)).await;
    let child = tranche_test_support::libtest_name(module_path!(), suite::crash::CHILD_TEST);
    suite::crash::kill_and_resume(backend, dir.path(), 2000, |log| {
        suite::crash::spawn_self(
            &child,
            log,
            &[
                ("TRANCHE_CRASH_REDIS_URL", url.to_string()),
                ("TRANCHE_CRASH_PREFIX", prefix.clone()),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of crash_kill_and_resume"]
async fn crash_child() {
    let (Ok(log), Ok(url), Ok(prefix)) = (
        std::env::var(suite::crash::CHILD_ENV),
        std::env::var("TRANCHE_CRASH_REDIS_URL"),
        std::env::var("TRANCHE_CRASH_PREFIX"),
    ) else {
        return;
    };
    let backend = open(&url, prefix, Arc::new(tranche_types::SystemClock)).await;
    suite::crash::child(backend, log.into()).await;
}
