use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a job is in its life. The transitions, in one place:
///
/// ```text
///  Pending ──(upstream succeeded / group ended)──▶ Available
///  Available ──reserve──▶ Running ──complete──▶ Succeeded
///                          │  ├──retry/snooze/lease expired──▶ Available (later)
///                          │  ├──discard / retries exhausted──▶ Failed
///                          │  └──cancel──────────────────────▶ Cancelled
///  Pending|Available|Running ──cancel──▶ Cancelled
///  Pending ──upstream failed or cancelled──▶ Cancelled (upstream)
///  Failed ──retry run──▶ Available;  Cancelled (upstream) ──retry run──▶ Pending
/// ```
///
/// `Succeeded`, `Failed` and `Cancelled` are terminal: every job ends in exactly one of
/// them. The numeric codes are stored by backends and must never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(
        description = "Where a job is in its life; `succeeded`, `failed` and `cancelled` are terminal."
    )
)]
pub enum JobState {
    /// Waiting for its chain predecessor or its group's members.
    Pending = 0,
    /// Queued: runnable at or after its `available_at`.
    Available = 1,
    /// Reserved by a worker under a lease.
    Running = 2,
    /// Its handler completed; the result is kept.
    Succeeded = 3,
    /// Discarded, or out of attempts; `retry_run` can revive it.
    Failed = 4,
    /// Cancelled by a caller or by its handler, or because an earlier step of its chain
    /// did not succeed.
    Cancelled = 5,
}

impl JobState {
    /// Every state, in code order (`ALL[code]` is the state of that code).
    pub const ALL: [JobState; 6] = [
        JobState::Pending,
        JobState::Available,
        JobState::Running,
        JobState::Succeeded,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The number backends store for this state; fixed forever.
    pub fn code(self) -> i64 {
        self as i64
    }

    /// The state stored as `code`; `None` for a number that is no state.
    pub fn from_code(code: i64) -> Option<JobState> {
        JobState::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// Succeeded, failed or cancelled: the job has ended (only `retry_run` brings some
    /// back).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled
        )
    }

    /// The snake_case name used on the wire, in URLs and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Available => "available",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in JobState::ALL {
            assert_eq!(JobState::from_code(s.code()), Some(s));
        }
        assert_eq!(JobState::from_code(6), None);
        assert_eq!(JobState::from_code(-1), None);
    }
}
