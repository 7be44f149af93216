use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::Semaphore;
use tranche_types::{JobSpec, Outcome};

use crate::context::JobContext;

/// Exponential backoff with jitter: attempt n waits `base * factor^(n-1)`, capped at
/// `max`, then spread by ±`jitter` (a fraction) so retries of many jobs that failed
/// together do not arrive together.
#[derive(Clone, Debug, PartialEq)]
pub struct Backoff {
    /// The delay after the first failure (default 1 s).
    pub base: Duration,
    /// Growth per further failure; below 1 counts as 1 (default 2).
    pub factor: f64,
    /// The longest delay before jitter (default 10 min).
    pub max: Duration,
    /// Spread as a fraction of the delay, clamped to 0..=1 (default 0.2).
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(600),
            jitter: 0.2,
        }
    }
}

impl Backoff {
    /// The delay after the `attempt`-th failure (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self
            .factor
            .max(1.0)
            .powi(attempt.saturating_sub(1).min(64) as i32);
        let raw = (self.base.as_secs_f64() * exp).min(self.max.as_secs_f64());
        let jitter = self.jitter.clamp(0.0, 1.0);
        let spread = 1.0 + jitter * (2.0 * fastrand::f64() - 1.0);
        Duration::from_secs_f64((raw * spread).max(0.0))
    }
}

/// How jobs of one task kind are enqueued and run.
#[derive(Clone, Debug)]
pub struct TaskOptions {
    pub(crate) queue: String,
    /// At most this many jobs of the kind run at once in one worker (None: the queue's
    /// concurrency is the only bound).
    pub(crate) concurrency: Option<usize>,
    pub(crate) max_attempts: u32,
    pub(crate) backoff: Backoff,
    /// An attempt running longer is stopped and retried.
    pub(crate) timeout: Option<Duration>,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            queue: JobSpec::DEFAULT_QUEUE.to_string(),
            concurrency: None,
            max_attempts: JobSpec::DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            timeout: None,
        }
    }
}

impl TaskOptions {
    /// Enqueue the kind's jobs on `queue` (default `"default"`).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// At most `n` (at least 1) of the kind's jobs run at once in one worker.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = Some(n.max(1));
        self
    }
    /// At most `n` (at least 1) attempts per job (default 10).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }
    /// Wait between retries with `backoff` when the handler names no delay.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }
    /// Stop an attempt running longer than `t` and retry it.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
}

/// A handler's outcome with its result already serialised to JSON.
pub(crate) type RawOutcome = Outcome<String>;

pub(crate) type AsyncHandler =
    Arc<dyn Fn(JobContext, &str) -> BoxFuture<'static, RawOutcome> + Send + Sync>;
pub(crate) type BlockingHandler = Arc<dyn Fn(JobContext, &str) -> RawOutcome + Send + Sync>;

#[derive(Clone)]
pub(crate) enum Handler {
    /// Runs on the async runtime: for I/O-bound work.
    Async(AsyncHandler),
    /// Runs on the CPU pool (one thread per core) so it never blocks the runtime.
    Blocking(BlockingHandler),
}

pub(crate) struct TaskEntry {
    pub options: TaskOptions,
    pub handler: Handler,
    pub limit: Option<Arc<Semaphore>>,
}

