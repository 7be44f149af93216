//! The run file: how a core in one process tells clients in another what it is
//! generating (seed and book) and, at the end, how many events each shard sent, from
//! which the clients replay the final state.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::book::BookConfig;
use crate::check::Expected;

/// The run file's format version (2: `shards` apart from `targets`, which may be
/// one server of several shards).
pub const RUN_FILE_VERSION: u32 = 2;

/// What a core publishes about its run (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunFile {
    /// [`RUN_FILE_VERSION`].
    pub version: u32,
    /// When the core started (ns since the epoch): tells one run from another.
    pub started_at: u64,
    /// The run's seed.
    pub seed: u64,
    /// The book's shape.
    pub book: BookConfig,
    /// Shards: cores, each with its own `seq` and `rec`.
    pub shards: usize,
    /// The servers written to: one holding every shard, or one per shard in shard
    /// order ([`crate::Layout`]).
    pub targets: Vec<String>,
    /// Events per second asked, all shards.
    pub rate: f64,
    /// Where the run stands.
    pub state: RunState,
}

/// Where a run stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum RunState {
    /// Generating.
    Running,
    /// Done: every shard's events were all acknowledged.
    Finished {
        /// Events per shard.
        events: Vec<u64>,
    },
    /// Stopped by an error: the final state is not known.
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// A run file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    /// The file system.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Not a run file of this version.
    #[error("{path}: not a run file: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
}

impl RunFile {
    /// Writes the file whole: under a temporary name, then renamed over `path`, so a
    /// reader never sees half of it.
    pub fn write(&self, path: &Path) -> Result<(), RunFileError> {
        let io = |source| RunFileError::Io {
            path: path.to_owned(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let text = serde_json::to_vec_pretty(self).expect("a run file serialises");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// Reads the file; `None` if it does not exist (yet).
    pub fn read(path: &Path) -> Result<Option<RunFile>, RunFileError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(RunFileError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let file: RunFile = serde_json::from_slice(&bytes).map_err(|e| RunFileError::Format {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if file.version != RUN_FILE_VERSION {
            return Err(RunFileError::Format {
                path: path.to_owned(),
                message: format!("expected version {RUN_FILE_VERSION}, got {}", file.version),
            });
        }
        Ok(Some(file))
    }

    /// The final state, replayed, if the run finished.
    pub fn expected(&self) -> Option<Expected> {
        match &self.state {
            RunState::Finished { events } => Some(Expected::replay(&self.book, self.seed, events)),
            _ => None,
        }
    }
}
