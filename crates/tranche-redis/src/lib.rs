//! The fleet backend: job state in Redis, shared by workers on many machines.
//!
//! Design: every state transition is one Lua script (`src/scripts/*.lua`, each with
//! `common.lua` prepended) run with EVALSHA, so a batch of enqueues, reserves or
//! completions, the chain successors and group callbacks they release, the run
//! counters they move and their change-feed events commit atomically. Writes to shared
//! keys (queues, leases, counters, the feed) are buffered per script and applied in a
//! few calls: Redis's time per call, not per byte, bounds a fleet's throughput. Time comes from
//! the backend's [`Clock`] as a script argument, never from Redis. Waiting reserves and
//! feed reads sleep on a pub/sub wake-up (one channel per prefix) with a bounded
//! fallback poll. Commands go through a [`ConnectionManager`], which reconnects with
//! backoff; a call that fails because the server is unreachable (or still loading
//! after a restart) is reported as [`BackendError::Unavailable`], saying whether it
//! may have been applied, and the engine (or `tranche_core::Client::riding_outages`) retries it.
//!
//! Key layout, all under the prefix `P` (default `{tranche}:`):
//! - `P b:<id without its last three digits>` a bucket of a thousand jobs (hash): per
//!   job a record of its control fields plus its texts (args, input, result, error),
//!   and a count of the bucket's jobs that have not ended; once it is 0 the bucket
//!   expires [`RedisOptions::retention`] later (a job's records are fields, not keys
//!   of their own: a key lookup among millions costs ~2 µs, a field of a hot bucket
//!   ~0.2 µs; see `scripts/common.lua`). `P e:<id>` a job's attempt errors (list),
//!   expiring the retention after the job ends.
//! - `P qr:<queue>` ready jobs (zset: priority, then `available_at:id` members),
//!   `P qs:<queue>` scheduled ones (zset by available_at), `P leased` running jobs by
//!   lease expiry, `P qrun` running count per queue, `P queues` queue names,
//!   `P qst:<queue>` the queue's statistics (hash; see `stats.rs`).
//! - `P r:<run>` run counters (hash, O(1) progress), `P runs` runs by creation,
//!   `P ids:<run>` the id ranges its enqueues took (a list, one entry per script;
//!   a run cancel walks them: one script reading every job of the run, ~2 µs each, so
//!   cancelling a 1,000,000-job run holds Redis for about 2 s, a price paid once
//!   instead of two set writes per job on the hot path), `P fail:<run>` failed jobs
//!   (zset by id),
//!   `P cfail:<run>` steps cancelled by a failure, `P uq:<run>` unique keys,
//!   `P hook:<run>` claimed finish hooks; `P g:<id>`/`P gm:<id>` groups. A gate's
//!   count of arrivals still awaited is the field `g<id>` of its job's bucket (so it
//!   goes with the job; see `scripts/common.lua`), removed when the gate opens.
//! - `P rec:<key>` a record written by commits (hash: `v` its version, `d` its value;
//!   see `scripts/commit.lua`), kept until written ended (`RecordWrite::ended`), then
//!   expiring after the retention.
//! - `P uw:<key>` a unique key with a window, across runs (string: the newest windowed
//!   job's id and window end; see `scripts/enqueue.lua`), expiring when the window
//!   ends.
//! - `P paused` paused queue names (set; kept while paused, a name each, removed on
//!   resume): the reserve script checks it before leasing.
//! - Listing jobs (`list_jobs`) adds no key: it reads a run's failures, a run's id
//!   ranges or the ids up to `P seq:job`, a bounded number of jobs per call.
//! - `P feed` the change feed (stream, one entry per script holding its events,
//!   entry id = its last event's seq), `P seq:*` counters,
//!   `P lock:<key>`, `P eff:<key>`, and the pub/sub channel `P wake`.
//! - `P sch:<name>` a schedule (hash: timing, spec, through, fired), `P schs` the
//!   names of schedules (set); both kept until the schedule is deleted.
//! - Limits (`scripts/limits.lua`): `P lim` (hash: `q:<queue>`/`k:<kind>` -> the
//!   limit, `#k` -> how many kinds have one), `P lw:<scope>` (list: a limit's starts in
//!   its last window, `at|n` per granting reserve), `P lsum` (hash: scope -> starts in
//!   its list), `P krun` (hash: a limited kind -> its running jobs); kept until the
//!   limit is deleted, which removes its entries. The pub/sub message `*` wakes every
//!   waiting reserve (a kind's limit changed).
//!
//! Memory stays bounded: ended jobs (a bucket at a time: the retention after the last
//! of its thousand jobs ended, so one job that never ends keeps its bucket's thousand),
//! released groups and finished runs expire after the retention, the feed is trimmed
//! to about [`RedisOptions::feed_max_len`] events and locks expire after their TTL
//! plus the retention, as do records written ended (an ended workflow's state); effects
//! (proof of what was done), records not written ended, one `P runs` entry per run and one statistics hash per queue
//! are kept; a failed job can thus be revived by
//! `retry_run` only within the retention. [`Backend::prune`] does the same removal on
//! demand, for runs finished before a given time (`scripts/prune.lua`), and also drops
//! the run's `P runs` entry (as it does for runs whose keys already expired). Needs Redis 6.2 or newer, with
//! `maxmemory-policy noeviction` (an evicted key would lose jobs silently).
//!
//! One slot: the prefix carries one hash tag, so every key lives in one cluster slot
//! and a script, called with the prefix as its one key, may touch any of them: a chain moves jobs across queues and runs
//! atomically. To shard, give each run family its own prefix (e.g. `{notes}:`,
//! `{payouts}:`) and one backend per prefix; slots then spread over the cluster.

