use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{JobId, JobState, RunName, Timestamp, TooLong};

/// One job to enqueue. `args` is JSON text, serialised once by the caller and handed to
/// the handler untouched, so backends never parse it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The task kind: a stable string chosen by the task's author, not a Rust type name.
    pub kind: String,
    pub queue: String,
    pub args: String,
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
}

impl JobSpec {
    pub const DEFAULT_QUEUE: &'static str = "default";
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
    /// Longest task kind, in bytes. Kinds and queues are metric labels, index keys and
    /// Redis key parts: a bound keeps one careless caller from bloating all of them.
    pub const MAX_KIND_LEN: usize = 128;
    /// Longest queue name, in bytes.
    pub const MAX_QUEUE_LEN: usize = 128;
    /// Longest unique key, in bytes: room for a composite of several ids.
    pub const MAX_UNIQUE_KEY_LEN: usize = 512;

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
        ];
        match fields.into_iter().find(|(_, got, max)| got > max) {
            Some((field, got, max)) => Err(TooLong { field, max, got }),
            None => Ok(()),
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
        }
    }

    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    pub fn priority(mut self, p: i16) -> Self {
        self.priority = p;
        self
    }

    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    pub fn not_before(mut self, at: Timestamp) -> Self {
        self.not_before = Some(at);
        self
    }
}

/// A unit of work as the caller thinks of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnqueueItem {
    Job(JobSpec),
    /// Step n+1 becomes available atomically with step n's success and receives its
    /// result as input. A failed or cancelled step cancels the steps after it.
    Chain(Vec<JobSpec>),
    /// Members run independently; `callback` becomes available exactly once, when all
    /// members have ended, with their outcomes as input.
    Group {
        members: Vec<JobSpec>,
        callback: JobSpec,
    },
}

/// Items to enqueue into one run, in one transaction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnqueueRequest {
    pub run: RunName,
    pub items: Vec<EnqueueItem>,
    /// A job enqueued (into the run `<run>/done`) each time the run finishes.
    #[serde(default)]
    pub on_done: Option<JobSpec>,
}

/// The result of enqueueing one item: the ids of its jobs in the order given (a
/// group's members, then its callback), or the existing job when a unique key matched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    pub ids: Vec<JobId>,
    pub existed: bool,
}

/// Ask for up to `max` jobs of `queue`, waiting at most `wait` when none are ready.
#[derive(Clone, Debug)]
pub struct ReserveRequest {
    pub queue: String,
    pub max: usize,
    pub lease: Duration,
    pub wait: Duration,
}

/// Identifies one attempt of a job: a completion or heartbeat for an older attempt (a
/// worker that lost its lease) is refused, so it cannot overwrite the new attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseRef {
    pub job: JobId,
    pub attempt: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReservedJob {
    pub id: JobId,
    pub run: RunName,
    pub kind: String,
    pub queue: String,
    pub args: String,
    /// The previous chain step's result, or a group callback's member outcomes (JSON).
    pub input: Option<String>,
    /// 1 on the first attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    pub lease_until: Timestamp,
    /// When the job last became runnable; latency is measured from here.
    pub available_at: Timestamp,
}

impl ReservedJob {
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
        result: String,
    },
    /// Run again at `at`; becomes `Failed` when the attempts are exhausted.
    Retry {
        error: String,
        at: Timestamp,
    },
    /// Run again at `at`, the attempt is not counted.
    Snooze {
        at: Timestamp,
    },
    Cancelled {
        reason: String,
    },
    Failed {
        error: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub lease: LeaseRef,
    pub resolution: Resolution,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CompletionAck {
    Applied,
    /// The attempt no longer holds the job (lease expired and re-reserved, or
    /// cancelled): nothing was changed.
    Stale,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelTarget {
    Job(JobId),
    /// The job and every later step of its chain.
    Chain(JobId),
    Run(RunName),
}

/// One attempt's error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptError {
    pub attempt: u32,
    pub at: Timestamp,
    pub error: String,
}

/// Everything known about one job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: JobId,
    pub run: RunName,
    pub kind: String,
    pub queue: String,
    pub state: JobState,
    pub attempt: u32,
    pub max_attempts: u32,
    pub args: String,
    pub input: Option<String>,
    pub result: Option<String>,
    /// The last error or the cancellation reason.
    pub error: Option<String>,
    pub errors: Vec<AttemptError>,
    pub unique_key: Option<String>,
    pub next: Option<JobId>,
    pub created_at: Timestamp,
    pub available_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
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
