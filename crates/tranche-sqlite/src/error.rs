//! This crate's own failures, kept as values so a [`BackendError`] holds its cause.
//!
//! [`BackendError`]: tranche_types::BackendError

use std::path::PathBuf;

type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A failure about a file or directory, naming it: the operator must know which.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct AtPath {
    pub path: PathBuf,
    #[source]
    pub source: Cause,
}

impl AtPath {
    pub fn new(path: impl Into<PathBuf>, source: impl Into<Cause>) -> Self {
        AtPath {
            path: path.into(),
            source: source.into(),
        }
    }
}

/// The transaction was already rolled back by SQLite when an operation wanted to
/// open a savepoint in it.
#[derive(Debug, thiserror::Error)]
#[error("rolled back by SQLite after an error")]
pub struct RolledBack;

/// A `state` column holds a number that is no [`JobState`](tranche_types::JobState).
#[derive(Debug, thiserror::Error)]
#[error("unknown job state code {0}")]
pub struct UnknownState(pub i64);

/// Leasing a batch changed another number of rows than the batch read: something
/// else wrote inside the writer's transaction.
#[derive(Debug, thiserror::Error)]
#[error("expected to lease {expected} jobs, leased {leased}")]
pub struct LeaseMismatch {
    pub expected: usize,
    pub leased: usize,
}
