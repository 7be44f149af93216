//! Secrets (key-store and PDF owner passwords) come from the environment, never from
//! the command line, where any user of the machine can read them: `NAME` holds the
//! value, or `NAME_FILE` names a file holding it.

use anyhow::{bail, Context, Result};

/// The secret in `$name` or in the file named by `${name}_FILE`; None if neither is set.
pub fn from_env(name: &str) -> Result<Option<String>> {
    let file_var = format!("{name}_FILE");
    let direct = std::env::var(name).ok().filter(|v| !v.is_empty());
    let file = std::env::var(&file_var).ok().filter(|v| !v.is_empty());
    match (direct, file) {
        (Some(_), Some(_)) => bail!("set one of {name} and {file_var}, not both"),
        (Some(v), None) => Ok(Some(v)),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("{file_var} = {path}: cannot read the file"))?;
            let value = text.trim_end_matches(['\r', '\n']);
            if value.is_empty() {
                bail!("{file_var} = {path}: the file is empty");
            }
            Ok(Some(value.to_string()))
        }
        (None, None) => Ok(None),
    }
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
