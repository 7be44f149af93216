use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::Hints;
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage, JobRecord, LeaseRef,
    Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats, Record,
    ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

/// The one seam between the engine and where job state lives. Every implementation
/// must pass `tranche-backend-tests` unchanged; the engine never contains SQL or Redis
/// commands.
///
/// Contract, beyond the signatures:
/// - Every write is atomic: an `enqueue` of many items, a batch of completions with the
///   chain successors and group callbacks they release, and the run counters they move
///   are committed together or not at all.
/// - Completions, heartbeats and releases name a [`LeaseRef`]; one for an attempt that
///   no longer holds its job is refused (`Stale`), never applied.
/// - A `Running` job whose lease has expired is runnable again (or `Failed` when its
///   attempts are exhausted) by the next `reserve` of its queue.
/// - Run counters are maintained incrementally: `run_progress` never scans jobs.
/// - Every job state change (a job's creation included) appends one [`JobEvent`] to
///   the change feed in the same transaction. Event `seq`s increase strictly in commit
///   order and an event is visible only with every event before it, so paging with
///   `events(after = last seq seen)` never skips or reorders. Within one transaction a
///   job's events keep the order of its changes.
/// - `queue_depth` costs O(min(depth, cap)) and `queue_depths` O(available + running):
///   neither scans finished jobs.
/// - Per-queue statistics ([`QueueStats`]) move in the same transaction as the attempts
///   they count, whoever works the jobs (the engine's workers in any process, remote
///   workers through the HTTP API), so any reader sees the whole system's figures;
///   `queue_stats` costs O(queues), never a scan of jobs.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The clock this backend stamps and compares times with.
    fn clock(&self) -> Arc<dyn Clock>;

    /// How this backend is best driven (see [`Hints`]).
    fn hints(&self) -> Hints {
        Hints::default()
    }

    /// Enqueue items into a run (created on first use), in one transaction.
    async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError>;

    /// Lease up to `req.max` runnable jobs of a queue. Returns as soon as at least one
    /// is ready; when none is, waits up to `req.wait` for one (without busy polling)
    /// and returns an empty batch after that.
    async fn reserve(&self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError>;

    /// Apply a batch of attempt results, one ack per completion in order.
    async fn complete(&self, batch: Vec<Completion>) -> Result<Vec<CompletionAck>, BackendError>;

    /// Apply a [`Commit`] in one transaction: its completion, record writes, enqueue and
    /// gate arrivals all, or nothing. A stale completion applies nothing
    /// ([`CommitAck::Stale`]); a record whose version is not the one expected fails the
    /// whole commit with [`BackendError::Conflict`]; an invalid enqueue fails it as
    /// [`Backend::enqueue`] would. Concurrent commits serialise: of two that expect the
    /// same version of a record, one is applied. A gate's arrivals are counted O(1)
    /// each. Costs what its parts cost on their own.
    async fn commit(&self, commit: Commit) -> Result<CommitAck, BackendError>;

    /// The records under `keys`, in order; `None` for a key never written. Reads only,
    /// of committed state.
    async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError>;

    /// Extend the given leases to now + `lease`. Returns the ones no longer held (lease
    /// lost, or job cancelled), whose handlers should stop.
    async fn heartbeat(
        &self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError>;

    /// Give jobs back without counting the attempt (graceful shutdown).
    async fn release(&self, leases: Vec<LeaseRef>) -> Result<u64, BackendError>;

    /// Cancel jobs that have not ended; returns how many were cancelled.
    async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError>;

    /// Re-enqueue a run's failed jobs (with fresh attempts) and the chain steps cancelled
    /// because of them; returns how many jobs were revived.
    async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError>;

    /// A run's counters (jobs per state, finishes), or `None` for an unknown run.
    async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError>;

    /// Runs, newest first.
    async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError>;

    /// A run's failed jobs ordered by id, after `after`, at most `limit`.
    async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError>;

    /// One job as stored, or `None` for an unknown id.
    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError>;

    /// For each key, the job first enqueued under it in `run` (a chain's first step),
    /// or `None`; in order. Reads only: a caller can tell what exists before deciding
    /// what to enqueue.
    async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError>;

    /// A page of `run`'s unique keys with the job first enqueued under each, at most
    /// about `limit`, from `cursor` (`""` for the first page); the cursor of the next
    /// page, `None` after the last. A key present for the whole listing is listed at
    /// least once (a backend may list one twice).
    async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError>;

    /// How many jobs of `queue` are available (runnable now or scheduled), counting at
    /// most `cap`: enough to tell whether a queue is over a limit.
    async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError>;

    /// Available and running jobs per queue, for every queue that has any.
    async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError>;

    /// Cumulative statistics per queue (attempts started, outcomes, retries, lease
    /// expiries, wait and run times), sorted by queue, for every queue with any.
    async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError>;

    /// The change feed: events with `seq > after`, in order, at most `limit`. When there
    /// are none, waits up to `wait` for one (without busy polling), then returns empty.
    async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError>;

    /// The seq of the newest event, 0 when there is none: where a reader that wants
    /// only the changes from now on starts.
    async fn last_event(&self) -> Result<u64, BackendError>;

    /// Claim every key for `owner` until now + `ttl`, or none of them. Keys already held
    /// by the same owner are re-claimed (their TTL extended).
    async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError>;

    /// Release the keys held by `owner`; returns how many were released.
    async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError>;

    /// The effect recorded under `key` (an idempotency record), if any.
    async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError>;

    /// Record an effect; false (and nothing changed) if the key was already recorded.
    async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError>;

    /// True for exactly one caller per (run, hook, finish): used to run a shell command
    /// once when a run finishes, however many processes watch it.
    async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError>;

    /// Retention: remove up to `limit` runs that finished before `before` (every job
    /// of theirs ended, the last one before `before`), with their jobs, the jobs'
    /// attempt errors, their groups, unique keys and finish-hook claims. A run that has
    /// not finished is never touched, whatever its age; nor is one finished at or after
    /// `before`. Effects are kept (they prove an irreversible thing was done, and a job
    /// submitted again must still find them); so are the per-queue statistics. After a
    /// run is removed its name is free: an enqueue into it starts a new run, and its
    /// unique keys no longer deduplicate. Backends also forget by themselves what is
    /// older than their retention (SQLite by periodic small prunes, Redis by key
    /// expiry); this call is the same removal on demand.
    ///
    /// Cost: bounded work per step, never a scan of unfinished jobs; a backend with a
    /// single writer removes a large run a batch of jobs at a time, so other writes
    /// interleave, and a run is gone whole only with its last batch. Backends may also
    /// drop older change-feed entries and long-expired locks (SQLite drops events
    /// stamped before `before`, always keeping the newest; Redis bounds its feed by
    /// length). Returns what was removed; `runs < limit` means nothing more was due. A
    /// repeat removes what is left, never anything more recent.
    async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError>;

    /// Pause `queue`: from the commit on, no `reserve` of any process sharing this
    /// backend leases a job of it (the check is part of the reserve itself, so a
    /// reserve racing the pause either leased before it or leases nothing). Nothing
    /// else changes: jobs already running keep their leases and complete, heartbeat
    /// and release as usual; enqueues into the queue are accepted and wait; expired
    /// leases are still recovered (their jobs wait too). A queue need not have jobs to
    /// be paused. Returns true if it was not paused before; a repeat changes nothing
    /// and returns false. Costs O(1); a reserve pays one lookup for the check.
    /// `queue` is checked like an enqueue's (`Invalid` when empty or too long).
    async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError>;

    /// Resume a paused `queue`: its jobs are runnable again at once, and reserves
    /// waiting on it (in this process or, through the backend's wake-ups, any other)
    /// are woken. Returns true if it was paused; a repeat changes nothing and returns
    /// false. Costs O(1). `queue` is checked like [`pause_queue`](Self::pause_queue)'s.
    async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError>;

    /// The paused queues, sorted by name. Costs O(paused queues).
    async fn paused_queues(&self) -> Result<Vec<String>, BackendError>;

    /// Revive one failed or cancelled job: back to available now with fresh attempts
    /// (its attempt errors kept), and the later steps of its chain that were cancelled
    /// (they could not run without it) pending again behind it; a group member is
    /// awaited again by a callback not yet released, as [`retry_run`](Self::retry_run)
    /// does. Atomic, with the run's counters and feed events; costs O(its chain).
    /// Returns how many jobs were revived (the job and its steps). Refused with
    /// [`BackendError::Invalid`] for a job that has not ended or that succeeded, or a
    /// step cancelled because an earlier step failed (retry that step);
    /// [`BackendError::NotFound`] for an unknown job. A repeat is refused (the job is
    /// available by then): not safe to send twice.
    async fn retry_job(&self, id: JobId) -> Result<u64, BackendError>;

    /// Delete one ended job (succeeded, failed or cancelled) and its attempt errors;
    /// its run's counters lose it (total and its state), so `run_progress` stays
    /// right. The later steps of its chain that a failure of it had cancelled can no
    /// longer be revived by a retry. No feed event (no job changes state); its id is
    /// never given to another job. Returns false when there is no such job (a repeat
    /// is harmless); refused with [`BackendError::Invalid`] for a job that has not
    /// ended. O(its chain).
    async fn delete_job(&self, id: JobId) -> Result<bool, BackendError>;

    /// A page of the jobs that `filter` keeps, ids increasing, after `after`, at most
    /// `limit`, and where the next page starts. Keyset pagination: jobs enqueued while
    /// paging get higher ids, so a listing never skips or repeats a job that exists
    /// throughout. Each call's work is bounded (a window of ids after the cursor, no
    /// index kept for listing: an index per filter would tax every state change of the
    /// bulk path), so a page may be short while `next` still says more may follow.
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError>;

    /// Declare a schedule, or re-declare one of that name. A new one, or one whose
    /// `timing` differs from the stored one, is stored with `through` as given and no
    /// last fire (due times of an old timing never fire late under a new one); a
    /// re-declaration with the same timing replaces only `spec`, keeping what has been
    /// fired. Returns true when `through` was set. A repeat changes nothing more.
    async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError>;

    /// Remove a schedule; false if there was none. Jobs it enqueued stay.
    async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError>;

    /// Every schedule, sorted by name. O(schedules).
    async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError>;

    /// Handle due time `due` of schedule `name`, for exactly one caller however many
    /// processes race: atomically, if `due` is later than the schedule's `through`,
    /// set `through` to `due` and, with `enqueue`, enqueue it (as [`Backend::enqueue`])
    /// and set `last_fired` to `due`, all in one transaction. Returns the enqueue's
    /// result (empty without `enqueue`: a skipped due time), or `None`, with nothing
    /// changed, when `due` was already handled (or a later one was) or there is no such
    /// schedule. An invalid `enqueue` fails the whole call and leaves `through` as it
    /// was. A repeat after the call applied answers `None`: the due time was handled
    /// once, which is what matters; only the caller's report of it is lost.
    async fn fire_schedule(
        &self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError>;

    /// Declare a limit on a scope (a queue or a task kind), or replace the one it has.
    /// Stored in the backend, so it holds for every process sharing it from the moment
    /// it is applied; `reserve` enforces it atomically with the leases it takes:
    ///
    /// - `starts` (N per window): within any half-open interval `[t, t + per)` of the
    ///   backend's clock at most N of the scope's jobs are reserved (a start is an
    ///   attempt's reserve: retries count; a release or snooze gives nothing back). A
    ///   reserve grants as many as the last window leaves free. Replacing a limit keeps
    ///   the starts already made within the window.
    /// - `running` (K): at most K of the scope's jobs running (leased) at once. The count
    ///   follows every way a job leaves running (completion, retry, failure, snooze,
    ///   release, cancel, an expired lease recovered), so a killed worker holds its
    ///   slots only until its leases expire. Jobs already running when the limit is
    ///   declared count.
    ///
    /// A job is subject to both its queue's limit and its kind's. A reserve of a queue
    /// skips jobs whose kind is at its limit, leaving them runnable where they are (no
    /// attempt used, order kept), and leases the jobs of other kinds behind them. When
    /// a reserve grants nothing because of a start rate, its "next due" is when the
    /// window next frees a start, so a long-poll sleeps until then; a running cap is
    /// freed by a job leaving running, which wakes waiting reserves of its queue.
    ///
    /// Cost: queues without any limit (no limit on the queue and none on any kind)
    /// reserve exactly as before: the backend keeps the configuration where checking
    /// it costs no extra read (SQLite: cached, refreshed when another process commits;
    /// Redis: one hash read inside the reserve script). Returns true when the scope
    /// had no limit before. A repeat changes nothing more.
    async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError>;

    /// Remove a scope's limit (its start window with it); false if it had none. Waiting
    /// reserves of the queue (or, for a kind, of every queue) are woken.
    async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError>;

    /// Every limit with its use now (running jobs, starts within the window), sorted
    /// by scope (queues, then kinds, by name). O(limits + running jobs of the scopes).
    async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError>;
}
