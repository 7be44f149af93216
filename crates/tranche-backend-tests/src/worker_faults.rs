//! The engine's retry and lease paths, driven by a fault-injecting backend: a refused
//! or half-applied report, a refused reserve and a lost lease, each against real
//! backend state.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_core::{Client, Engine, JobContext, Registry, TaskOptions};
use tranche_types::{EnqueueItem, JobId, JobState};

use crate::faults::{Fault, Faulty, Op};
use crate::worker::{finished, start, test_config};
use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    a_refused_report_is_sent_again(make).await;
    a_report_whose_reply_was_lost_is_applied_once(make).await;
    a_refused_reserve_is_asked_again(make).await;
    a_lost_lease_cancels_the_running_handler(make).await;
}

const WAIT: Duration = Duration::from_secs(30);

/// A worker over `faulty` whose `count` task counts its runs.
async fn counting(faulty: &Arc<Faulty>, run_name: &str) -> (Engine, Arc<AtomicU32>, JobId) {
    let runs = Arc::new(AtomicU32::new(0));
    let mut reg = Registry::new();
    let r = runs.clone();
    reg.register("count", TaskOptions::default(), move |_ctx, _: ()| {
        r.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, String>(()) }
    });
    let engine = Engine::new(Client::from_shared(faulty.clone()), reg);
    let out = engine
        .enqueue(
            &run(run_name),
            vec![EnqueueItem::Job(engine.job("count", &()).unwrap())],
        )
        .await
        .unwrap();
    (engine, runs, out[0].ids[0])
}

async fn a_refused_report_is_sent_again(make: &dyn MakeBackend) {
    let faulty = Faulty::new(real(make).await);
    faulty.inject(Op::Complete, [Fault::Refuse, Fault::Refuse]);
    let (engine, runs, id) = counting(&faulty, "faults/refused-report").await;
    let worker = engine.worker(test_config(&["default"])).unwrap();
    let stats = worker.stats();
    let w = start(worker);
    let shared: Arc<dyn Backend> = faulty.clone();
    let p = finished(&shared, "faults/refused-report").await;
    w.stop().await;
    assert_eq!(p.succeeded, 1, "{p:?}");
    assert_eq!(faulty.pending(Op::Complete), 0, "both refusals were met");
    assert!(faulty.calls(Op::Complete) >= 3, "reported until accepted");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the handler is not run again"
    );
    assert_eq!(stats.succeeded.load(Ordering::Relaxed), 1);
    assert!(
        stats.trouble().is_none(),
        "the trouble ends once a report lands"
    );
    let rec = faulty.job(id).await.unwrap().unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
}

async fn a_report_whose_reply_was_lost_is_applied_once(make: &dyn MakeBackend) {
    let faulty = Faulty::new(real(make).await);
    faulty.inject(Op::Complete, [Fault::LoseReply]);
    let (engine, runs, id) = counting(&faulty, "faults/lost-reply").await;
    let worker = engine.worker(test_config(&["default"])).unwrap();
    let stats = worker.stats();
    let w = start(worker);
    let shared: Arc<dyn Backend> = faulty.clone();
    let p = finished(&shared, "faults/lost-reply").await;
    // The repeat of an applied report is refused as stale; wait for it to land.
    faulty.wait_calls(Op::Complete, 2, WAIT).await;
    w.stop().await;
    assert_eq!((p.total, p.succeeded), (1, 1), "{p:?}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the handler is not run again"
    );
    let rec = faulty.job(id).await.unwrap().unwrap();
    assert_eq!((rec.state, rec.attempt), (JobState::Succeeded, 1));
    assert_eq!(
        stats.stale.load(Ordering::Relaxed),
        1,
        "the repeat is refused, never applied twice"
    );
}

async fn a_refused_reserve_is_asked_again(make: &dyn MakeBackend) {
    let faulty = Faulty::new(real(make).await);
    faulty.inject(Op::Reserve, [Fault::Refuse, Fault::Refuse]);
    let (engine, runs, _) = counting(&faulty, "faults/refused-reserve").await;
    let worker = engine.worker(test_config(&["default"])).unwrap();
    let stats = worker.stats();
    let w = start(worker);
    let shared: Arc<dyn Backend> = faulty.clone();
    let p = finished(&shared, "faults/refused-reserve").await;
    w.stop().await;
    assert_eq!(p.succeeded, 1, "{p:?}");
    assert_eq!(faulty.pending(Op::Reserve), 0);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(
        stats.trouble().is_none(),
        "the trouble ends once work flows"
    );
}

async fn a_lost_lease_cancels_the_running_handler(make: &dyn MakeBackend) {
    let faulty = Faulty::new(real(make).await);
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (stopped_tx, mut stopped) = tokio::sync::mpsc::unbounded_channel();
    let mut reg = Registry::new();
    reg.register(
        "hold",
        TaskOptions::default(),
        move |ctx: JobContext, _: ()| {
            let (started_tx, stopped_tx) = (started_tx.clone(), stopped_tx.clone());
            async move {
                let _ = started_tx.send(ctx.attempt());
                // Runs until the worker learns its lease is gone.
                ctx.cancelled().await;
                let _ = stopped_tx.send(ctx.attempt());
                Ok::<_, String>(())
            }
        },
    );
    let engine = Engine::new(Client::from_shared(faulty.clone()), reg);
    engine
        .enqueue(
            &run("faults/lost-lease"),
            vec![EnqueueItem::Job(engine.job("hold", &()).unwrap())],
        )
        .await
        .unwrap();
    let config = tranche_core::WorkerConfig {
        heartbeat: Duration::from_millis(100),
        ..test_config(&["default"])
    };
    let worker = engine.worker(config).unwrap();
    let stats = worker.stats();
    let w = start(worker);
    let first = tokio::time::timeout(WAIT, started.recv()).await.unwrap();
    assert_eq!(first, Some(1));
    faulty.inject(Op::Heartbeat, [Fault::LoseLeases]);
    let seen = tokio::time::timeout(WAIT, stopped.recv()).await;
    assert_eq!(
        seen.unwrap(),
        Some(1),
        "the handler is told its lease is gone and stops"
    );
    // Only the reply said so: the store still holds this attempt's lease, so what the
    // handler returned on stopping is applied like any result, once.
    let shared: Arc<dyn Backend> = faulty.clone();
    let p = finished(&shared, "faults/lost-lease").await;
    w.stop().await;
    assert_eq!((p.total, p.succeeded), (1, 1), "{p:?}");
    assert_eq!(stats.completed(), 1);
}
