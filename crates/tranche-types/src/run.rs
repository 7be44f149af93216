use serde::{Deserialize, Serialize};

use crate::{JobId, RunName, Timestamp};

/// A run's counters, kept up to date with every state change so reading them is O(1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunProgress {
    /// The run counted; set whenever a backend reads it (`None` in a `Default` value).
    pub run: Option<RunName>,
    /// Jobs ever enqueued into the run; each is in exactly one of the states below.
    pub total: u64,
    /// Jobs in [`JobState::Pending`](crate::JobState::Pending).
    pub pending: u64,
    /// Jobs in [`JobState::Available`](crate::JobState::Available).
    pub available: u64,
    /// Jobs in [`JobState::Running`](crate::JobState::Running).
    pub running: u64,
    /// Jobs in [`JobState::Succeeded`](crate::JobState::Succeeded).
    pub succeeded: u64,
    /// Jobs in [`JobState::Failed`](crate::JobState::Failed).
    pub failed: u64,
    /// Jobs in [`JobState::Cancelled`](crate::JobState::Cancelled).
    pub cancelled: u64,
    /// When the run was created, by its first enqueue.
    pub created_at: Option<Timestamp>,
    /// Set when the run last finished (no job left to run); cleared by a retry.
    pub finished_at: Option<Timestamp>,
    /// How many times the run has finished (a retry can make it finish again).
    pub finishes: u32,
}

impl RunProgress {
    /// Not yet started or still runnable: pending + available.
    pub fn queued(&self) -> u64 {
        self.pending + self.available
    }

    /// Jobs in a terminal state: succeeded + failed + cancelled.
    pub fn ended(&self) -> u64 {
        self.succeeded + self.failed + self.cancelled
    }

    /// Every job has ended (and there is at least one): nothing left to run.
    pub fn is_finished(&self) -> bool {
        self.total > 0 && self.ended() == self.total
    }
}

/// One failed job of a run, as listed for an operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobFailure {
    /// The failed job.
    pub id: JobId,
    /// Its task kind.
    pub kind: String,
    /// The attempt that failed last (1 for the first run of the job).
    pub attempt: u32,
    /// That attempt's error.
    pub error: String,
    /// When the job failed.
    pub finished_at: Option<Timestamp>,
}

/// The answer to claiming a set of locks, all or none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockClaim {
    /// Every key is now held by the caller.
    Claimed,
    /// Nothing was claimed: `key` is held by `owner`.
    Conflict {
        /// The first key found held by someone else.
        key: String,
        /// Who holds it (for jobs, `job:<id>:<attempt>`).
        owner: String,
    },
}

/// A recorded side effect: proof that e.g. an e-mail was sent, and its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The idempotency key the effect was recorded under, chosen by the caller.
    pub key: String,
    /// The job whose attempt recorded it, if a job did.
    pub job: Option<JobId>,
    /// The proof, e.g. the Message-ID of the e-mail sent.
    pub value: String,
    /// When it was recorded.
    pub at: Timestamp,
}

/// One member's ending, as handed to a group's callback (its input is a JSON array of
/// these, in member order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberOutcome {
    /// The member job.
    pub job: JobId,
    /// How it ended: succeeded, failed or cancelled.
    pub state: crate::JobState,
    /// Its result, when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    /// Its last error or cancellation reason, when it did not succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a backend's `claim_locks` asks: every key
/// of `keys` for `owner` until now + `ttl`, or none of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockRequest<'a> {
    /// Who holds the keys (a plan attempt, a worker's job).
    pub owner: &'a str,
    /// The keys, all or none.
    pub keys: &'a [String],
    /// How long the claim holds unless claimed again.
    pub ttl: std::time::Duration,
}

/// An effect to record once: `value` under `key`, said to be `job`'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EffectRecord<'a> {
    /// The idempotency key.
    pub key: &'a str,
    /// The job that had the effect, if one did.
    pub job: Option<JobId>,
    /// What the effect was (kept for whoever asks again).
    pub value: &'a str,
}
