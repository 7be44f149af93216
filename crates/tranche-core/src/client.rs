//! [`Client`]: what applications, pipelines, the HTTP server and the CLI hold.

use std::sync::Arc;
use std::time::Duration;

use tranche_backend::{Backend, Hints};
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage, JobRecord, LeaseRef,
    Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats, Record,
    ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

use crate::reconnect::{Outage, Reconnecting};
use crate::runs::{self, WaitError};
use crate::task::Registry;
use crate::worker::{Worker, WorkerConfig, WorkerError};

/// A handle on where job state lives (the embedded SQLite file or a Redis server):
/// enqueue, steer and inspect runs, read the change feed, take locks and record
/// effects. Cheap to clone; every clone talks to the same backend.
///
/// Each method's guarantees (atomicity, ordering, cost) are those of the backend
/// contract, written on `tranche_backend::Backend` and checked against every backend by
/// `tranche-backend-tests`; they are summed up here for callers. Build one from a
/// backend crate's handle: `Client::new(SqliteBackend::open(dir, options)?)`.
#[derive(Clone)]
pub struct Client {
    backend: Arc<dyn Backend>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("hints", &self.backend.hints())
            .finish()
    }
}

impl Client {
    /// A client of `backend` (a `SqliteBackend`, a `RedisBackend`, …).
    pub fn new(backend: impl Backend) -> Self {
        Client {
            backend: Arc::new(backend),
        }
    }

    /// A client of a backend already shared (tests wrap one in a fault injector).
    pub fn from_shared(backend: Arc<dyn Backend>) -> Self {
        Client { backend }
    }

    /// The same backend, with every call riding out an outage of up to `retry_for`
    /// (see [`Reconnecting`]); `report` hears when an outage begins and ends.
    pub fn riding_outages(
        self,
        retry_for: Duration,
        report: impl Fn(Outage<'_>) + Send + Sync + 'static,
    ) -> Self {
        Client::new(Reconnecting::new(self.backend, retry_for, report))
    }

    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// A worker serving `config`'s queues with `registry`'s handlers.
    pub fn worker(&self, registry: Registry, config: WorkerConfig) -> Result<Worker, WorkerError> {
        Worker::new(self, registry, config)
    }

    /// Poll a run's O(1) progress every `every` until it has finished, calling
    /// `on_progress` on each read, for at most `deadline`.
    pub async fn wait_finished(
        &self,
        run: &RunName,
        every: Duration,
        deadline: Option<Duration>,
        on_progress: impl FnMut(&RunProgress),
    ) -> Result<RunProgress, WaitError> {
        runs::wait_finished(self.backend.as_ref(), run, every, deadline, on_progress).await
    }

    /// The clock the backend stamps and compares times with.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.backend.clock()
    }

    /// How the backend is best driven (e.g. reserve calls in flight per queue).
    pub fn hints(&self) -> Hints {
        self.backend.hints()
    }

    /// Enqueue items into a run (created on first use), all or none. An item with a
    /// unique key already used in the run is not added again: its existing job is
    /// returned. An item whose key has a window ([`JobSpec::unique_for`]) is instead
    /// matched across all runs, against the key's newest windowed job while that is
    /// inside its window and has neither failed nor been cancelled (see
    /// [`tranche_types::unique`]); `Enqueued::existed` says a duplicate was found.
    ///
    /// [`JobSpec::unique_for`]: tranche_types::JobSpec::unique_for
    pub async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError> {
        self.backend.enqueue(req).await
    }

    /// Cancel jobs that have not ended; how many were cancelled.
    pub async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError> {
        self.backend.cancel(target, reason).await
    }

    /// Re-enqueue a run's failed jobs (fresh attempts) and the chain steps cancelled
    /// because of them; how many jobs were revived.
    pub async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError> {
        self.backend.retry_run(run).await
    }

    /// A run's counters, read in O(1); `None` for an unknown run.
    pub async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError> {
        self.backend.run_progress(run).await
    }

