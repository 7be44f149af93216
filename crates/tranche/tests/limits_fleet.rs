//! Limits held by the backend, not by a process: two worker processes (this test binary
//! run again as a child, each with a worker of 4 slots on a queue of its own, both
//! serving before the jobs are enqueued) share one backend, a SQLite file or a Redis
//! server, and a task kind limited to 2 running and 4 starts per second across every
//! queue. Half the jobs go to each queue, so both processes work at once (a limit kept
//! per process would let 4 run); each job returns when its handler started and ended:
//! across both processes no more than 2 handlers ever overlap, and no 5 starts (the
//! backend's reserve times) fall within one second.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tranche_core::{Client, Engine, Registry, TaskOptions, WorkerConfig};
use tranche_types::{EnqueueItem, JobId, Limit, LimitScope, RunName, StartRate};

use crate::support;

/// Each worker process's queue: one each, so that both surely take part.
const QUEUES: [&str; 2] = ["limited-1", "limited-2"];
const KIND: &str = "timed";
const RUN: &str = "limits/fleet";
const JOBS: usize = 16;
const RUNNING: u32 = 2;
const STARTS: u32 = 4;
const PER: Duration = Duration::from_secs(1);
const CHILD_TEST: &str = "limits_child";
const CHILD_ENV: &str = "TRANCHE_LIMITS_CHILD";
/// Where a child says its worker is serving, so that the jobs come only once both are.
const READY_ENV: &str = "TRANCHE_LIMITS_READY";
/// The queue a child works.
const QUEUE_ENV: &str = "TRANCHE_LIMITS_QUEUE";

fn micros_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register(KIND, TaskOptions::default(), |_ctx, _: ()| async {
        let start = micros_now();
        tokio::time::sleep(Duration::from_millis(150)).await;
        Ok::<_, std::convert::Infallible>((start, micros_now(), std::process::id()))
    });
    registry
}

/// The backend named by the environment: `sqlite:<dir>` or `redis:<url>|<prefix>`.
async fn open(at: &str) -> Client {
    if let Some(dir) = at.strip_prefix("sqlite:") {
        let options = tranche_sqlite::SqliteOptions {
            // Another process's completion is seen within this (there is no
            // cross-process wake-up on a shared file).
            poll_interval: Duration::from_millis(50),
            ..Default::default()
        };
        Client::new(tranche_sqlite::SqliteBackend::open(Path::new(dir), options).unwrap())
    } else {
        let (url, prefix) = at
            .strip_prefix("redis:")
            .and_then(|r| r.split_once('|'))
            .expect("sqlite:<dir> or redis:<url>|<prefix>");
        let options = tranche_redis::RedisOptions {
            url: url.into(),
            prefix: prefix.into(),
            ..Default::default()
        };
        Client::new(tranche_redis::RedisBackend::connect(options).await.unwrap())
    }
}

