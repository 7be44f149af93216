use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tranche_types::{
    BackendError, Completion, CompletionAck, LeaseRef, Outcome, ReserveRequest, ReservedJob,
    Resolution, Timestamp,
};

use tranche_backend::Backend;

use crate::client::Client;
use crate::context::JobContext;
use crate::task::{Handler, RawOutcome, Registry, TaskEntry};

/// How a worker process serves its queues.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Queue name and how many of its jobs may be in flight at once.
    pub queues: Vec<(String, usize)>,
    /// Most jobs asked for in one reserve call.
    pub batch: usize,
    /// A job whose worker stops heartbeating is runnable again after this long.
    pub lease: Duration,
    /// How often leases of running jobs are extended (well under `lease`).
    pub heartbeat: Duration,
    /// How long one reserve call waits when a queue is empty.
    pub reserve_wait: Duration,
    /// Reserve calls in flight per queue; `None` takes the backend's hint (1 embedded,
    /// 2 on Redis: a second call keeps it busy while this process takes in the last
    /// batch). An idle queue costs that many waiting calls.
    pub fetchers_per_queue: Option<usize>,
    /// On shutdown, how long in-flight jobs may take to finish before their leases are
    /// handed back.
    pub grace: Duration,
    /// Threads for CPU-bound handlers.
    pub cpu_threads: usize,
    /// Told about each finished attempt.
    pub observer: Option<Arc<dyn Observer>>,
}

impl std::fmt::Debug for dyn Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        let lease = Duration::from_secs(10);
        WorkerConfig {
            queues: vec![("default".to_string(), 256)],
            batch: 256,
            lease,
            heartbeat: lease / 3,
            reserve_wait: Duration::from_secs(1),
            fetchers_per_queue: None,
            grace: Duration::from_secs(30),
            cpu_threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            observer: None,
        }
    }
}

impl WorkerConfig {
    /// Serve exactly `names`, each with at most `concurrency` jobs in flight.
    pub fn queues<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
        concurrency: usize,
    ) -> Self {
        self.queues = names.into_iter().map(|n| (n.into(), concurrency)).collect();
        self
    }

    /// Lease jobs for `lease`, heartbeating every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self.heartbeat = lease / 3;
        self
    }

    /// Checks the configuration before anything runs.
    pub(crate) fn validate(&self) -> Result<(), WorkerError> {
        let invalid = |field, expected: &str, got: String| {
            Err(WorkerError::Config {
                field,
                expected: expected.to_string(),
                got,
            })
        };
        if self.queues.is_empty() {
            return invalid("queues", "at least one queue", "none".into());
        }
        if let Some((q, _)) = self.queues.iter().find(|(_, c)| *c == 0) {
            return invalid(
                "queue concurrency",
                "at least 1",
                format!("0 for queue {q:?}"),
            );
        }
        if self.heartbeat >= self.lease {
            return invalid(
                "heartbeat",
                &format!("shorter than the lease ({:?})", self.lease),
                format!("{:?}", self.heartbeat),
            );
        }
        if self.fetchers_per_queue == Some(0) {
            return invalid("fetchers_per_queue", "at least 1", "0".into());
        }
        if self.batch == 0 {
            return invalid("batch", "at least 1", "0".into());
        }
        if self.cpu_threads == 0 {
            return invalid("cpu_threads", "at least 1", "0".into());
        }
        Ok(())
    }
}

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The [`WorkerConfig`] is inconsistent.
    #[error("invalid worker {field}: expected {expected}, got {got}")]
    Config {
        /// The setting at fault, e.g. `"heartbeat"`.
        field: &'static str,
        /// What would have been accepted.
        expected: String,
        /// What was given.
        got: String,
    },
    /// The threads for CPU-bound handlers could not be started.
    #[error("could not start the CPU pool")]
    CpuPool(#[source] rayon::ThreadPoolBuildError),
}

/// One job attempt whose result is durable, as seen by an [`Observer`].
#[derive(Clone, Copy, Debug)]
pub struct Finished<'a> {
    /// The job's task kind.
    pub kind: &'a str,
    /// What the attempt's result was.
    pub resolution: &'a Resolution,
    /// When the job became runnable: its wait is measured from here.
    pub available_at: Timestamp,
    /// When its handler started, on the backend's clock.
    pub started_at: Timestamp,
    /// Now: when its result was committed.
    pub finished_at: Timestamp,
}

