//! The Redis server crashes (SIGKILL) in the middle of a run and comes back with its
//! append-only file: the worker rides through the outage, and every job ends succeeded
//! exactly once (fencing refuses any duplicate completion).

use crate::server;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tranche_backend::Backend;
use tranche_core::{Client, Engine, JobContext, Registry, TaskOptions, WorkerConfig};
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{EnqueueItem, JobState, RunName, SystemClock};

const JOBS: u64 = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_survives_a_server_restart() {
    if !server::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let redis = server::Server::start(dir.path(), true);
    let backend: Arc<dyn Backend> = Arc::new(
        RedisBackend::connect(RedisOptions {
            url: redis.url(),
            prefix: server::fresh_prefix(),
            clock: Arc::new(SystemClock),
            poll_interval: Duration::from_millis(100),
            ..RedisOptions::default()
        })
        .await
        .expect("connect"),
    );
    let mut reg = Registry::new();
    reg.register(
        "restart.job",
        TaskOptions::default(),
        |_ctx: JobContext, i: u64| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok::<_, String>(i)
        },
    );
    let engine = Engine::new(Client::from_shared(backend.clone()), reg);
    let run = RunName::new("restart/night").unwrap();
    let items = (0..JOBS)
        .map(|i| EnqueueItem::Job(engine.job("restart.job", &i).unwrap()))
        .collect();
    engine.enqueue(&run, items).await.expect("enqueue");

    let config = WorkerConfig {
        reserve_wait: Duration::from_millis(200),
        grace: Duration::from_secs(10),
        ..WorkerConfig::default()
    }
    .queues(["default"], 16)
    .lease(Duration::from_secs(5));
    let worker = engine.worker(config).expect("worker");
    let stats = worker.stats();
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { worker.run(s).await });

    tranche_test_support::poll_until_async(
        "a quarter of the jobs succeeded before the crash",
        Duration::from_secs(60),
        async || {
            let p = backend.run_progress(&run).await.unwrap().unwrap();
            if p.succeeded >= JOBS / 4 {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        },
    )
    .await;
    redis.kill();
    let down = backend.run_progress(&run).await;
    assert!(down.is_err(), "the server is down: {down:?}");
    // Down until the worker has met the outage (a call of its failed), not for a
    // guessed while.
    tranche_test_support::poll_until(
        "the worker notices the outage",
        Duration::from_secs(30),
        || stats.trouble().is_some(),
    )
    .await;
    redis.launch();
    let restarted = Instant::now();

    let p = Client::from_shared(backend.clone())
        .wait_finished(
            &run,
            Duration::from_millis(20),
            Some(Duration::from_secs(120)),
            |_| {},
        )
        .await
        .expect("the run finishes after the restart");
    eprintln!(
        "restart test: {} of {JOBS} jobs had succeeded at the crash, the rest took {:?} after the restart",
        JOBS / 4,
        restarted.elapsed()
    );
    stop.cancel();
    handle.await.expect("worker task").expect("worker");
    assert_eq!((p.total, p.succeeded), (JOBS, JOBS), "{p:?}");
    assert_eq!(
        stats.succeeded.load(Ordering::Relaxed),
        JOBS,
        "each job's success was applied exactly once"
    );
    let events = backend
        .events(0, 1_000_000, Duration::ZERO)
        .await
        .expect("read the feed");
    let mut successes: HashMap<i64, u32> = HashMap::new();
    for e in &events {
        if e.state == JobState::Succeeded {
            *successes.entry(e.job.0).or_default() += 1;
        }
    }
    assert_eq!(successes.len() as u64, JOBS, "every job succeeded");
    assert!(
        successes.values().all(|&n| n == 1),
        "no job succeeded twice"
    );
    redis.kill();
}
