//! The engine's worker on this backend: handlers of every kind end to end, panics,
//! timeouts, cancellation seen by a running handler, effects across redeliveries and
//! graceful shutdown. Real clock; waits on signals or polls with a deadline.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tranche_core::{Client, Engine, JobContext, Registry, TaskOptions, Worker, WorkerConfig};
use tranche_types::{CancelTarget, EnqueueItem, JobState, MemberOutcome, Outcome, RunProgress};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    chains_and_groups_end_to_end(make).await;
    panics_and_timeouts_fail_the_attempt(make).await;
    running_handler_sees_cancellation(make).await;
    effects_are_skipped_on_redelivery(make).await;
    shutdown_lets_jobs_finish(make).await;
    shutdown_hands_back_what_does_not_finish(make).await;
    task_concurrency_is_bounded(make).await;
    idle_worker_does_not_poll_hard(make).await;
    handlers_claim_locks_per_attempt(make).await;
}

pub(crate) fn test_config(queues: &[&str]) -> WorkerConfig {
    WorkerConfig {
        reserve_wait: Duration::from_millis(200),
        grace: Duration::from_secs(10),
        ..WorkerConfig::default()
    }
    .queues(queues.iter().copied(), 64)
    .lease(Duration::from_secs(2))
}

pub(crate) struct Running {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

pub(crate) fn start(worker: Worker) -> Running {
    let stop = CancellationToken::new();
    let s = stop.clone();
    let handle = tokio::spawn(async move { worker.run(s).await.expect("worker run") });
    Running { stop, handle }
}

impl Running {
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(30), self.handle)
            .await
            .expect("worker stops within 30 s")
            .expect("worker task");
    }
}

pub(crate) async fn finished(b: &Arc<dyn Backend>, name: &str) -> RunProgress {
    Client::from_shared(b.clone())
        .wait_finished(
            &run(name),
            Duration::from_millis(20),
            Some(Duration::from_secs(60)),
            |_| {},
        )
        .await
        .expect("run finishes")
}