    /// Runs, newest first, at most `limit`.
    pub async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
        self.backend.list_runs(limit).await
    }

    /// A run's failed jobs ordered by id, after `after`, at most `limit`.
    pub async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError> {
        self.backend.run_failures(run, after, limit).await
    }

    /// One job, or `None` for an unknown id.
    pub async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError> {
        self.backend.job(id).await
    }

    /// For each key, the job first enqueued under it in `run`, or `None`; in order.
    pub async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError> {
        self.backend.unique_jobs(run, keys).await
    }

    /// A page of `run`'s unique keys with their jobs from `cursor` (`""` first), and the
    /// next page's cursor (`None` after the last).
    pub async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
        self.backend.unique_keys(run, cursor, limit).await
    }

    /// How many jobs of `queue` are available, counting at most `cap`.
    pub async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError> {
        self.backend.queue_depth(queue, cap).await
    }

    /// Available and running jobs per queue.
    pub async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError> {
        self.backend.queue_depths().await
    }

    /// Cumulative statistics per queue, every worker's, sorted by queue.
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.backend.queue_stats().await
    }

    /// The change feed: events with `seq > after`, in commit order, at most `limit`;
    /// when there are none, waits up to `wait` for one.
    pub async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError> {
        self.backend.events(after, limit, wait).await
    }

    /// The seq of the newest event (0 when none): where to start reading only what
    /// happens from now on.
    pub async fn last_event(&self) -> Result<u64, BackendError> {
        self.backend.last_event().await
    }

    /// Claim every key for `owner` until now + `ttl`, or none of them.
    pub async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError> {
        self.backend.claim_locks(request).await
    }

    /// Release the keys held by `owner`; how many were released.
    pub async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError> {
        self.backend.release_locks(owner, keys).await
    }

    /// The effect recorded under `key`, if any.
    pub async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        self.backend.effect(key).await
    }

    /// Record an effect once; false (nothing changed) if `key` was already recorded.
    pub async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError> {
        self.backend.record_effect(record).await
    }

    /// True for exactly one caller per (run, hook, finish).
    pub async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError> {
        self.backend.claim_finish_hook(run, hook, finish).await
    }

    /// Declare (or re-declare) a schedule. A new one, or a changed `timing`, starts
    /// counting due times after `through`; the same timing keeps what was fired and
    /// replaces only `spec`. True when `through` was set. Applications use
    /// `tranche_schedule`, which fills these in from a declaration.
    pub async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
        self.backend.put_schedule(schedule).await
    }

    /// Remove a schedule; false if there was none.
    pub async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError> {
        self.backend.delete_schedule(name).await
    }

    /// Every schedule as stored, sorted by name.
    pub async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError> {
        self.backend.schedules().await
    }

    /// The worker protocol — leasing jobs, reporting their attempts, extending and
    /// giving back leases, committing a step with what it makes ready, firing a
    /// schedule's due time — for the server's remote-worker API, the workflow engine
    /// and the scheduler. Applications enqueue,
    /// inspect and steer through the `Client` itself and run handlers with a
    /// [`Worker`], which speaks this protocol for them.
    pub fn worker_protocol(&self) -> WorkerProtocol<'_> {
        WorkerProtocol(self)
    }

    /// Versioned records under `keys`, in order (`None` for a key never written).
    pub async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError> {
        self.backend.records(keys).await
    }

    /// Retention on demand: remove up to `limit` runs that finished before `before`
    /// (every job ended, the last one before `before`), with their jobs. Unfinished
    /// runs are never touched; effects are kept; a removed run's name and unique keys
    /// are free again. Work is done in bounded steps (other writes interleave); call
    /// again while `runs == limit` to go on (`tranche prune` does, showing progress).
    /// Both backends also do this by themselves after their retention.
    pub async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError> {
        self.backend.prune(before, limit).await
    }

    /// What [`prune`](Self::prune) would remove now (its dry run): the runs, newest
    /// first, that finished before `before` with no job left to run. Reads every run's
    /// counters (no job is read).
    pub async fn prunable(&self, before: Timestamp) -> Result<Vec<RunProgress>, BackendError> {
        let runs = self.backend.list_runs(i64::MAX as usize).await?;
        Ok(runs
            .into_iter()
            .filter(|p| p.finished_at.is_some_and(|f| f < before) && p.queued() + p.running == 0)
            .collect())
    }

    /// Pause `queue` for every worker of every process sharing the backend: they stop
    /// taking its jobs at once. Nothing in flight is lost: running jobs finish and
    /// report as usual, enqueues into the queue are accepted and wait. True if it was
    /// not already paused. The queue need not have jobs yet.
    pub async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.backend.pause_queue(queue).await
    }

    /// Resume a paused `queue`: its jobs are runnable again at once and waiting workers
    /// are woken. True if it was paused.
    pub async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.backend.resume_queue(queue).await
    }

    /// The paused queues, sorted by name.
    pub async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        self.backend.paused_queues().await
    }

    /// Declare (or replace) a limit on a queue's or a task kind's jobs, for every
    /// process sharing the backend: at most `starts.count` starts in any window of
    /// `starts.per_ms` (a strict sliding window; retries count as starts) and at most
    /// `running` running at once. Jobs of a kind at its limit are skipped by reserves
    /// of their queue, not failed, and other kinds go ahead. True if the scope had no
    /// limit before. See `Backend::put_limit` for the whole contract.
    pub async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError> {
        self.backend.put_limit(limit).await
    }

    /// Remove a scope's limit; false if it had none.
    pub async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError> {
        self.backend.delete_limit(scope).await
    }

    /// Every limit with its use now (running jobs, starts in the window), queues first.
    pub async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError> {
        self.backend.limits().await
    }

    /// Revive one failed or cancelled job (fresh attempts, available now) and the
    /// cancelled chain steps after it; how many jobs were revived. Refused
    /// ([`BackendError::Invalid`]) for a job still pending, available or running, one
    /// that succeeded, or a step cancelled because an earlier one failed;
    /// [`BackendError::NotFound`] for an unknown job.
    pub async fn retry_job(&self, id: JobId) -> Result<u64, BackendError> {
        self.backend.retry_job(id).await
    }

    /// Delete one ended job and its attempt errors, its run's counters adjusted;
    /// false when there is no such job. Refused ([`BackendError::Invalid`]) for a job
    /// that has not ended: cancel it first.
    pub async fn delete_job(&self, id: JobId) -> Result<bool, BackendError> {
        self.backend.delete_job(id).await
    }

    /// A page of the jobs `filter` keeps, ids increasing after `after`, at most
    /// `limit`, and the next page's cursor (`None` after the last). A page may be short
    /// while more follow (each call's work is bounded); jobs enqueued while paging
    /// never make a page skip or repeat one. A state without a run is looked for only
    /// in the runs that hold jobs in that state, when they are few (see `listing.rs`).
    pub async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError> {
        crate::listing::list_jobs(&*self.backend, filter, after, limit).await
    }
}

