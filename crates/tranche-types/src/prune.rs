use serde::{Deserialize, Serialize};

/// What one `prune` call removed: finished runs past their retention, with their jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pruned {
    /// Runs removed whole (their row or record, counters and jobs all gone).
    pub runs: u64,
    /// Jobs removed, including those of a run that is not yet gone whole: a large run
    /// is removed a batch of jobs at a time, the run last.
    pub jobs: u64,
    /// Records written ended ([`RecordWrite::ended`](crate::RecordWrite)) removed; a
    /// backend that forgets them by key expiry instead counts none.
    #[serde(default)]
    pub records: u64,
}

impl Pruned {
    /// Add another call's figures to these.
    pub fn add(&mut self, other: Pruned) {
        self.runs += other.runs;
        self.jobs += other.jobs;
        self.records += other.records;
    }
}