/// Told about every attempt once its result is durable: the seam for metrics and for
/// benchmarks' latency figures. Called on the completion path: keep it cheap.
pub trait Observer: Send + Sync + 'static {
    /// One attempt's result was applied (stale results are not reported).
    fn finished(&self, attempt: &Finished<'_>);
}

/// Counters of what a worker did, readable while it runs.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Reserve calls made (an idle worker makes about one per `reserve_wait`).
    pub reserve_calls: AtomicU64,
    pub(crate) reserved: AtomicU64,
    /// Attempts reported succeeded and applied.
    pub succeeded: AtomicU64,
    pub(crate) retried: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) snoozed: AtomicU64,
    /// Completions refused because the attempt had lost its job.
    pub stale: AtomicU64,
    /// Jobs handed back unfinished at shutdown.
    pub released: AtomicU64,
    /// Set while the backend refuses this worker's calls.
    trouble: Mutex<Option<BackendTrouble>>,
    /// The caller tells the operator about `trouble` itself: logging it too would say
    /// it twice.
    trouble_shown: AtomicBool,
}

/// The backend has failed every write this worker asked of it since `since`: the work
/// waits (results are kept and reported again) until it works.
#[derive(Clone, Debug)]
pub struct BackendTrouble {
    /// The first failure of this run of failures.
    pub since: Instant,
    /// The latest failure.
    pub error: String,
    /// When the failure is a full disk, the file that could not grow.
    pub full: Option<String>,
}

impl WorkerStats {
    /// Attempts whose result the backend applied, whatever it was (stale ones excluded).
    pub fn completed(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
            + self.retried.load(Ordering::Relaxed)
            + self.failed.load(Ordering::Relaxed)
            + self.cancelled.load(Ordering::Relaxed)
            + self.snoozed.load(Ordering::Relaxed)
    }

    /// Jobs this worker holds: reserved and not yet reported or handed back. A backend
    /// marks jobs running a moment before they are counted here.
    pub fn in_flight(&self) -> u64 {
        let ended = self.completed()
            + self.stale.load(Ordering::Relaxed)
            + self.released.load(Ordering::Relaxed);
        self.reserved.load(Ordering::Relaxed).saturating_sub(ended)
    }

    /// The caller shows [`trouble`](Self::trouble) to the operator (e.g. on a progress
    /// display): the worker logs it at debug level only.
    pub fn show_trouble_elsewhere(&self) {
        self.trouble_shown.store(true, Ordering::Relaxed);
    }

    /// Whether the backend is refusing this worker's calls, and why.
    pub fn trouble(&self) -> Option<BackendTrouble> {
        self.trouble.lock().expect("trouble lock").clone()
    }

    /// Note a failed call; true for the first of a run of failures.
    fn backend_failed(&self, e: &BackendError) -> bool {
        let mut trouble = self.trouble.lock().expect("trouble lock");
        let full = match e {
            BackendError::Full { path, .. } => Some(path.clone()),
            _ => None,
        };
        match trouble.as_mut() {
            Some(t) => {
                t.error = e.to_string();
                t.full = full;
                false
            }
            None => {
                *trouble = Some(BackendTrouble {
                    since: Instant::now(),
                    error: e.to_string(),
                    full,
                });
                true
            }
        }
    }

    /// Note a call that wrote; how long the backend had been failing, if it was.
    fn backend_works(&self) -> Option<Duration> {
        let mut trouble = self.trouble.lock().expect("trouble lock");
        trouble.take().map(|t| t.since.elapsed())
    }
}

/// One line when the backend starts failing and one when it works again: every
/// reserve, report and heartbeat is retried meanwhile, and logging each would bury the
/// cause (a full disk) under a line a second.
fn backend_failed(shared: &Shared, call: &str, e: &BackendError) {
    let first = shared.stats.backend_failed(e);
    if first && !shared.stats.trouble_shown.load(Ordering::Relaxed) {
        tracing::warn!(error = %e, "{call} failed; retrying until the backend works again");
    } else {
        tracing::debug!(error = %e, "{call} failed; retrying");
    }
}

