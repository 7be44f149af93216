use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{JobId, JobState, RunName, Timestamp, TooLong};

/// One job to enqueue. `args` is JSON text, serialised once by the caller and handed to
/// the handler untouched, so backends never parse it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The task kind: a stable string chosen by the task's author, not a Rust type name.
    pub kind: String,
    /// The queue its workers reserve from.
    pub queue: String,
    /// The handler's arguments, as JSON text.
    pub args: String,
    /// Attempts before a retried job fails for good; at least 1.
    pub max_attempts: u32,
    /// Lower runs first.
    #[serde(default)]
    pub priority: i16,
    /// Enqueueing the same key twice in a run is a no-op returning the first job.
    #[serde(default)]
    pub unique_key: Option<String>,
    /// Not runnable before this time.
    #[serde(default)]
    pub not_before: Option<Timestamp>,
    /// With `unique_key`: the key is unique across runs for this long from this job's
    /// enqueue, instead of within its run forever (see [`unique`](crate::unique)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_for: Option<Duration>,
    /// The trace context of whatever enqueued it (a W3C `traceparent`), so that its
    /// attempts' spans join that trace. A chain step without one takes the step's before
    /// it. Kept as given: only tracing reads it (see docs/traces.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl JobSpec {
    /// The queue of a job that names none.
    pub const DEFAULT_QUEUE: &'static str = "default";
    /// The attempts of a job that names none.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
    /// Longest task kind, in bytes. Kinds and queues are metric labels, index keys and
    /// Redis key parts: a bound keeps one careless caller from bloating all of them.
    pub const MAX_KIND_LEN: usize = 128;
    /// Longest queue name, in bytes.
    pub const MAX_QUEUE_LEN: usize = 128;
    /// Longest unique key, in bytes: room for a composite of several ids.
    pub const MAX_UNIQUE_KEY_LEN: usize = 512;
    /// Longest trace context, in bytes: a `traceparent` is 55, future versions may add
    /// fields.
    pub const MAX_TRACE_LEN: usize = 256;

    /// The first of kind, queue and unique key that is longer than its limit. Backends
    /// check this on enqueue, so every way in (library, CLI, HTTP) is bounded alike.
    pub fn check_lengths(&self) -> Result<(), TooLong> {
        let fields = [
            ("kind", self.kind.len(), Self::MAX_KIND_LEN),
            ("queue", self.queue.len(), Self::MAX_QUEUE_LEN),
            (
                "unique_key",
                self.unique_key.as_ref().map_or(0, String::len),
                Self::MAX_UNIQUE_KEY_LEN,
            ),
            (
                "trace",
                self.trace.as_ref().map_or(0, String::len),
                Self::MAX_TRACE_LEN,
            ),
        ];
        match fields.into_iter().find(|(_, got, max)| got > max) {
            Some((field, got, max)) => Err(TooLong { field, max, got }),
            None => Ok(()),
        }
    }

    /// Refuses a trace context that is not printable ASCII without spaces (a W3C
    /// `traceparent` is hex digits and dashes): backends may store it between control
    /// characters.
    pub fn check_trace(&self) -> Result<(), crate::BackendError> {
        match &self.trace {
            Some(t) if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) => {
                Err(crate::BackendError::Invalid {
                    field: "trace",
                    expected: "a W3C traceparent (printable ASCII, no spaces)".into(),
                    got: format!("{t:?}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// A job with default queue and attempts; `args` must be JSON text.
    pub fn new(kind: impl Into<String>, args: impl Into<String>) -> Self {
        JobSpec {
            kind: kind.into(),
            queue: Self::DEFAULT_QUEUE.to_string(),
            args: args.into(),
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            priority: 0,
            unique_key: None,
            not_before: None,
            unique_for: None,
            trace: None,
        }
    }

    /// On `queue` instead of the default one.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// At most `n` attempts; a backend refuses 0.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// At priority `p`: lower runs first, default 0.
    pub fn priority(mut self, p: i16) -> Self {
        self.priority = p;
        self
    }

    /// Enqueued at most once per run under `key`: a second enqueue returns the first job.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Enqueued at most once under `key` across runs within `window`: while a job
    /// enqueued with the key less than `window` ago has not failed or been cancelled, a
    /// second enqueue returns it (see [`unique`](crate::unique)).
    pub fn unique_for(mut self, key: impl Into<String>, window: Duration) -> Self {
        self.unique_key = Some(key.into());
        self.unique_for = Some(window);
        self
    }

    /// Not runnable before `at`.
    pub fn not_before(mut self, at: Timestamp) -> Self {
        self.not_before = Some(at);
        self
    }

    /// The trace context each step of a chain continues: its own, or else the nearest
    /// earlier step's. None when no step has one (the untraced case costs a scan of the
    /// steps, no allocation).
    pub fn chain_traces(steps: &[JobSpec]) -> Option<Vec<Option<&str>>> {
        if steps.iter().all(|s| s.trace.is_none()) {
            return None;
        }
        let mut last = None;
        Some(
            steps
                .iter()
                .map(|s| {
                    last = s.trace.as_deref().or(last);
                    last
                })
                .collect(),
        )
    }

    /// Its attempts' spans join the trace of `traceparent` (W3C trace context).
    pub fn trace(mut self, traceparent: impl Into<String>) -> Self {
        self.trace = Some(traceparent.into());
        self
    }
}

/// A unit of work as the caller thinks of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnqueueItem {
    /// One job on its own.
    Job(JobSpec),
    /// Step n+1 becomes available atomically with step n's success and receives its
    /// result as input. A failed or cancelled step cancels the steps after it.
    Chain(Vec<JobSpec>),
    /// Members run independently; `callback` becomes available exactly once, when all
    /// members have ended, with their outcomes as input.
    Group {
        /// Jobs run independently; may be empty (the callback is then runnable at once).
        members: Vec<JobSpec>,
        /// Gets a JSON array of [`MemberOutcome`](crate::MemberOutcome)s as input.
        callback: JobSpec,
    },
    /// `job` waits, pending, until `awaits` arrivals have been committed with
    /// [`Commit::arrive`](crate::Commit::arrive) naming it, then becomes available with
    /// `[]` as input; with `awaits` 0 it is available at once. A workflow's JOIN: each
    /// branch that ends arrives once, O(1), whatever the number of branches, and the
    /// branches need not exist when the gate is enqueued (a branch's last step is known
    /// only when it runs).
    Gate {
        /// Arrivals before it is released.
        awaits: u32,
        /// The job released.
        job: JobSpec,
    },
}

/// Items to enqueue into one run, in one transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnqueueRequest {
    /// The run the jobs join; created by its first enqueue.
    pub run: RunName,
    /// Enqueued all or none; one [`Enqueued`] each, in order.
    pub items: Vec<EnqueueItem>,
    /// A job enqueued (into the run `<run>/done`) each time the run finishes.
    #[serde(default)]
    pub on_done: Option<JobSpec>,
}

/// The result of enqueueing one item: the ids of its jobs in the order given (a
/// group's members, then its callback), or the existing job when a unique key matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    /// The item's jobs, in the order given.
    pub ids: Vec<JobId>,
    /// A unique key matched: nothing was added, `ids` are the existing jobs.
    pub existed: bool,
}

/// Ask for up to `max` jobs of `queue`, waiting at most `wait` when none are ready.
#[derive(Clone, Debug)]
pub struct ReserveRequest {
    /// The queue to take jobs from.
    pub queue: String,
    /// Most jobs to lease in this call.
    pub max: usize,
    /// How long each job is leased from now: unless heartbeated, it runs again after.
    pub lease: Duration,
    /// How long to wait for a job when none is ready; zero answers at once.
    pub wait: Duration,
}

/// Identifies one attempt of a job: a completion or heartbeat for an older attempt (a
/// worker that lost its lease) is refused, so it cannot overwrite the new attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseRef {
    /// The job leased.
    pub job: JobId,
    /// Which attempt holds it (1 for the first run of the job).
    pub attempt: u32,
}

