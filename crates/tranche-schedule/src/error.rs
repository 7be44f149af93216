use std::path::PathBuf;

use tranche_types::BackendError;

/// A field of a declaration that is not what it must be.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{field}: expected {expected}, got {got}")]
pub struct Invalid {
    /// The field, as it is named in a schedule file.
    pub field: &'static str,
    /// What it must be.
    pub expected: String,
    /// What it was.
    pub got: String,
}

/// A schedule file that cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("{}: cannot read", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, or not of the shape of a schedule file.
    #[error("{}:{line}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line (from 1) the problem is on.
        line: usize,
        /// What the TOML reader said.
        message: String,
    },
    /// A field of one schedule is wrong.
    #[error("{}:{line}: schedule {name:?}: {invalid}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The line (from 1) of the field, or of its schedule.
        line: usize,
        /// The schedule (empty when its name is what is wrong).
        name: String,
        /// The field and what was wrong with it.
        invalid: Invalid,
    },
}

/// What can go wrong declaring, listing or firing schedules.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// A declaration is invalid.
    #[error("schedule {name:?}: {invalid}")]
    Invalid {
        /// The schedule.
        name: String,
        /// What is wrong.
        #[source]
        invalid: Invalid,
    },
    /// A stored schedule's declaration cannot be read back (written by a newer
    /// version, or edited by hand).
    #[error("schedule {name:?}: its stored declaration cannot be read")]
    Stored {
        /// The schedule.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
}