fn backend_works(shared: &Shared) {
    if let Some(after) = shared.stats.backend_works() {
        if shared.stats.trouble_shown.load(Ordering::Relaxed) {
            tracing::debug!(after = ?after, "the backend works again");
        } else {
            tracing::warn!(after = ?after, "the backend works again");
        }
    }
}

/// Serves queues: reserves jobs in batches, runs their handlers (async ones on the
/// runtime, CPU-bound ones on a pool sized to the cores), keeps their leases alive and
/// reports results in batches.
pub struct Worker {
    shared: Arc<Shared>,
}

struct Shared {
    backend: Arc<dyn Backend>,
    registry: Registry,
    config: WorkerConfig,
    cpu_pool: rayon::ThreadPool,
    inflight: Mutex<HashMap<LeaseRef, CancellationToken>>,
    stats: Arc<WorkerStats>,
}

impl Shared {
    /// The leases of the jobs this worker is running now.
    fn held_leases(&self) -> Vec<LeaseRef> {
        self.inflight
            .lock()
            .expect("inflight lock")
            .keys()
            .copied()
            .collect()
    }
}

struct Done {
    completion: Completion,
    kind: String,
    available_at: Timestamp,
    started_at: Timestamp,
    _permit: OwnedSemaphorePermit,
}

impl Worker {
    /// A worker of `client`'s backend serving `config`'s queues with `registry`'s
    /// handlers (see also [`Client::worker`]).
    pub fn new(
        client: &Client,
        registry: Registry,
        mut config: WorkerConfig,
    ) -> Result<Worker, WorkerError> {
        let backend = client.backend().clone();
        config.fetchers_per_queue = Some(
            config
                .fetchers_per_queue
                .unwrap_or(backend.hints().fetchers_per_queue),
        );
        config.validate()?;
        let cpu_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.cpu_threads)
            .thread_name(|i| format!("tranche-cpu-{i}"))
            .build()
            .map_err(WorkerError::CpuPool)?;
        Ok(Worker {
            shared: Arc::new(Shared {
                backend,
                registry,
                config,
                cpu_pool,
                inflight: Mutex::new(HashMap::new()),
                stats: Arc::new(WorkerStats::default()),
            }),
        })
    }

    /// This worker's counters, shared: read them while [`run`](Self::run) goes on.
    pub fn stats(&self) -> Arc<WorkerStats> {
        self.shared.stats.clone()
    }

    /// Serve until `shutdown` is cancelled, then stop reserving, give in-flight jobs
    /// `grace` to finish and hand the rest back.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), BackendError> {
        let shared = &self.shared;
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        let stop_completer = CancellationToken::new();
        let completer = tokio::spawn(complete_loop(
            shared.clone(),
            done_rx,
            stop_completer.clone(),
        ));
        let stop_heartbeat = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat_loop(shared.clone(), stop_heartbeat.clone()));

        let tracker = TaskTracker::new();
        let mut fetchers = tokio::task::JoinSet::new();
        for (queue, concurrency) in &shared.config.queues {
            // The queue's fetchers share its slots: together they hold at most
            // `concurrency` jobs.
            let slots = Arc::new(Semaphore::new(*concurrency));
            for _ in 0..shared.config.fetchers_per_queue.unwrap_or(1) {
                fetchers.spawn(fetch_loop(
                    shared.clone(),
                    queue.clone(),
                    slots.clone(),
                    done_tx.clone(),
                    tracker.clone(),
                    shutdown.clone(),
                ));
            }
        }
        drop(done_tx);
        while fetchers.join_next().await.is_some() {}

        tracker.close();
        if tokio::time::timeout(shared.config.grace, tracker.wait())
            .await
            .is_err()
        {
            // Handed back before their handlers are told to stop: a handler that
            // returns on being told would otherwise race its own result (an attempt
            // counted) against the hand-back.
            let leases = shared.held_leases();
            tracing::warn!(
                jobs = leases.len(),
                "grace period over: handing unfinished jobs back"
            );
            match shared.backend.release(leases).await {
                Ok(n) => {
                    shared.stats.released.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not hand jobs back; their leases will expire")
                }
            }
            for token in shared.inflight.lock().expect("inflight lock").values() {
                token.cancel();
            }
        }
        stop_completer.cancel();
        let _ = completer.await;
        stop_heartbeat.cancel();
        let _ = heartbeat.await;
        Ok(())
    }
}

