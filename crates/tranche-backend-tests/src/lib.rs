//! The conformance suite every [`Backend`] must pass, unchanged: a new behaviour is
//! added here, not to one backend's tests.
//!
//! A backend's test crate calls [`exercise`] (or one area at a time, for clearer
//! reports) with a factory that opens a fresh, empty backend on the clock it is given.
//! Areas that need precise time use a [`ManualClock`] and never sleep; areas that run
//! real workers use the system clock and wait on signals or poll with a deadline. The
//! crash test ([`crash`]) also needs the backend's test binary to re-run itself as a
//! child process; see that module.

#![deny(missing_docs)]

pub mod cancel;
pub mod chains;
pub mod commits;
pub mod crash;
pub mod effects;
pub mod enqueue;
mod faults;
pub mod feed;
pub mod groups;
pub mod jobs;
pub mod limits;
pub mod locks;
pub mod outcomes;
pub mod pause;
pub mod queues;
pub mod reserve;
pub mod retention;
pub mod runs;
pub mod schedules;
pub mod stats;
pub mod trace;
pub mod unique;
pub mod worker;
pub mod worker_faults;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_types::{
    Clock, Completion, CompletionAck, EnqueueItem, EnqueueRequest, Enqueued, JobSpec, LeaseRef,
    ManualClock, ReserveRequest, ReservedJob, Resolution, RunName, RunProgress, SystemClock,
    Timestamp,
};

/// Opens a fresh, empty backend that reads time from the given clock.
pub trait MakeBackend: Send + Sync {
    /// A new backend with no jobs, runs or events, reading time from `clock`.
    fn make(
        &self,
        clock: Arc<dyn Clock>,
    ) -> Pin<Box<dyn Future<Output = Arc<dyn Backend>> + Send + '_>>;
}

impl<F, Fut> MakeBackend for F
where
    F: Fn(Arc<dyn Clock>) -> Fut + Send + Sync,
    Fut: Future<Output = Arc<dyn Backend>> + Send + 'static,
{
    fn make(
        &self,
        clock: Arc<dyn Clock>,
    ) -> Pin<Box<dyn Future<Output = Arc<dyn Backend>> + Send + '_>> {
        Box::pin(self(clock))
    }
}

/// Run every area except the crash test (which needs a child process).
pub async fn exercise(make: &dyn MakeBackend) {
    enqueue::all(make).await;
    reserve::all(make).await;
    outcomes::all(make).await;
    chains::all(make).await;
    groups::all(make).await;
    commits::all(make).await;
    runs::all(make).await;
    cancel::all(make).await;
    locks::all(make).await;
    effects::all(make).await;
    queues::all(make).await;
    stats::all(make).await;
    feed::all(make).await;
    schedules::all(make).await;
    worker::all(make).await;
    worker_faults::all(make).await;
    unique::all(make).await;
    retention::all(make).await;
    pause::all(make).await;
    jobs::all(make).await;
    trace::all(make).await;
    limits::all(make).await;
}

/// A backend on a manual clock, for tests that move time by hand.
pub(crate) async fn manual(make: &dyn MakeBackend) -> (Arc<dyn Backend>, ManualClock) {
    let clock = ManualClock::new(Timestamp(1_800_000_000_000_000));
    let backend = make.make(Arc::new(clock.clone())).await;
    (backend, clock)
}

pub(crate) async fn real(make: &dyn MakeBackend) -> Arc<dyn Backend> {
    make.make(Arc::new(SystemClock)).await
}

pub(crate) fn run(name: &str) -> RunName {
    RunName::new(name).expect("valid run name")
}

pub(crate) fn job(kind: &str, args: &str) -> JobSpec {
    JobSpec::new(kind, args)
}

pub(crate) async fn enqueue(
    b: &dyn Backend,
    run_name: &str,
    items: Vec<EnqueueItem>,
) -> Vec<Enqueued> {
    b.enqueue(EnqueueRequest {
        run: run(run_name),
        items,
        on_done: None,
    })
    .await
    .expect("enqueue")
}

pub(crate) const LEASE: Duration = Duration::from_secs(10);

/// Reserve without waiting.
pub(crate) async fn take(b: &dyn Backend, queue: &str, max: usize) -> Vec<ReservedJob> {
    b.reserve(ReserveRequest {
        queue: queue.to_string(),
        max,
        lease: LEASE,
        wait: Duration::ZERO,
    })
    .await
    .expect("reserve")
}

pub(crate) async fn resolve(
    b: &dyn Backend,
    lease: LeaseRef,
    resolution: Resolution,
) -> CompletionAck {
    let acks = b
        .complete(vec![Completion { lease, resolution }])
        .await
        .expect("complete");
    assert_eq!(acks.len(), 1, "expected one ack per completion");
    acks[0]
}

pub(crate) fn ok(result: &str) -> Resolution {
    Resolution::Succeeded {
        result: result.to_string(),
    }
}

pub(crate) async fn progress(b: &dyn Backend, run_name: &str) -> RunProgress {
    b.run_progress(&run(run_name))
        .await
        .expect("progress")
        .unwrap_or_else(|| panic!("run {run_name} should exist"))
}

/// (pending, available, running, succeeded, failed, cancelled)
pub(crate) fn counts(p: &RunProgress) -> (u64, u64, u64, u64, u64, u64) {
    (
        p.pending,
        p.available,
        p.running,
        p.succeeded,
        p.failed,
        p.cancelled,
    )
}
