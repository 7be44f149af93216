//! A demo's directory: new, empty, or a previous demo of the same command (replaced),
//! never a directory of the user's.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// Make `dir` ready for `command`'s demo (e.g. `tranche ach demo`), marked by the file
/// `marker` so that the next run may replace it.
pub fn prepare(dir: &Path, marker: &str, command: &str) -> Result<()> {
    if dir.exists() {
        if dir.join(marker).exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot clear the previous demo in {}", dir.display()))?;
        } else if std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
        {
            bail!(
                "{} exists and was not made by `{command}`: pass --dir with a new or empty directory",
                dir.display()
            );
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join(marker), format!("made by {command}\n"))
        .with_context(|| format!("cannot write in {}", dir.display()))
}
