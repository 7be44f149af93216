//! A pass's manifest: the files it wrote, with what each holds, kept in the store
//! beside them (`{d}-ach-manifest/DATE/<bank>-<window>-<pass>.json`).

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

use crate::tasks::WrittenFile;

/// What one pass wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The pass (its plan job's id).
    pub pass: i64,
    /// The bank.
    pub bank: String,
    /// The window.
    pub window: String,
    /// The submission date.
    pub date: NaiveDate,
    /// When the pass acted (the files' creation time).
    pub at: DateTime<Utc>,
    /// The files, in the pass's order.
    pub files: Vec<ManifestFile>,
    /// Writers that failed for good: their entries wait for a later pass.
    pub failed_writers: u64,
}

/// One file of a manifest.
pub type ManifestFile = WrittenFile;

impl Manifest {
    /// Entries in all the files.
    pub fn entries(&self) -> u64 {
        self.files.iter().map(|f| f.entries).sum()
    }
}
