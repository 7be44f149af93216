//! Listing jobs one page at a time, by run, state, queue and kind.

use serde::{Deserialize, Serialize};

use crate::{JobId, JobState, RunName, Timestamp};

/// Which jobs a listing keeps: every field set must match (they combine with AND);
/// an empty filter keeps every job.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFilter {
    /// Only the jobs of this run.
    #[serde(default)]
    pub run: Option<RunName>,
    /// Only the jobs in this state.
    #[serde(default)]
    pub state: Option<JobState>,
    /// Only the jobs of this queue.
    #[serde(default)]
    pub queue: Option<String>,
    /// Only the jobs of this task kind.
    #[serde(default)]
    pub kind: Option<String>,
}

impl JobFilter {
    /// Whether `job` passes every field set.
    pub fn matches(&self, job: &JobSummary) -> bool {
        self.run.as_ref().is_none_or(|r| *r == job.run)
            && self.state.is_none_or(|s| s == job.state)
            && self.queue.as_ref().is_none_or(|q| *q == job.queue)
            && self.kind.as_ref().is_none_or(|k| *k == job.kind)
    }
}

/// One job as a listing shows it: what an operator scans a table for, without its
/// arguments and results (read those with the job's own record).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobSummary {
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
    /// Attempts begun, 0 before the first.
    pub attempt: u32,
    /// The attempts it may use.
    pub max_attempts: u32,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it ended.
    pub finished_at: Option<Timestamp>,
    /// The last error or the cancellation reason.
    pub error: Option<String>,
}

/// One page of a listing, in id order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPage {
    /// The jobs found, ids increasing. May hold fewer than asked for even when more
    /// follow: a backend bounds the work of one call.
    pub jobs: Vec<JobSummary>,
    /// Where the next page starts (its `after`); `None` after the last page.
    pub next: Option<JobId>,
}
