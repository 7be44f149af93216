//! Where a bench keeps what it makes: the directory a user named (kept), or a fresh
//! temporary one removed when the bench ends; and the stamp that names its runs and
//! its Redis prefix, so nothing of an earlier bench is in the way.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct StateDir {
    path: PathBuf,
    /// Removes the directory when dropped; none for a kept one.
    _temp: Option<tempfile::TempDir>,
}

impl StateDir {
    /// `keep`, or else a fresh temporary directory named after the bench.
    pub fn new(keep: Option<&Path>, bench: &str) -> Result<StateDir> {
        if let Some(path) = keep {
            return Ok(StateDir {
                path: path.to_path_buf(),
                _temp: None,
            });
        }
        let temp = tempfile::Builder::new()
            .prefix(&format!("tranche-bench-{bench}-"))
            .tempdir()
            .context("could not create a temporary directory")?;
        Ok(StateDir {
            path: temp.path().to_path_buf(),
            _temp: Some(temp),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Seconds since the Unix epoch.
pub fn stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}
