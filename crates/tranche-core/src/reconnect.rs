//! Riding out a broker outage (a Redis restart, a network cut): [`Reconnecting`] wraps
//! a backend and tries a call that failed with [`BackendError::Unavailable`] again,
//! with exponential backoff, until the backend answers or the call has failed for
//! `retry_for`. Every long-running command uses it, so none of them dies of a broken
//! pipe, and each says once that it lost the broker and once that it is back.
//!
//! What is tried again:
//! - Reads, always.
//! - Writes whose repeat is harmless: a repeated heartbeat, release, cancel, retry of a
//!   run, lock claim or release changes nothing more. A completion applied before its
//!   reply was lost is refused on repeat (`Stale`): the result is durable, only the
//!   worker's own count of it misses it. A repeated `record_effect` answers false
//!   (already recorded), which is true. A reserve whose reply was lost leaves its jobs
//!   leased to nobody until the lease expires, then they run again.
//! - An enqueue only when a repeat adds nothing twice: every item is found by a unique
//!   key (a job's, a chain's head's, a group's callback's). A windowed key
//!   (`unique_for`) counts too: a repeat inside the window finds the job; one after
//!   it adds a job the caller's next enqueue would have added anyway. Otherwise only when the
//!   call certainly did not run (the connection was refused, the server still
//!   loading); after an ambiguous failure the caller gets the error, marked
//!   `maybe_applied`, and decides (the engine bench counts what arrived).
//! - A prune, always: a repeat removes only what is still due (a lost reply's count is
//!   lost with it, the removal is not).
//! - A pause or resume of a queue: a repeat leaves the queue as the first call did and
//!   answers false (no change), so a caller told "already paused" after a lost reply
//!   still finds the queue paused.
//! - A job retry (`retry_job`) likewise: repeating one that did apply is refused (the
//!   job is available by then). A job delete is repeated: a repeat answers false.
//! - A finish-hook claim likewise: repeating one that did apply would answer "someone
//!   else claimed it", and nobody would run the hook.
//! - Schedule declarations, removals and reads, always. Firing a schedule's due time
//!   too: the claim and its enqueue are one transaction, so a repeat of one that
//!   applied answers "already handled" and the job was enqueued once all the same.
//! - Limit declarations, removals and reads, always: a repeat stores the same limit
//!   again (answering "it existed").
//!
//! Once the process has been asked to stop ([`on_terminate`](crate::on_terminate)), a
//! failed call is no longer tried again, so that a shutdown during an outage takes
//! seconds, not the outage.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueItem, EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage,
    JobRecord, LeaseRef, Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats,
    Record, ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

use tranche_backend::Backend;

/// The first pause after a failed call; it doubles up to [`MAX_PAUSE`]. Short, so a
/// one-second restart costs about a second.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// An outage as a [`Reconnecting`] backend reports it: each once per outage.
#[derive(Debug)]
pub enum Outage<'a> {
    /// A call failed because the backend is unreachable: calls are tried again for up
    /// to `retry_for` from now.
    Lost {
        /// The failure that began the outage.
        error: &'a BackendError,
        /// How long each call keeps trying.
        retry_for: Duration,
    },
    /// A call sent after the outage began succeeded.
    Back {
        /// How long the outage lasted.
        after: Duration,
    },
    /// A call has failed for `retry_for` and returns its error (the first one of an
    /// outage to give up reports it); a caller that carries on (a worker) goes on
    /// calling, and each call again waits up to `retry_for`.
    GaveUp {
        /// How long that call tried.
        after: Duration,
    },
}

/// How a call may be repeated after the backend became unreachable during it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Always,
    /// Only when the failed attempt certainly did not run.
    IfNotApplied,
}

#[derive(Default)]
struct State {
    down_since: Option<Instant>,
    gave_up: bool,
}

/// A [`Backend`] that rides out outages of the one it wraps (see the module docs).
pub struct Reconnecting {
    inner: Arc<dyn Backend>,
    retry_for: Duration,
    state: Mutex<State>,
    report: Box<dyn Fn(Outage<'_>) + Send + Sync>,
}

impl std::fmt::Debug for Reconnecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnecting")
            .field("retry_for", &self.retry_for)
            .finish()
    }
}