/// A job leased to a worker for one attempt: what its handler needs to run it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservedJob {
    /// The job.
    pub id: JobId,
    /// The run it belongs to.
    pub run: RunName,
    /// Its task kind: which handler runs it.
    pub kind: String,
    /// The queue it was reserved from.
    pub queue: String,
    /// The handler's arguments, as JSON text.
    pub args: String,
    /// The previous chain step's result, or a group callback's member outcomes (JSON).
    pub input: Option<String>,
    /// 1 on the first attempt; a snooze does not count.
    pub attempt: u32,
    /// The attempts it may use; a retry on the last one fails the job.
    pub max_attempts: u32,
    /// When the lease expires unless heartbeated.
    pub lease_until: Timestamp,
    /// When the job last became runnable; latency is measured from here.
    pub available_at: Timestamp,
    /// The trace context its attempt's span continues (a W3C `traceparent`): what
    /// enqueued it, or the attempt of the chain step before it that handed it on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl ReservedJob {
    /// This attempt's lease: what its completion and heartbeats name.
    pub fn lease(&self) -> LeaseRef {
        LeaseRef {
            job: self.id,
            attempt: self.attempt,
        }
    }
}

/// What a worker reports for one attempt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// `result` is JSON text.
    Succeeded {
        /// The handler's result, handed to the next chain step or group callback.
        result: String,
    },
    /// As `Succeeded`, and the next chain step (if any) continues `trace` (the W3C
    /// `traceparent` of this attempt's span) instead of its own trace context, so its
    /// attempts are children of this one. Sent only by a worker that traces.
    SucceededTraced {
        /// The handler's result, as for `Succeeded`.
        result: String,
        /// This attempt's trace context.
        trace: String,
    },
    /// Run again at `at`; becomes `Failed` when the attempts are exhausted.
    Retry {
        /// Why the attempt failed, kept in the job's errors.
        error: String,
        /// When the job is runnable again.
        at: Timestamp,
    },
    /// Run again at `at`, the attempt is not counted.
    Snooze {
        /// When the job is runnable again.
        at: Timestamp,
    },
    /// The job is cancelled, and the chain steps after it.
    Cancelled {
        /// Why, kept as the job's error.
        reason: String,
    },
    /// The job fails for good, whatever attempts are left.
    Failed {
        /// Why, kept as the job's error.
        error: String,
    },
}

