//! Secrets (key-store and PDF owner passwords) come from the environment, never from
//! the command line, where any user of the machine can read them: `NAME` holds the
//! value, or `NAME_FILE` names a file holding it.

use anyhow::{Context, Result};

/// The secret in `$name` or in the file named by `${name}_FILE` (which must be private
/// to its owner); None if neither is set.
pub fn from_env(name: &str) -> Result<Option<String>> {
    Ok(tranche_types::secret::from_env(name)?)
}

/// Write `value` to `path` readable by its owner only, atomically.
pub fn write_private(path: &std::path::Path, value: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    // A temporary file is created with mode 0600 and keeps it when renamed.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    std::io::Write::write_all(&mut tmp, value.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