impl Reconnecting {
    /// Wrap `inner`, trying each call again for up to `retry_for`; `report` is told
    /// when an outage begins, ends, or is given up on.
    pub fn new(
        inner: Arc<dyn Backend>,
        retry_for: Duration,
        report: impl Fn(Outage<'_>) + Send + Sync + 'static,
    ) -> Self {
        Reconnecting {
            inner,
            retry_for,
            state: Mutex::new(State::default()),
            report: Box::new(report),
        }
    }

    async fn call<T, Fut>(
        &self,
        repeat: Repeat,
        mut attempt: impl FnMut() -> Fut,
    ) -> Result<T, BackendError>
    where
        Fut: Future<Output = Result<T, BackendError>>,
    {
        let mut pause = FIRST_PAUSE;
        let mut failing_since = None;
        loop {
            let sent = Instant::now();
            let error = match attempt().await {
                Ok(v) => {
                    self.answered(sent);
                    return Ok(v);
                }
                Err(e) => e,
            };
            let BackendError::Unavailable { maybe_applied, .. } = &error else {
                return Err(error);
            };
            self.unreachable(&error);
            if *maybe_applied && repeat == Repeat::IfNotApplied {
                return Err(error);
            }
            let waited = failing_since.get_or_insert(sent).elapsed();
            if waited >= self.retry_for {
                self.give_up(waited);
                return Err(error);
            }
            // A process shutting down (see on_terminate) does not wait out the outage:
            // its worker hands back what it can and lets the leases expire.
            let terminating = crate::signals::terminating();
            tokio::select! {
                _ = tokio::time::sleep(pause.min(self.retry_for - waited)) => {}
                _ = terminating.cancelled() => return Err(error),
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Marks the outage's start: the first failure of an outage reports it.
    fn unreachable(&self, error: &BackendError) {
        let mut state = self.state.lock().expect("outage state");
        if state.down_since.is_some() {
            return;
        }
        state.down_since = Some(Instant::now());
        drop(state);
        (self.report)(Outage::Lost {
            error,
            retry_for: self.retry_for,
        });
    }

    fn give_up(&self, after: Duration) {
        let mut state = self.state.lock().expect("outage state");
        if !std::mem::replace(&mut state.gave_up, true) {
            drop(state);
            (self.report)(Outage::GaveUp { after });
        }
    }

    /// A call sent at `sent` succeeded: it ends the outage only if sent after it began
    /// (a reply to an older call may predate the failure).
    fn answered(&self, sent: Instant) {
        let mut state = self.state.lock().expect("outage state");
        let Some(since) = state.down_since else {
            return;
        };
        if sent < since {
            return;
        }
        *state = State::default();
        drop(state);
        (self.report)(Outage::Back {
            after: since.elapsed(),
        });
    }
}

/// True when enqueueing `req` a second time adds nothing: every item is found by its
/// unique key (a job's, a chain's head's, a group's callback's).
fn repeatable(req: &EnqueueRequest) -> bool {
    req.items.iter().all(|item| {
        let identity = match item {
            EnqueueItem::Job(spec) => Some(spec),
            EnqueueItem::Chain(steps) => steps.first(),
            EnqueueItem::Group { callback, .. } => Some(callback),
            EnqueueItem::Gate { job, .. } => Some(job),
        };
        identity.is_some_and(|spec| spec.unique_key.is_some())
    })
}

#[async_trait]
impl Backend for Reconnecting {
    fn hints(&self) -> tranche_backend::Hints {
        self.inner.hints()
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError> {
        let repeat = if repeatable(&req) {
            Repeat::Always
        } else {
            Repeat::IfNotApplied
        };
        self.call(repeat, || self.inner.enqueue(req.clone())).await
    }

    async fn reserve(&self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError> {
        self.call(Repeat::Always, || self.inner.reserve(req.clone()))
            .await
    }

    async fn complete(&self, batch: Vec<Completion>) -> Result<Vec<CompletionAck>, BackendError> {
        self.call(Repeat::Always, || self.inner.complete(batch.clone()))
            .await
    }

    async fn commit(&self, commit: Commit) -> Result<CommitAck, BackendError> {
        // With a completion a repeat is harmless: applied once already, it is stale.
        // Without one, a lost reply leaves the caller to read what was written.
        let repeat = if commit.completion.is_some() {
            Repeat::Always
        } else {
            Repeat::IfNotApplied
        };
        self.call(repeat, || self.inner.commit(commit.clone()))
            .await
    }

    async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError> {
        self.call(Repeat::Always, || self.inner.records(keys)).await
    }

    async fn heartbeat(
        &self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError> {
        self.call(Repeat::Always, || {
            self.inner.heartbeat(leases.clone(), lease)
        })
        .await
    }

    async fn release(&self, leases: Vec<LeaseRef>) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.release(leases.clone()))
            .await
    }

    async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.cancel(target.clone(), reason))
            .await
    }

    async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.retry_run(run))
            .await
    }

    async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError> {
        self.call(Repeat::Always, || self.inner.run_progress(run))
            .await
    }

    async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
        self.call(Repeat::Always, || self.inner.list_runs(limit))
            .await
    }