async fn fetch_loop(
    shared: Arc<Shared>,
    queue: String,
    slots: Arc<Semaphore>,
    done_tx: mpsc::UnboundedSender<Done>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut failures = 0u32;
    loop {
        let first = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("slots never closed"),
            _ = shutdown.cancelled() => break,
        };
        let mut permits = vec![first];
        while permits.len() < shared.config.batch {
            match slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let req = ReserveRequest {
            queue: queue.clone(),
            max: permits.len(),
            lease: shared.config.lease,
            wait: shared.config.reserve_wait,
        };
        // Not raced against shutdown: a reserve call dropped after the backend leased
        // jobs would strand them until their lease expired. It waits at most
        // `reserve_wait`; what it returns after shutdown is handed straight back.
        shared.stats.reserve_calls.fetch_add(1, Ordering::Relaxed);
        let jobs = shared.backend.reserve(req).await;
        if shutdown.is_cancelled() {
            if let Ok(jobs) = jobs {
                if !jobs.is_empty() {
                    let leases: Vec<LeaseRef> = jobs.iter().map(ReservedJob::lease).collect();
                    match shared.backend.release(leases).await {
                        Ok(n) => {
                            shared.stats.released.fetch_add(n, Ordering::Relaxed);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "could not hand jobs back; their leases will expire")
                        }
                    }
                }
            }
            break;
        }
        let jobs = match jobs {
            Ok(jobs) => {
                failures = 0;
                // An empty reserve may have written nothing: it does not show that
                // the backend can be written again.
                if !jobs.is_empty() {
                    backend_works(&shared);
                }
                jobs
            }
            Err(e) => {
                failures += 1;
                let pause = Duration::from_millis(100 * 2u64.pow(failures.min(6)));
                backend_failed(&shared, &format!("reserve of queue {queue}"), &e);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => continue,
                    _ = shutdown.cancelled() => break,
                }
            }
        };
        shared
            .stats
            .reserved
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        permits.truncate(jobs.len());
        let mut inflight = shared.inflight.lock().expect("inflight lock");
        for (job, permit) in jobs.into_iter().zip(permits) {
            let token = CancellationToken::new();
            inflight.insert(job.lease(), token.clone());
            tracker.spawn(execute(shared.clone(), job, token, permit, done_tx.clone()));
        }
    }
}

async fn execute(
    shared: Arc<Shared>,
    job: ReservedJob,
    token: CancellationToken,
    permit: OwnedSemaphorePermit,
    done_tx: mpsc::UnboundedSender<Done>,
) {
    let lease = job.lease();
    let kind = job.kind.clone();
    let available_at = job.available_at;
    let started_at = shared.backend.clock().now();
    let resolution = match shared.registry.get(&job.kind) {
        None => {
            let mut kinds: Vec<&str> = shared.registry.kinds().collect();
            kinds.sort_unstable();
            Resolution::Retry {
                error: format!(
                    "no handler for task kind {:?} in this worker (it has: {})",
                    job.kind,
                    kinds.join(", ")
                ),
                at: shared.backend.clock().now().plus(Duration::from_secs(60)),
            }
        }
        Some(entry) => {
            let entry = entry.clone();
            let _kind_slot = match &entry.limit {
                Some(limit) => Some(limit.clone().acquire_owned().await.expect("never closed")),
                None => None,
            };
            let attempt = job.attempt;
            let span = crate::trace::propagator().map(|p| attempt_span(p, &job));
            let ctx = JobContext::new(
                job,
                token,
                shared.backend.clone(),
                shared.config.lease,
                tokio::runtime::Handle::current(),
            );
            match span {
                None => {
                    let outcome = run_handler(&shared, &entry, ctx).await;
                    resolve(&shared, &entry, attempt, outcome)
                }
                Some((p, span)) => {
                    let outcome = run_handler(&shared, &entry, ctx)
                        .instrument(span.clone())
                        .await;
                    traced(p, &span, resolve(&shared, &entry, attempt, outcome))
                }
            }
        }
    };
    let _ = done_tx.send(Done {
        completion: Completion { lease, resolution },
        kind,
        available_at,
        started_at,
        _permit: permit,
    });
}