/// The calls of the worker protocol ([`Client::worker_protocol`]): what a process that
/// runs jobs for others calls, apart from what users call.
#[derive(Clone, Copy)]
pub struct WorkerProtocol<'c>(&'c Client);

// The calls take the protocol by value: a future holds the client, not a temporary.
impl<'c> WorkerProtocol<'c> {
    /// Lease up to `req.max` runnable jobs of a queue, waiting up to `req.wait` for one.
    /// For servers that hand jobs to remote workers; in-process work uses [`Worker`].
    pub async fn reserve(self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError> {
        self.0.backend.reserve(req).await
    }

    /// Apply attempt results, one ack per completion in order (remote workers).
    pub async fn complete(
        self,
        batch: Vec<Completion>,
    ) -> Result<Vec<CompletionAck>, BackendError> {
        self.0.backend.complete(batch).await
    }

    /// Apply a completion with the records, jobs and gate arrivals it brings, all in
    /// one transaction or nothing (workflows; see `Backend::commit`).
    pub async fn commit(self, commit: Commit) -> Result<CommitAck, BackendError> {
        self.0.backend.commit(commit).await
    }

    /// Handle a schedule's due time once across every process (the scheduler every
    /// worker and server runs): if `due` is later than
    /// the schedule's `through`, advance it and enqueue `enqueue` (if any) in the same
    /// transaction. `None` (nothing changed) when it was already handled.
    pub async fn fire_schedule(
        self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError> {
        self.0.backend.fire_schedule(name, due, enqueue).await
    }

    /// Extend leases; the ones no longer held (remote workers).
    pub async fn heartbeat(
        self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError> {
        self.0.backend.heartbeat(leases, lease).await
    }

    /// Give jobs back without counting the attempt (remote workers shutting down).
    pub async fn release(self, leases: Vec<LeaseRef>) -> Result<u64, BackendError> {
        self.0.backend.release(leases).await
    }
}