/// The task kinds a worker can run, each with its handler and options.
#[derive(Default, Clone)]
pub struct Registry {
    tasks: HashMap<String, Arc<TaskEntry>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("kinds", &self.tasks.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn decode_args<A: DeserializeOwned>(kind: &str, args: &str) -> Result<A, String> {
    serde_json::from_str(args).map_err(|e| {
        format!(
            "invalid arguments for task {kind:?}: {e} (got {})",
            preview(args)
        )
    })
}

fn preview(s: &str) -> String {
    const MAX: usize = 120;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn encode_outcome<T: Serialize>(outcome: Outcome<T>) -> RawOutcome {
    match outcome {
        Outcome::Complete(v) => match serde_json::to_string(&v) {
            Ok(s) => Outcome::Complete(s),
            Err(e) => Outcome::Discard(format!("result could not be serialised: {e}")),
        },
        Outcome::Retry { error, after } => Outcome::Retry { error, after },
        Outcome::Snooze(d) => Outcome::Snooze(d),
        Outcome::Cancel(r) => Outcome::Cancel(r),
        Outcome::Discard(e) => Outcome::Discard(e),
    }
}

impl Registry {
    /// No task kinds yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Register an async handler for `kind`. Arguments are deserialised from the job's
    /// JSON; a job whose arguments do not fit is discarded with the reason.
    pub fn register<A, T, O, F, Fut>(&mut self, kind: &str, options: TaskOptions, f: F) -> &mut Self
    where
        A: DeserializeOwned + Send + 'static,
        T: Serialize + 'static,
        O: Into<Outcome<T>> + 'static,
        F: Fn(JobContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = O> + Send + 'static,
    {
        let kind_owned = kind.to_string();
        let f = Arc::new(f);
        let handler: AsyncHandler = Arc::new(move |ctx, args| {
            let decoded = decode_args::<A>(&kind_owned, args);
            let f = f.clone();
            Box::pin(async move {
                match decoded {
                    Ok(a) => encode_outcome(f(ctx, a).await.into()),
                    Err(e) => Outcome::Discard(e),
                }
            })
        });
        self.insert(kind, options, Handler::Async(handler))
    }

    /// Register a CPU-bound handler for `kind`: it runs on the worker's CPU pool, sized
    /// to the cores, never on the async runtime's threads.
    pub fn register_blocking<A, T, O, F>(
        &mut self,
        kind: &str,
        options: TaskOptions,
        f: F,
    ) -> &mut Self
    where
        A: DeserializeOwned + Send + 'static,
        T: Serialize + 'static,
        O: Into<Outcome<T>> + 'static,
        F: Fn(JobContext, A) -> O + Send + Sync + 'static,
    {
        let kind_owned = kind.to_string();
        let handler: BlockingHandler =
            Arc::new(move |ctx, args| match decode_args::<A>(&kind_owned, args) {
                Ok(a) => encode_outcome(f(ctx, a).into()),
                Err(e) => Outcome::Discard(e),
            });
        self.insert(kind, options, Handler::Blocking(handler))
    }

    fn insert(&mut self, kind: &str, options: TaskOptions, handler: Handler) -> &mut Self {
        let limit = options.concurrency.map(|n| Arc::new(Semaphore::new(n)));
        self.tasks.insert(
            kind.to_string(),
            Arc::new(TaskEntry {
                options,
                handler,
                limit,
            }),
        );
        self
    }

    pub(crate) fn get(&self, kind: &str) -> Option<&Arc<TaskEntry>> {
        self.tasks.get(kind)
    }

    pub(crate) fn options(&self, kind: &str) -> Option<&TaskOptions> {
        self.tasks.get(kind).map(|t| &t.options)
    }

    pub(crate) fn kinds(&self) -> impl Iterator<Item = &str> {
        self.tasks.keys().map(String::as_str)
    }

    /// A job of `kind` with the task's registered queue and attempts (defaults if the
    /// kind is not registered here, e.g. a task served by a remote worker).
    pub fn spec<A: Serialize>(&self, kind: &str, args: &A) -> Result<JobSpec, serde_json::Error> {
        let args = serde_json::to_string(args)?;
        let mut spec = JobSpec::new(kind, args);
        if let Some(o) = self.options(kind) {
            spec.queue = o.queue.clone();
            spec.max_attempts = o.max_attempts;
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let b = Backoff {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(10),
            jitter: 0.0,
        };
        assert_eq!(b.delay(1), Duration::from_secs(1));
        assert_eq!(b.delay(3), Duration::from_secs(4));
        assert_eq!(b.delay(30), Duration::from_secs(10));
    }

    #[test]
    fn backoff_jitter_stays_in_band() {
        let b = Backoff {
            jitter: 0.5,
            ..Backoff::default()
        };
        for _ in 0..1000 {
            let d = b.delay(2).as_secs_f64();
            assert!((1.0..=3.0).contains(&d), "{d}");
        }
    }

    #[test]
    fn spec_uses_registered_options() {
        let mut r = Registry::new();
        r.register(
            "render",
            TaskOptions::default().queue("pdf").max_attempts(3),
            |_ctx, _a: ()| async { Ok::<_, String>(()) },
        );
        let s = r.spec("render", &()).unwrap();
        assert_eq!((s.queue.as_str(), s.max_attempts), ("pdf", 3));
        let s = r.spec("unknown", &1).unwrap();
        assert_eq!((s.queue.as_str(), s.args.as_str()), ("default", "1"));
    }
}
