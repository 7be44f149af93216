use serde::{Deserialize, Serialize};

use crate::{JobId, JobState, RunName, Timestamp};

/// One job state change in a backend's change feed. `seq` increases strictly in commit
/// order: a reader that has seen `seq` n has seen every event below n.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobEvent {
    /// Position in the feed; page with `events(after = the last seq seen)`.
    pub seq: u64,
    /// When the change was committed.
    pub at: Timestamp,
    /// The job that changed.
    pub job: JobId,
    /// The run the job belongs to.
    pub run: RunName,
    /// The state the job moved to (`Available` or `Pending` for a new job).
    pub state: JobState,
}

/// How many jobs of one queue are waiting (available, now or scheduled) and running.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueDepth {
    /// The queue's name.
    pub queue: String,
    /// Jobs waiting: runnable now or scheduled for later.
    pub available: u64,
    /// Jobs leased to a worker.
    pub running: u64,
}