/// The span of one attempt (docs/traces.md), continuing the job's trace context.
fn attempt_span(
    p: &'static dyn crate::trace::Propagator,
    job: &ReservedJob,
) -> (&'static dyn crate::trace::Propagator, tracing::Span) {
    let span = tracing::info_span!(
        "job",
        otel.name = %format_args!("job {}", job.kind),
        otel.kind = "consumer",
        job.id = job.id.0,
        job.kind = %job.kind,
        job.queue = %job.queue,
        job.run = %job.run,
        job.attempt = i64::from(job.attempt),
        job.outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    if let Some(parent) = &job.trace {
        p.continue_trace(&span, parent);
    }
    (p, span)
}

/// Record the attempt's outcome on its span; a success hands the span's context to the
/// next chain step.
fn traced(
    p: &dyn crate::trace::Propagator,
    span: &tracing::Span,
    resolution: Resolution,
) -> Resolution {
    let (outcome, error) = match &resolution {
        Resolution::Succeeded { .. } | Resolution::SucceededTraced { .. } => ("succeeded", None),
        Resolution::Retry { error, .. } => ("retry", Some(error)),
        Resolution::Snooze { .. } => ("snooze", None),
        Resolution::Cancelled { reason } => ("cancelled", Some(reason)),
        Resolution::Failed { error } => ("failed", Some(error)),
    };
    span.record("job.outcome", outcome);
    match error {
        Some(error) => {
            span.record("otel.status_description", error.as_str());
        }
        None => {
            span.record("otel.status_code", "ok");
        }
    }
    match resolution {
        Resolution::Succeeded { result } => match p.traceparent(span) {
            Some(trace) => Resolution::SucceededTraced { result, trace },
            None => Resolution::Succeeded { result },
        },
        other => other,
    }
}

async fn run_handler(shared: &Shared, entry: &TaskEntry, ctx: JobContext) -> RawOutcome {
    let token = ctx.token().clone();
    let timeout = entry.options.timeout;
    let work = match &entry.handler {
        Handler::Async(h) => {
            let h = h.clone();
            let ctx2 = ctx.clone();
            async move {
                let args = ctx2.args_owned();
                match std::panic::catch_unwind(AssertUnwindSafe(|| h(ctx2, &args))) {
                    Ok(fut) => AssertUnwindSafe(fut)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|p| panicked(&*p)),
                    Err(p) => panicked(&*p),
                }
            }
            .boxed()
        }
        Handler::Blocking(h) => {
            let h = h.clone();
            let (tx, rx) = oneshot::channel();
            let ctx2 = ctx.clone();
            shared.cpu_pool.spawn(move || {
                let args = ctx2.args_owned();
                let out = std::panic::catch_unwind(AssertUnwindSafe(|| h(ctx2, &args)))
                    .unwrap_or_else(|p| panicked(&*p));
                let _ = tx.send(out);
            });
            async move {
                rx.await
                    .unwrap_or_else(|_| Outcome::retry("CPU pool dropped the job"))
            }
            .boxed()
        }
    };
    match timeout {
        None => work.await,
        Some(limit) => match tokio::time::timeout(limit, work).await {
            Ok(out) => out,
            Err(_) => {
                // Async work is dropped here; CPU-bound work sees the cancellation.
                token.cancel();
                Outcome::retry(format!("timed out after {limit:?}"))
            }
        },
    }
}

fn panicked(payload: &(dyn std::any::Any + Send)) -> RawOutcome {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    Outcome::retry(format!("handler panicked: {msg}"))
}

fn resolve(shared: &Shared, entry: &TaskEntry, attempt: u32, outcome: RawOutcome) -> Resolution {
    let now = shared.backend.clock().now();
    match outcome {
        Outcome::Complete(result) => Resolution::Succeeded { result },
        Outcome::Retry { error, after } => Resolution::Retry {
            error,
            at: now.plus(after.unwrap_or_else(|| entry.options.backoff.delay(attempt))),
        },
        Outcome::Snooze(d) => Resolution::Snooze { at: now.plus(d) },
        Outcome::Cancel(reason) => Resolution::Cancelled { reason },
        Outcome::Discard(error) => Resolution::Failed { error },
    }
}