#![deny(missing_docs)]

mod commit;
mod complete;
mod enqueue;
mod failure;
mod feed;
mod job_row;
mod keys;
mod limits;
mod notify;
mod one_job;
mod packed;
mod pause;
mod prune;
mod read;
mod redact;
mod reserve;
mod schedules;
mod scripts;
mod stats;
mod steer;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::task::JoinHandle;
use tranche_backend::{Backend, Hints, Notifier};
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage, JobRecord, LeaseRef,
    Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats, Record,
    ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, SystemClock, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

pub(crate) use failure::store;
use failure::{ConnectFailed, NoSubscription};
use keys::Keys;
pub use redact::redacted_url;
use scripts::Scripts;

/// How to reach Redis and lay out keys.
#[derive(Clone)]
pub struct RedisOptions {
    /// e.g. `redis://127.0.0.1:6379/0`. Without a password (one is refused); messages
    /// show it through [`redacted_url`] all the same.
    pub url: String,
    /// The server's password (AUTH), kept out of the URL so it is never printed.
    pub password: Option<String>,
    /// Every key starts with it; must contain exactly one `{hash tag}`.
    pub prefix: String,
    /// Where job times come from: passed to each script as an argument, Redis's own
    /// clock is never read; tests pass a manual clock.
    pub clock: Arc<dyn Clock>,
    /// How long an ended job's data (and a finished run's) is kept.
    pub retention: Duration,
    /// The change feed keeps about this many newest events.
    pub feed_max_len: u64,
    /// The longest a waiting reserve or feed read sleeps between looks when no wake-up
    /// comes (a missed message, or jobs scheduled by time).
    pub poll_interval: Duration,
    /// A call whose reply has not come after this fails (the server hangs or the
    /// network dropped it); its change may or may not have been applied.
    pub response_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            url: "redis://127.0.0.1:6379".into(),
            password: None,
            prefix: "{tranche}:".into(),
            clock: Arc::new(SystemClock),
            retention: Duration::from_secs(7 * 24 * 3600),
            feed_max_len: 10_000_000,
            poll_interval: Duration::from_millis(500),
            response_timeout: Duration::from_secs(30),
        }
    }
}

/// The Redis backend. Cheap to share behind an `Arc`; its subscriber task stops when
/// it is dropped.
pub struct RedisBackend {
    conn: ConnectionManager,
    keys: Keys,
    scripts: Scripts,
    notifier: Arc<Notifier>,
    listener: JoinHandle<()>,
    options: RedisOptions,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("url", &redacted_url(&self.options.url))
            .field("prefix", &self.options.prefix)
            .finish()
    }
}