/// One attempt's result as handed to the backend: which attempt, and its resolution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The attempt reporting; refused (`Stale`) if it no longer holds the job.
    pub lease: LeaseRef,
    /// What became of the attempt.
    pub resolution: Resolution,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
/// The backend's answer to one [`Completion`].
pub enum CompletionAck {
    /// The resolution was applied, with what it releases (chain steps, group callbacks).
    Applied,
    /// The attempt no longer holds the job (lease expired and re-reserved, or
    /// cancelled): nothing was changed.
    Stale,
}

/// What a cancel call stops; only jobs that have not ended are touched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelTarget {
    /// One job.
    Job(JobId),
    /// The job and every later step of its chain.
    Chain(JobId),
    /// Every job of the run.
    Run(RunName),
}

/// One attempt's error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptError {
    /// Which attempt (1 for the first run of the job).
    pub attempt: u32,
    /// When its failure was recorded.
    pub at: Timestamp,
    /// What it failed with.
    pub error: String,
}

/// Everything known about one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job.
    pub id: JobId,
    /// The run it belongs to.
    pub run: RunName,
    /// Its task kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Where it is in its life.
    pub state: JobState,
    /// Attempts begun, 0 before the first; a snooze or release does not count.
    pub attempt: u32,
    /// The attempts it may use.
    pub max_attempts: u32,
    /// The handler's arguments, as JSON text.
    pub args: String,
    /// The previous chain step's result, or a group callback's member outcomes (JSON).
    pub input: Option<String>,
    /// Its handler's result (JSON), once it succeeded.
    pub result: Option<String>,
    /// The last error or the cancellation reason.
    pub error: Option<String>,
    /// Every failed attempt's error, oldest first.
    pub errors: Vec<AttemptError>,
    /// The key it was enqueued under, if any.
    pub unique_key: Option<String>,
    /// The next step of its chain, if any.
    pub next: Option<JobId>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it last became (or becomes) runnable.
    pub available_at: Timestamp,
    /// When its latest attempt was reserved.
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
    /// The trace context its attempts continue (see [`ReservedJob::trace`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_bounded() {
        let at_limit = JobSpec::new("k".repeat(JobSpec::MAX_KIND_LEN), "null")
            .queue("q".repeat(JobSpec::MAX_QUEUE_LEN))
            .unique_key("u".repeat(JobSpec::MAX_UNIQUE_KEY_LEN));
        assert_eq!(at_limit.check_lengths(), Ok(()));
        let over = |spec: JobSpec| spec.check_lengths().unwrap_err().to_string();
        assert_eq!(
            over(JobSpec::new("k".repeat(129), "null")),
            "kind: expected at most 128 bytes, got 129"
        );
        assert_eq!(
            over(JobSpec::new("k", "null").queue("q".repeat(1 << 20))),
            "queue: expected at most 128 bytes, got 1048576"
        );
        assert_eq!(
            over(JobSpec::new("k", "null").unique_key("u".repeat(513))),
            "unique_key: expected at most 512 bytes, got 513"
        );
    }
}
