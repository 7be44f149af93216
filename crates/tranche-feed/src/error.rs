//! Errors of opening and writing a store.

use std::io;
use std::path::PathBuf;

use crate::validate::BatchError;

/// A failure of the store's files.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("could not {action} {path}")]
    Io {
        /// What was being done ("append to", "sync", …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A log segment or snapshot is damaged somewhere a crash cannot explain (a torn
    /// tail of the last log segment is not this: it is cut off on open).
    #[error("{path} is corrupt at byte offset {offset}: {problem}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Where the damaged record (or the snapshot's checksum) starts.
        offset: u64,
        /// What was expected and what was found.
        problem: String,
    },
    /// Another writer (in this or another process) has the store open.
    #[error("{path} is locked by another writer of this store")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// An append failed and the partial record could not be cut off: the writer
    /// refuses every further write; reopen the store (which drops the partial record).
    #[error("the log {path} has a partial record that could not be removed; reopen the store")]
    Poisoned {
        /// The log segment.
        path: PathBuf,
        /// The error of the failed append.
        #[source]
        source: io::Error,
    },
    /// A feed's directories do not hold the shards asked for (more shards on disk
    /// than opened, a gap in their numbers, too many).
    #[error("{path}: {problem}")]
    Layout {
        /// The feed's directory.
        path: PathBuf,
        /// What was expected and what was found.
        problem: String,
    },
    /// An eviction floor that is behind the current one or ahead of the newest change.
    #[error("expected an eviction floor from {current} to {newest}, got {requested}")]
    Floor {
        /// The floor asked for.
        requested: crate::Cursor,
        /// The current floor.
        current: crate::Cursor,
        /// The newest position in the store.
        newest: crate::Cursor,
    },
}

/// Why a batch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// An event is invalid: nothing of the batch was applied.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// The log could not be written: nothing of the batch was applied.
    #[error(transparent)]
    Store(#[from] StoreError),
}