/// Reports results in batches. Two report calls may be in flight at once: while the
/// backend applies one batch the next is already on its way, so a remote backend
/// (Redis) never waits for this process between calls.
async fn complete_loop(
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Done>,
    stop: CancellationToken,
) {
    const MAX_BATCH: usize = 4096;
    const IN_FLIGHT: usize = 2;
    let mut calls = tokio::task::JoinSet::new();
    loop {
        if calls.len() >= IN_FLIGHT {
            let _ = calls.join_next().await;
            continue;
        }
        let first = tokio::select! {
            biased;
            m = rx.recv() => match m { Some(m) => m, None => break },
            _ = stop.cancelled() => match rx.try_recv() { Ok(m) => m, Err(_) => break },
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        calls.spawn(report(shared.clone(), batch, stop.clone()));
    }
    while calls.join_next().await.is_some() {}
}

async fn report(shared: Arc<Shared>, batch: Vec<Done>, stop: CancellationToken) {
    let completions: Vec<Completion> = batch.iter().map(|d| d.completion.clone()).collect();
    let mut tries = 0u32;
    let acks = loop {
        match shared.backend.complete(completions.clone()).await {
            Ok(acks) => {
                backend_works(&shared);
                break Some(acks);
            }
            Err(e) => {
                tries += 1;
                if stop.is_cancelled() && tries > 5 {
                    tracing::error!(error = %e, jobs = completions.len(), "giving up reporting results; leases will expire and the jobs run again");
                    break None;
                }
                let pause = Duration::from_millis(50 * 2u64.pow(tries.min(7)));
                backend_failed(&shared, "reporting results", &e);
                tokio::time::sleep(pause).await;
            }
        }
    };
    let now = shared.backend.clock().now();
    let mut inflight = shared.inflight.lock().expect("inflight lock");
    for (i, done) in batch.iter().enumerate() {
        inflight.remove(&done.completion.lease);
        let Some(acks) = &acks else { continue };
        let counter = match (acks.get(i), &done.completion.resolution) {
            (Some(CompletionAck::Stale), _) | (None, _) => &shared.stats.stale,
            (_, Resolution::Succeeded { .. } | Resolution::SucceededTraced { .. }) => {
                &shared.stats.succeeded
            }
            (_, Resolution::Retry { .. }) => &shared.stats.retried,
            (_, Resolution::Snooze { .. }) => &shared.stats.snoozed,
            (_, Resolution::Cancelled { .. }) => &shared.stats.cancelled,
            (_, Resolution::Failed { .. }) => &shared.stats.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let (Some(observer), Some(CompletionAck::Applied)) =
            (&shared.config.observer, acks.get(i))
        {
            observer.finished(&Finished {
                kind: &done.kind,
                resolution: &done.completion.resolution,
                available_at: done.available_at,
                started_at: done.started_at,
                finished_at: now,
            });
        }
    }
    // Slots are freed (permits dropped) only now, after the results are durable.
    drop(inflight);
    drop(batch);
}

async fn heartbeat_loop(shared: Arc<Shared>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        let leases = shared.held_leases();
        if leases.is_empty() {
            continue;
        }
        match shared.backend.heartbeat(leases, shared.config.lease).await {
            Ok(lost) => {
                backend_works(&shared);
                let inflight = shared.inflight.lock().expect("inflight lock");
                for lease in lost {
                    if let Some(token) = inflight.get(&lease) {
                        token.cancel();
                    }
                }
            }
            Err(e) => backend_failed(&shared, "lease heartbeat", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_field() {
        let bad = WorkerConfig::default().queues(["pdf"], 0);
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "invalid worker queue concurrency: expected at least 1, got 0 for queue \"pdf\""
        );
        let bad = WorkerConfig {
            heartbeat: Duration::from_secs(20),
            ..WorkerConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "invalid worker heartbeat: expected shorter than the lease (10s), got 20s"
        );
        assert!(WorkerConfig::default().validate().is_ok());
    }
}
