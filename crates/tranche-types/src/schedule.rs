use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// A schedule as a backend keeps it. Backends never interpret `timing` or `spec`
/// (tranche-schedule does): they store them, compare `timing` on a re-declaration,
/// and move `through` forward atomically as due times are fired.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSchedule {
    /// Unique among schedules.
    pub name: String,
    /// What decides the due times (the cron expression and zone, or the one-off time),
    /// normalised: a re-declaration with the same timing keeps `through`.
    pub timing: String,
    /// The whole declaration as JSON text (the job, whether missed times are skipped).
    pub spec: String,
    /// Every due time up to and including this one has been handled (fired or
    /// skipped): no later claim for it or an earlier one wins.
    pub through: Timestamp,
    /// The latest due time that enqueued a job, if any did.
    pub last_fired: Option<Timestamp>,
}

/// A schedule as declared to the backend: its `timing` (how due times are counted),
/// its `spec` (what each due time enqueues) and the instant its due times count from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleWrite<'a> {
    /// The schedule's name.
    pub name: &'a str,
    /// How its due times are counted, as stored.
    pub timing: &'a str,
    /// What each due time enqueues, as stored.
    pub spec: &'a str,
    /// Due times at or before this are not fired (for a new schedule or a new timing).
    pub through: Timestamp,
}