/// The worker processes, killed if the test fails before they are done.
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn spawn_worker(at: &str, queue: &str, log: &Path, ready: &Path) -> Child {
    let exe = std::env::current_exe().expect("current test binary");
    Command::new(exe)
        .args([
            "--exact",
            &tranche_test_support::libtest_name(module_path!(), CHILD_TEST),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, at)
        .env(READY_ENV, ready)
        .env(QUEUE_ENV, queue)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn worker process")
}

/// A worker process: works the queue until every job of the run has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of the tests in this file"]
async fn limits_child() {
    let Ok(at) = std::env::var(CHILD_ENV) else {
        return;
    };
    let client = open(&at).await;
    let engine = Engine::new(client.clone(), registry());
    let config = WorkerConfig {
        reserve_wait: Duration::from_millis(500),
        ..WorkerConfig::default()
    }
    .queues([std::env::var(QUEUE_ENV).unwrap()], 4);
    let worker = engine.worker(config).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    std::fs::write(std::env::var(READY_ENV).unwrap(), b"").unwrap();
    let run = RunName::new(RUN).unwrap();
    // The jobs come once both workers are ready; the parent kills neither, but bounds
    // the whole test with its own deadline.
    while client.run_progress(&run).await.unwrap().is_none() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client
        .wait_finished(&run, Duration::from_millis(50), None, |_| {})
        .await
        .unwrap();
    stop.cancel();
    running.await.unwrap().unwrap();
}

async fn two_processes_keep_the_limits(at: &str, dir: &Path) {
    let client = open(at).await;
    let limit = Limit {
        scope: LimitScope::Kind(KIND.into()),
        starts: Some(StartRate {
            count: STARTS,
            per_ms: PER.as_millis() as u64,
        }),
        running: Some(RUNNING),
    };
    client.put_limit(&limit).await.unwrap();
    let ready = [dir.join("w1.ready"), dir.join("w2.ready")];
    let mut workers = Workers(vec![
        spawn_worker(at, QUEUES[0], &dir.join("w1.log"), &ready[0]),
        spawn_worker(at, QUEUES[1], &dir.join("w2.log"), &ready[1]),
    ]);
    tranche_test_support::poll_until(
        "the worker processes started",
        Duration::from_secs(60),
        || ready.iter().all(|r| r.exists()),
    )
    .await;
    let engine = Engine::new(client.clone(), registry());
    let items = (0..JOBS)
        .map(|i| EnqueueItem::Job(engine.job(KIND, &()).unwrap().queue(QUEUES[i % 2])))
        .collect();
    let run = RunName::new(RUN).unwrap();
    let ids: Vec<JobId> = engine
        .enqueue(&run, items)
        .await
        .unwrap()
        .into_iter()
        .flat_map(|e| e.ids)
        .collect();
    let done = client
        .wait_finished(
            &run,
            Duration::from_millis(50),
            Some(Duration::from_secs(60)),
            |_| {},
        )
        .await;
    for w in &mut workers.0 {
        let status = w.wait().unwrap();
        assert!(status.success(), "a worker process failed: {status}");
    }
    let p = done.expect("the run finishes within a minute");
    assert_eq!(p.succeeded, JOBS as u64, "{p:?}");

    let mut handlers = Vec::new();
    let mut starts = Vec::new();
    let mut processes = std::collections::BTreeSet::new();
    for id in ids {
        let job = client.job(id).await.unwrap().expect("the job is kept");
        assert_eq!(job.attempt, 1, "no job was retried");
        let (start, end, pid): (i64, i64, u32) =
            serde_json::from_str(job.result.as_deref().unwrap()).unwrap();
        handlers.push((start, end));
        processes.insert(pid);
        starts.push(job.started_at.expect("it started").0);
    }
    // At most RUNNING handlers at any instant, across both processes.
    let mut edges: Vec<(i64, i32)> = handlers
        .iter()
        .flat_map(|(s, e)| [(*s, 1), (*e, -1)])
        .collect();
    edges.sort_by_key(|(t, d)| (*t, *d));
    let (mut now, mut most) = (0, 0);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    assert_eq!(
        most, RUNNING as i32,
        "handlers running at once across the fleet: {handlers:?}"
    );
    // No STARTS + 1 starts within one window.
    starts.sort_unstable();
    let per = PER.as_micros() as i64;
    for w in starts.windows(STARTS as usize + 1) {
        assert!(
            w[STARTS as usize] - w[0] >= per,
            "{} starts within {} µs: {starts:?}",
            STARTS + 1,
            w[STARTS as usize] - w[0]
        );
    }
    // Both processes took part: the backend, not one process, held the limits.
    assert_eq!(processes.len(), 2, "jobs were worked by {processes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_on_one_sqlite_file_keep_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    two_processes_keep_the_limits(&format!("sqlite:{}", data.display()), tmp.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_worker_processes_on_one_redis_keep_the_limits() {
    if !support::have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (_redis, port) = support::redis(tmp.path());
    let at = format!("redis:redis://127.0.0.1:{port}|{{limits-fleet}}:");
    two_processes_keep_the_limits(&at, tmp.path()).await;
}