async fn chains_and_groups_end_to_end(make: &dyn MakeBackend) {
    let b = real(make).await;
    let mut reg = Registry::new();
    reg.register(
        "double",
        TaskOptions::default(),
        |ctx: JobContext, start: Option<i64>| async move {
            let prev: Option<i64> = ctx.input()?;
            Ok::<_, serde_json::Error>(prev.or(start).unwrap_or(0) * 2)
        },
    );
    reg.register_blocking(
        "square",
        TaskOptions::default().queue("cpu"),
        |_ctx, n: i64| {
            let thread = std::thread::current().name().unwrap_or("").to_string();
            if !thread.starts_with("tranche-cpu-") {
                return Outcome::Discard(format!("CPU task ran on {thread:?}"));
            }
            Outcome::Complete(n * n)
        },
    );
    reg.register(
        "sum",
        TaskOptions::default(),
        |ctx: JobContext, _: ()| async move {
            let members: Vec<MemberOutcome> = ctx.input()?.unwrap_or_default();
            let total: i64 = members
                .iter()
                .filter_map(|m| m.result.as_ref()?.as_i64())
                .sum();
            Ok::<_, serde_json::Error>(total)
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let chain = vec![
        engine.job("double", &Some(3)).unwrap(),
        engine.job("double", &None::<i64>).unwrap(),
        engine.job("double", &None::<i64>).unwrap(),
    ];
    let members = (1..=10)
        .map(|n| engine.job("square", &n).unwrap())
        .collect();
    let group = EnqueueItem::Group {
        members,
        callback: engine.job("sum", &()).unwrap(),
    };
    let out = engine
        .enqueue(&run("worker/e2e"), vec![EnqueueItem::Chain(chain), group])
        .await
        .unwrap();
    let w = start(engine.worker(test_config(&["default", "cpu"])).unwrap());
    let p = finished(&b, "worker/e2e").await;
    w.stop().await;
    assert_eq!((p.total, p.succeeded), (14, 14), "{p:?}");
    let last = b.job(*out[0].ids.last().unwrap()).await.unwrap().unwrap();
    assert_eq!(last.result.as_deref(), Some("24"), "3 doubled three times");
    let sum = b.job(*out[1].ids.last().unwrap()).await.unwrap().unwrap();
    assert_eq!(sum.result.as_deref(), Some("385"), "sum of squares 1..10");
}

async fn panics_and_timeouts_fail_the_attempt(make: &dyn MakeBackend) {
    let b = real(make).await;
    let mut reg = Registry::new();
    reg.register(
        "panics",
        TaskOptions::default().max_attempts(1),
        |_ctx, n: u32| async move {
            if n > 0 {
                panic!("bad input {n}");
            }
            Ok::<_, String>(())
        },
    );
    reg.register_blocking(
        "panics-cpu",
        TaskOptions::default().max_attempts(1),
        |_ctx, _n: u32| -> Outcome<()> { panic!("cpu handler broke") },
    );
    reg.register(
        "slow",
        TaskOptions::default()
            .max_attempts(1)
            .timeout(Duration::from_millis(100)),
        |_ctx, _: ()| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, String>(())
        },
    );
    reg.register(
        "typed",
        TaskOptions::default(),
        |_ctx, _n: u32| async move { Ok::<_, String>(()) },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let items = vec![
        EnqueueItem::Job(engine.job("panics", &7u32).unwrap()),
        EnqueueItem::Job(engine.job("panics-cpu", &1u32).unwrap()),
        EnqueueItem::Job(engine.job("slow", &()).unwrap()),
        EnqueueItem::Job(engine.job("typed", &"not a number").unwrap()),
    ];
    let out = engine.enqueue(&run("worker/fail"), items).await.unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    let p = finished(&b, "worker/fail").await;
    w.stop().await;
    assert_eq!(p.failed, 4, "{p:?}");
    let err = |i: usize| {
        let b = b.clone();
        let id = out[i].ids[0];
        async move { b.job(id).await.unwrap().unwrap().error.unwrap_or_default() }
    };
    assert_eq!(err(0).await, "handler panicked: bad input 7");
    assert_eq!(err(1).await, "handler panicked: cpu handler broke");
    assert_eq!(err(2).await, "timed out after 100ms");
    let e = err(3).await;
    assert!(e.starts_with("invalid arguments for task \"typed\""), "{e}");
    assert!(
        e.contains("\"not a number\""),
        "the error shows what was given: {e}"
    );
}

async fn running_handler_sees_cancellation(make: &dyn MakeBackend) {
    let b = real(make).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let mut reg = Registry::new();
    reg.register(
        "waits",
        TaskOptions::default(),
        move |ctx: JobContext, _: ()| {
            let started_tx = started_tx.clone();
            async move {
                let _ = started_tx.send(ctx.id());
                ctx.cancelled().await;
                let _ = started_tx.send(ctx.id());
                Outcome::<()>::cancel("saw the cancellation")
            }
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    engine
        .enqueue(
            &run("worker/cancel"),
            vec![EnqueueItem::Job(engine.job("waits", &()).unwrap())],
        )
        .await
        .unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    let id = tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .unwrap()
        .unwrap();
    b.cancel(CancelTarget::Run(run("worker/cancel")), "operator")
        .await
        .unwrap();
    let p = finished(&b, "worker/cancel").await;
    assert_eq!(p.cancelled, 1);
    let saw = tokio::time::timeout(Duration::from_secs(30), started.recv()).await;
    assert_eq!(
        saw.expect("the running handler sees the cancellation")
            .unwrap(),
        id
    );
    let rec = b.job(id).await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.error.as_deref()),
        (JobState::Cancelled, Some("operator"))
    );
    w.stop().await;
}

async fn effects_are_skipped_on_redelivery(make: &dyn MakeBackend) {
    let b = real(make).await;
    let performed = Arc::new(AtomicU32::new(0));
    let mut reg = Registry::new();
    let p2 = performed.clone();
    reg.register(
        "mail",
        TaskOptions::default().backoff(tranche_core::Backoff {
            base: Duration::from_millis(10),
            ..Default::default()
        }),
        move |ctx: JobContext, client: String| {
            let performed = p2.clone();
            async move {
                let key = format!("mailed/{}/{client}", ctx.run());
                let sent = ctx
                    .once(&key, || async {
                        performed.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, String>("<msg-1@test>".to_string())
                    })
                    .await
                    .map_err(|e| e.to_string());
                match (sent, ctx.attempt()) {
                    (Err(e), _) => Outcome::retry(e),
                    // Fail after the effect on the first attempt, as a crash would.
                    (Ok(_), 1) => Outcome::retry("connection dropped after sending"),
                    (Ok(id), _) => Outcome::Complete(id),
                }
            }
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let out = engine
        .enqueue(
            &run("worker/effects"),
            vec![EnqueueItem::Job(engine.job("mail", &"c1").unwrap())],
        )
        .await
        .unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    let p = finished(&b, "worker/effects").await;
    w.stop().await;
    assert_eq!(p.succeeded, 1);
    let rec = b.job(out[0].ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (rec.attempt, rec.result.as_deref()),
        (2, Some("\"<msg-1@test>\""))
    );
    assert_eq!(
        performed.load(Ordering::SeqCst),
        1,
        "the second attempt skipped the recorded effect"
    );
}

async fn shutdown_lets_jobs_finish(make: &dyn MakeBackend) {
    let b = real(make).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let mut reg = Registry::new();
    reg.register("slowish", TaskOptions::default(), move |_ctx, _: ()| {
        let started_tx = started_tx.clone();
        let mut go = go_rx.clone();
        async move {
            let _ = started_tx.send(());
            let _ = go.wait_for(|g| *g).await;
            Ok::<_, String>("done")
        }
    });
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let out = engine
        .enqueue(
            &run("worker/shutdown"),
            vec![EnqueueItem::Job(engine.job("slowish", &()).unwrap())],
        )
        .await
        .unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .unwrap()
        .unwrap();
    w.stop.cancel();
    assert!(
        !w.handle.is_finished(),
        "the worker waits for its in-flight job"
    );
    go_tx.send(true).unwrap();
    w.stop().await;
    let rec = b.job(out[0].ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.result.as_deref()),
        (JobState::Succeeded, Some("\"done\""))
    );
}

async fn shutdown_hands_back_what_does_not_finish(make: &dyn MakeBackend) {
    let b = real(make).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let mut reg = Registry::new();
    reg.register(
        "stuck",
        TaskOptions::default(),
        move |ctx: JobContext, _: ()| {
            let started_tx = started_tx.clone();
            async move {
                let _ = started_tx.send(());
                ctx.cancelled().await;
                Outcome::<()>::retry("interrupted")
            }
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let out = engine
        .enqueue(
            &run("worker/handback"),
            vec![EnqueueItem::Job(engine.job("stuck", &()).unwrap())],
        )
        .await
        .unwrap();
    let config = WorkerConfig {
        grace: Duration::from_millis(200),
        ..test_config(&["default"])
    };
    let worker = engine.worker(config).unwrap();
    let stats = worker.stats();
    let w = start(worker);
    tokio::time::timeout(Duration::from_secs(30), started.recv())
        .await
        .unwrap()
        .unwrap();
    w.stop().await;
    assert_eq!(stats.released.load(Ordering::Relaxed), 1);
    let rec = b.job(out[0].ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.attempt),
        (JobState::Available, 0),
        "handed back, attempt not counted"
    );
    assert_eq!(
        counts(&progress(&*b, "worker/handback").await),
        (0, 1, 0, 0, 0, 0)
    );
}

async fn task_concurrency_is_bounded(make: &dyn MakeBackend) {
    let b = real(make).await;
    let active = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    // Handlers hold their slot until the test lets one go, so a worker that started
    // more than the task's concurrency would be caught holding three at once.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let mut reg = Registry::new();
    let (a, p, g) = (active.clone(), peak.clone(), gate.clone());
    reg.register(
        "bounded",
        TaskOptions::default().concurrency(2),
        move |_ctx, _: u32| {
            let (active, peak, gate) = (a.clone(), p.clone(), g.clone());
            let started_tx = started_tx.clone();
            async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let _ = started_tx.send(());
                gate.acquire().await.expect("gate open").forget();
                active.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, String>(())
            }
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    let items = (0..10)
        .map(|i| EnqueueItem::Job(engine.job("bounded", &i).unwrap()))
        .collect();
    engine.enqueue(&run("worker/bounded"), items).await.unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    for n in 0..10 {
        tokio::time::timeout(Duration::from_secs(30), started.recv())
            .await
            .unwrap_or_else(|_| panic!("job {n} never started"))
            .unwrap();
        // Two running: let one finish, making room for the next.
        if n >= 1 {
            gate.add_permits(1);
        }
    }
    gate.add_permits(1);
    let p = finished(&b, "worker/bounded").await;
    w.stop().await;
    assert_eq!(p.succeeded, 10);
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "never more than the task's concurrency, and it is used"
    );
}

async fn idle_worker_does_not_poll_hard(make: &dyn MakeBackend) {
    let b = real(make).await;
    let engine = Engine::new(Client::from_shared(b.clone()), Registry::new());
    let wait = Duration::from_millis(300);
    let config = WorkerConfig {
        reserve_wait: wait,
        ..test_config(&["idle"])
    };
    let fetchers = config
        .fetchers_per_queue
        .unwrap_or(b.hints().fetchers_per_queue) as u64;
    let worker = engine.worker(config).unwrap();
    let stats = worker.stats();
    let started = tokio::time::Instant::now();
    let w = start(worker);
    // Each fetcher's third call starts only after its first two have each waited out
    // `reserve_wait` inside the backend: a worker that polled without waiting would get
    // there at once.
    let deadline = started + Duration::from_secs(30);
    while stats.reserve_calls.load(Ordering::Relaxed) < 2 * fetchers + 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker stopped asking"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = started.elapsed();
    w.stop().await;
    assert!(
        took >= wait * 2 - Duration::from_millis(50),
        "an idle worker made {} reserve calls in {took:?} ({fetchers} fetchers, each call may wait {wait:?})",
        2 * fetchers + 1
    );
}

async fn handlers_claim_locks_per_attempt(make: &dyn MakeBackend) {
    let b = real(make).await;
    let mut reg = Registry::new();
    reg.register(
        "package",
        TaskOptions::default(),
        |ctx: JobContext, entries: Vec<String>| async move {
            let claim = ctx
                .claim_locks(&entries, Duration::from_secs(60))
                .await
                .map_err(|e| e.to_string())?;
            if claim != tranche_types::LockClaim::Claimed {
                return Ok::<_, String>(format!("{claim:?}"));
            }
            Ok("claimed".to_string())
        },
    );
    let engine = Engine::new(Client::from_shared(b.clone()), reg);
    // Another holder owns entry e2: the job's claim of e1+e2 must fail as a whole.
    b.claim_locks(tranche_types::LockRequest {
        owner: "other-worker",
        keys: &["e2".to_string()],
        ttl: Duration::from_secs(60),
    })
    .await
    .unwrap();
    let items = vec![
        EnqueueItem::Job(engine.job("package", &vec!["e1", "e2"]).unwrap()),
        EnqueueItem::Job(engine.job("package", &vec!["e3"]).unwrap()),
    ];
    let out = engine.enqueue(&run("worker/locks"), items).await.unwrap();
    let w = start(engine.worker(test_config(&["default"])).unwrap());
    finished(&b, "worker/locks").await;
    w.stop().await;
    let result = |i: usize| {
        let b = b.clone();
        let id = out[i].ids[0];
        async move { b.job(id).await.unwrap().unwrap().result.unwrap() }
    };
    assert_eq!(
        result(0).await,
        "\"Conflict { key: \\\"e2\\\", owner: \\\"other-worker\\\" }\""
    );
    assert_eq!(result(1).await, "\"claimed\"");
    let e1 = b
        .claim_locks(tranche_types::LockRequest {
            owner: "someone",
            keys: &["e1".to_string()],
            ttl: Duration::from_secs(1),
        })
        .await
        .unwrap();
    assert_eq!(
        e1,
        tranche_types::LockClaim::Claimed,
        "the failed claim left e1 free"
    );
}