    async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError> {
        self.call(Repeat::Always, || {
            self.inner.run_failures(run, after, limit)
        })
        .await
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError> {
        self.call(Repeat::Always, || self.inner.job(id)).await
    }

    async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError> {
        self.call(Repeat::Always, || self.inner.unique_jobs(run, keys))
            .await
    }

    async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
        self.call(Repeat::Always, || {
            self.inner.unique_keys(run, cursor, limit)
        })
        .await
    }

    async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.queue_depth(queue, cap))
            .await
    }

    async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError> {
        self.call(Repeat::Always, || self.inner.queue_depths())
            .await
    }

    async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.call(Repeat::Always, || self.inner.queue_stats()).await
    }

    async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError> {
        self.call(Repeat::Always, || self.inner.events(after, limit, wait))
            .await
    }

    async fn last_event(&self) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.last_event()).await
    }

    async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError> {
        self.call(Repeat::Always, || self.inner.claim_locks(request))
            .await
    }

    async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError> {
        self.call(Repeat::Always, || self.inner.release_locks(owner, keys))
            .await
    }

    async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        self.call(Repeat::Always, || self.inner.effect(key)).await
    }

    async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.record_effect(record))
            .await
    }

    async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError> {
        self.call(Repeat::IfNotApplied, || {
            self.inner.claim_finish_hook(run, hook, finish)
        })
        .await
    }

    async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError> {
        self.call(Repeat::Always, || self.inner.prune(before, limit))
            .await
    }

    async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.pause_queue(queue))
            .await
    }

    async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.resume_queue(queue))
            .await
    }

    async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        self.call(Repeat::Always, || self.inner.paused_queues())
            .await
    }

    async fn retry_job(&self, id: JobId) -> Result<u64, BackendError> {
        self.call(Repeat::IfNotApplied, || self.inner.retry_job(id))
            .await
    }

    async fn delete_job(&self, id: JobId) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.delete_job(id))
            .await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError> {
        self.call(Repeat::Always, || {
            self.inner.list_jobs(filter, after, limit)
        })
        .await
    }

    async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.put_schedule(schedule))
            .await
    }

    async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.delete_schedule(name))
            .await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError> {
        self.call(Repeat::Always, || self.inner.schedules()).await
    }

    async fn fire_schedule(
        &self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError> {
        self.call(Repeat::Always, || {
            self.inner.fire_schedule(name, due, enqueue.clone())
        })
        .await
    }

    async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.put_limit(limit))
            .await
    }

    async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError> {
        self.call(Repeat::Always, || self.inner.delete_limit(scope))
            .await
    }

    async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError> {
        self.call(Repeat::Always, || self.inner.limits()).await
    }
}

#[cfg(test)]
mod tests {
    use tranche_types::{EnqueueItem, EnqueueRequest, JobSpec, RunName};

    use super::repeatable;

    fn request(items: Vec<EnqueueItem>) -> EnqueueRequest {
        EnqueueRequest {
            run: RunName::new("r").unwrap(),
            items,
            on_done: None,
        }
    }

    #[test]
    fn an_enqueue_is_repeated_only_when_every_item_has_a_unique_key() {
        let keyed = || JobSpec::new("k", "null").unique_key("client:1");
        let plain = || JobSpec::new("k", "null");
        assert!(repeatable(&request(vec![
            EnqueueItem::Job(keyed()),
            EnqueueItem::Chain(vec![keyed(), plain()]),
            EnqueueItem::Group {
                members: vec![plain()],
                callback: keyed(),
            },
        ])));
        assert!(!repeatable(&request(vec![
            EnqueueItem::Job(keyed()),
            EnqueueItem::Job(plain()),
        ])));
        // A chain is found by its head's key only.
        assert!(!repeatable(&request(vec![EnqueueItem::Chain(vec![
            plain(),
            keyed()
        ])])));
        assert!(!repeatable(&request(vec![EnqueueItem::Chain(vec![])])));
    }
}
