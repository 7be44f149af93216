use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tranche_core::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::RunName;

/// Open the embedded state in `dir`, creating it.
pub fn open(dir: &Path) -> Result<Arc<dyn Backend>> {
    open_with(dir, SqliteOptions::default())
}

pub fn open_with(dir: &Path, options: SqliteOptions) -> Result<Arc<dyn Backend>> {
    let backend = SqliteBackend::open(dir, options)
        .with_context(|| format!("could not open Tranche data in {}", dir.display()))?;
    Ok(Arc::new(backend))
}

/// Open state that must already exist: commands that only inspect or steer must not
/// create an empty database by mistake (a typo in --data).
pub fn open_existing(dir: &Path) -> Result<Arc<dyn Backend>> {
    let file = dir.join(SqliteBackend::FILE_NAME);
    if !file.exists() {
        bail!(
            "no Tranche data in {} (expected {}): pass --data DIR or set TRANCHE_DATA to where your runs are",
            dir.display(),
            file.display()
        );
    }
    open(dir)
}

pub fn run_name(name: &str) -> Result<RunName> {
    RunName::new(name).map_err(|e| anyhow::anyhow!("{e}"))
}
