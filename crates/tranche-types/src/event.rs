use serde::{Deserialize, Serialize};

use crate::{JobId, JobState, RunName, Timestamp};

/// One job state change in a backend's change feed. `seq` increases strictly in commit
/// order: a reader that has seen `seq` n has seen every event below n.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobEvent {
    pub seq: u64,
    /// When the change was committed.
    pub at: Timestamp,
    pub job: JobId,
    pub run: RunName,
    /// The state the job moved to (`Available` or `Pending` for a new job).
    pub state: JobState,
}

/// How many jobs of one queue are waiting (available, now or scheduled) and running.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDepth {
    pub queue: String,
    pub available: u64,
    pub running: u64,
}
