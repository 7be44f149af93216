use serde::{Deserialize, Serialize};

use crate::{JobId, RunName, Timestamp};

/// A run's counters, kept up to date with every state change so reading them is O(1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunProgress {
    pub run: Option<RunName>,
    pub total: u64,
    pub pending: u64,
    pub available: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
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

    pub fn ended(&self) -> u64 {
        self.succeeded + self.failed + self.cancelled
    }

    pub fn is_finished(&self) -> bool {
        self.total > 0 && self.ended() == self.total
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobFailure {
    pub id: JobId,
    pub kind: String,
    pub attempt: u32,
    pub error: String,
    pub finished_at: Option<Timestamp>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockClaim {
    Claimed,
    /// Nothing was claimed: `key` is held by `owner`.
    Conflict {
        key: String,
        owner: String,
    },
}

/// A recorded side effect: proof that e.g. an e-mail was sent, and its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    pub key: String,
    pub job: Option<JobId>,
    pub value: String,
    pub at: Timestamp,
}

/// One member's ending, as handed to a group's callback (its input is a JSON array of
/// these, in member order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberOutcome {
    pub job: JobId,
    pub state: crate::JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
