//! A fault-injecting backend, after asynq's test broker: it wraps a real backend and
//! fails the calls a test scripts (refused before reaching the store, or applied with
//! the reply lost, or a heartbeat answering that every lease was lost), so the engine's
//! retry and lease paths are tested against real state, not a mock of it. Every call
//! is counted and announced, so tests wait for "the third report" instead of a window.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tranche_backend::{Backend, Hints};
use tranche_test_support::FaultScript;
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage, JobRecord, LeaseRef,
    Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats, Record,
    ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

/// The calls a test can script faults for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// [`Backend::reserve`].
    Reserve,
    /// [`Backend::complete`].
    Complete,
    /// [`Backend::heartbeat`].
    Heartbeat,
}

/// What the next call of an [`Op`] does instead of (or after) reaching the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Fails without reaching the store (a refused connection).
    Refuse,
    /// Reaches the store and takes effect, then fails as if the reply was lost.
    LoseReply,
    /// A heartbeat that extends nothing and answers that every lease was lost (another
    /// worker took the jobs over).
    LoseLeases,
}

/// A [`Backend`] that fails scripted calls of the one it wraps (see the module docs).
pub struct Faulty {
    inner: Arc<dyn Backend>,
    script: FaultScript<Op, Fault>,
}

impl Faulty {
    /// Wrap `inner`; no faults until [`inject`](Self::inject)ed.
    pub fn new(inner: Arc<dyn Backend>) -> Arc<Self> {
        Arc::new(Faulty {
            inner,
            script: FaultScript::default(),
        })
    }

    /// The next calls of `op` meet these faults, in order; later ones go through.
    pub fn inject(&self, op: Op, faults: impl IntoIterator<Item = Fault>) {
        self.script.inject(op, faults);
    }

    /// Calls of `op` so far, failed ones included.
    pub fn calls(&self, op: Op) -> u64 {
        self.script.calls(op)
    }

    /// Faults scripted for `op` and not yet met.
    pub fn pending(&self, op: Op) -> usize {
        self.script.pending(op)
    }

    /// Wait until `op` has been called at least `n` times; panics after `deadline`.
    pub async fn wait_calls(&self, op: Op, n: u64, deadline: Duration) {
        self.script.wait_calls(op, n, deadline).await;
    }

    fn next(&self, op: Op) -> Option<Fault> {
        self.script.next(op)
    }
}

fn unavailable(op: &'static str, maybe_applied: bool) -> BackendError {
    BackendError::unavailable(op, "injected fault", maybe_applied)
}

#[async_trait]
impl Backend for Faulty {
    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    fn hints(&self) -> Hints {
        self.inner.hints()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError> {
        self.inner.enqueue(req).await
    }

    async fn reserve(&self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError> {
        match self.next(Op::Reserve) {
            Some(Fault::Refuse) => Err(unavailable("reserve", false)),
            Some(Fault::LoseReply) => {
                self.inner.reserve(req).await?;
                Err(unavailable("reserve", true))
            }
            Some(Fault::LoseLeases) | None => self.inner.reserve(req).await,
        }
    }

    async fn complete(&self, batch: Vec<Completion>) -> Result<Vec<CompletionAck>, BackendError> {
        match self.next(Op::Complete) {
            Some(Fault::Refuse) => Err(unavailable("complete", false)),
            Some(Fault::LoseReply) => {
                self.inner.complete(batch).await?;
                Err(unavailable("complete", true))
            }
            Some(Fault::LoseLeases) | None => self.inner.complete(batch).await,
        }
    }

    async fn commit(&self, commit: Commit) -> Result<CommitAck, BackendError> {
        match self.next(Op::Complete) {
            Some(Fault::Refuse) => Err(unavailable("commit", false)),
            Some(Fault::LoseReply) => {
                self.inner.commit(commit).await?;
                Err(unavailable("commit", true))
            }
            Some(Fault::LoseLeases) | None => self.inner.commit(commit).await,
        }
    }

    async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError> {
        self.inner.records(keys).await
    }

    async fn heartbeat(
        &self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError> {
        match self.next(Op::Heartbeat) {
            Some(Fault::Refuse) => Err(unavailable("heartbeat", false)),
            Some(Fault::LoseReply) => {
                self.inner.heartbeat(leases, lease).await?;
                Err(unavailable("heartbeat", true))
            }
            Some(Fault::LoseLeases) => Ok(leases),
            None => self.inner.heartbeat(leases, lease).await,
        }
    }

    async fn release(&self, leases: Vec<LeaseRef>) -> Result<u64, BackendError> {
        self.inner.release(leases).await
    }

    async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError> {
        self.inner.cancel(target, reason).await
    }

    async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError> {
        self.inner.retry_run(run).await
    }

    async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError> {
        self.inner.run_progress(run).await
    }

    async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
        self.inner.list_runs(limit).await
    }

    async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError> {
        self.inner.run_failures(run, after, limit).await
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError> {
        self.inner.job(id).await
    }

    async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError> {
        self.inner.unique_jobs(run, keys).await
    }

    async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
        self.inner.unique_keys(run, cursor, limit).await
    }

    async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError> {
        self.inner.queue_depth(queue, cap).await
    }

    async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError> {
        self.inner.queue_depths().await
    }

    async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.inner.queue_stats().await
    }

    async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError> {
        self.inner.events(after, limit, wait).await
    }

    async fn last_event(&self) -> Result<u64, BackendError> {
        self.inner.last_event().await
    }

    async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError> {
        self.inner.claim_locks(request).await
    }

    async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError> {
        self.inner.release_locks(owner, keys).await
    }

    async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        self.inner.effect(key).await
    }

    async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError> {
        self.inner.record_effect(record).await
    }

    async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError> {
        self.inner.claim_finish_hook(run, hook, finish).await
    }

    async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError> {
        self.inner.prune(before, limit).await
    }

    async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.inner.pause_queue(queue).await
    }

    async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.inner.resume_queue(queue).await
    }

    async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        self.inner.paused_queues().await
    }

    async fn retry_job(&self, id: JobId) -> Result<u64, BackendError> {
        self.inner.retry_job(id).await
    }

    async fn delete_job(&self, id: JobId) -> Result<bool, BackendError> {
        self.inner.delete_job(id).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError> {
        self.inner.list_jobs(filter, after, limit).await
    }

    async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
        self.inner.put_schedule(schedule).await
    }

    async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError> {
        self.inner.delete_schedule(name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError> {
        self.inner.schedules().await
    }

    async fn fire_schedule(
        &self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError> {
        self.inner.fire_schedule(name, due, enqueue).await
    }

    async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError> {
        self.inner.put_limit(limit).await
    }

    async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError> {
        self.inner.delete_limit(scope).await
    }

    async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError> {
        self.inner.limits().await
    }
}