impl Drop for RedisBackend {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl RedisBackend {
    /// Connect, and subscribe to wake-ups before returning so that no change made after
    /// this call is missed by a waiter.
    pub async fn connect(options: RedisOptions) -> Result<Self, BackendError> {
        let tags = options.prefix.matches('{').count();
        if tags != 1 || !options.prefix.contains('}') {
            return Err(BackendError::Invalid {
                field: "prefix",
                expected: "one {hash tag}, e.g. \"{tranche}:\"".into(),
                got: format!("{:?}", options.prefix),
            });
        }
        let bad_url = |why: String| BackendError::Invalid {
            field: "redis url",
            expected: "redis://host:port[/db] without a password".into(),
            got: format!("{}: {why}", redacted_url(&options.url)),
        };
        let mut info = redis::IntoConnectionInfo::into_connection_info(options.url.as_str())
            .map_err(|e| bad_url(e.to_string()))?;
        if info.redis.password.is_some() {
            return Err(bad_url("it holds a password".into()));
        }
        info.redis.password = options.password.clone();
        let client = redis::Client::open(info).map_err(|e| bad_url(e.to_string()))?;
        // Few reconnect attempts per call: during an outage a call fails within about a
        // second and the engine retries it with its own backoff, instead of every call
        // hanging for the manager's whole retry schedule.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(2)
            .set_max_delay(500)
            .set_connection_timeout(Duration::from_secs(5))
            .set_response_timeout(options.response_timeout);
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|source| {
                let url = redacted_url(&options.url);
                BackendError::store("connect to redis", ConnectFailed { url, source })
            })?;
        let keys = Keys {
            prefix: options.prefix.clone(),
        };
        let notifier = Arc::new(Notifier::default());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let listener = tokio::spawn(notify::listen(
            client,
            keys.wake_channel(),
            notifier.clone(),
            ready_tx,
        ));
        let backend = RedisBackend {
            conn,
            keys,
            scripts: Scripts::new(),
            notifier,
            listener,
            options,
        };
        let within = Duration::from_secs(10);
        match tokio::time::timeout(within, ready_rx).await {
            Ok(Ok(())) => Ok(backend),
            _ => Err(BackendError::store(
                "subscribe to wake-ups",
                NoSubscription {
                    url: redacted_url(&backend.options.url),
                    within,
                },
            )),
        }
    }

    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }
}

#[async_trait]
impl Backend for RedisBackend {
    fn hints(&self) -> Hints {
        // Each reserve is a round trip: a second one in flight keeps Redis busy while
        // the worker takes in the last batch.
        Hints {
            fetchers_per_queue: 2,
        }
    }

    fn clock(&self) -> Arc<dyn Clock> {
        self.options.clock.clone()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError> {
        enqueue::enqueue(self, &req).await
    }

    async fn reserve(&self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError> {
        reserve::reserve(self, &req).await
    }

    async fn complete(&self, batch: Vec<Completion>) -> Result<Vec<CompletionAck>, BackendError> {
        complete::complete(self, &batch).await
    }

    async fn commit(&self, commit: Commit) -> Result<CommitAck, BackendError> {
        commit::commit(self, &commit).await
    }

    async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError> {
        commit::records(self, keys).await
    }

    async fn heartbeat(
        &self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError> {
        reserve::heartbeat(self, leases, lease).await
    }

    async fn release(&self, leases: Vec<LeaseRef>) -> Result<u64, BackendError> {
        reserve::release(self, &leases).await
    }

    async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError> {
        steer::cancel(self, &target, reason).await
    }

    async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError> {
        steer::retry_run(self, run).await
    }

    async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError> {
        read::run_progress(self, run).await
    }

    async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
        read::list_runs(self, limit).await
    }

    async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError> {
        read::run_failures(self, run, after, limit).await
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError> {
        read::job(self, id).await
    }

    async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError> {
        read::unique_jobs(self, run, keys).await
    }

    async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
        read::unique_keys(self, run, cursor, limit).await
    }

    async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError> {
        read::queue_depth(self, queue, cap).await
    }

    async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError> {
        read::queue_depths(self).await
    }

    async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        stats::queue_stats(self).await
    }

    async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError> {
        feed::events(self, after, limit, wait).await
    }

    async fn last_event(&self) -> Result<u64, BackendError> {
        feed::last(self).await
    }

    async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError> {
        steer::claim_locks(self, request.owner, request.keys, request.ttl).await
    }

    async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError> {
        steer::release_locks(self, owner, keys).await
    }

    async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        read::effect(self, key).await
    }

    async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError> {
        steer::record_effect(self, record.key, record.job, record.value).await
    }

    async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError> {
        steer::claim_finish_hook(self, run, hook, finish).await
    }

    async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError> {
        prune::prune(self, before, limit).await
    }

    async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError> {
        pause::pause(self, queue).await
    }

    async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError> {
        pause::resume(self, queue).await
    }

    async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        pause::paused(self).await
    }

    async fn retry_job(&self, id: JobId) -> Result<u64, BackendError> {
        one_job::retry_job(self, id).await
    }

    async fn delete_job(&self, id: JobId) -> Result<bool, BackendError> {
        one_job::delete_job(self, id).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError> {
        one_job::list_jobs(self, filter, after, limit).await
    }

    async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
        schedules::put(self, schedule).await
    }

    async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError> {
        schedules::delete(self, name).await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError> {
        schedules::list(self).await
    }

    async fn fire_schedule(
        &self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError> {
        schedules::fire(self, name, due, enqueue.as_ref()).await
    }

    async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError> {
        limits::put(self, limit).await
    }

    async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError> {
        limits::delete(self, scope).await
    }

    async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError> {
        limits::list(self).await
    }
}
