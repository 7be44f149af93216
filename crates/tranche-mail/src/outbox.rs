use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;

use crate::{message, Mail, MailError, Mailer, Reason, Sent};

/// Mail written to a directory instead of sent: one `<message id>.eml` per message,
/// for runs with no SMTP server. A file appears whole or not at all (written to a
/// temporary, synced, renamed), and sending the same message again replaces its file.
#[derive(Debug)]
pub struct OutboxMailer {
    dir: PathBuf,
    writes: AtomicU64,
}

impl OutboxMailer {
    /// An outbox in `dir`, created if missing.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        // Each message shows its client's address: owner-only, like the files.
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(&dir)?;
        Ok(OutboxMailer {
            dir,
            writes: AtomicU64::new(0),
        })
    }

    /// Where the message with this id is (or would be) written: the id with every
    /// character outside `[A-Za-z0-9._-]` replaced by `_`, plus `.eml`.
    pub fn path_for(&self, message_id: &str) -> PathBuf {
        let name: String = message_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{name}.eml"))
    }
}

#[async_trait]
impl Mailer for OutboxMailer {
    async fn send(&self, mail: &Mail) -> Result<Sent, MailError> {
        let bytes = message::build_message(mail)?;
        let path = self.path_for(&mail.message_id);
        // Unique per write, so two sends of one id never share a temporary; the dot
        // keeps it out of `*.eml` globs.
        let n = self.writes.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!(".outbox-{}-{n}.tmp", std::process::id()));
        let target = path.clone();
        tokio::task::spawn_blocking(move || write_atomically(&tmp, &target, &bytes))
            .await
            .map_err(|e| MailError::Temporary(Reason::because("the outbox writer stopped", e)))?
            .map_err(|e| outbox_error(&self.dir, e))?;
        Ok(Sent {
            message_id: mail.message_id.clone(),
            reply: path.display().to_string(),
        })
    }
}

/// A full disk is `Full` (wait for space); any other write failure is `Temporary`.
fn outbox_error(dir: &Path, e: std::io::Error) -> MailError {
    let full = matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    );
    let reason = Reason::because(format!("writing to the outbox {}", dir.display()), e);
    if full {
        MailError::Full(reason)
    } else {
        MailError::Temporary(reason)
    }
}

fn write_atomically(tmp: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let result = (|| {
        let mut f = std::os::unix::fs::OpenOptionsExt::mode(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true),
            0o600,
        )
        .open(tmp)?;
        f.write_all(bytes)?;
        // The file is the delivery proof of an outbox run: on disk before it counts.
        f.sync_all()?;
        std::fs::rename(tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_apart_from_other_write_failures() {
        let dir = Path::new("/outbox");
        let enospc = std::io::Error::from_raw_os_error(28);
        assert!(matches!(outbox_error(dir, enospc), MailError::Full(_)));
        let edquot = std::io::Error::from_raw_os_error(122);
        assert!(matches!(outbox_error(dir, edquot), MailError::Full(_)));
        let denied = std::io::Error::from_raw_os_error(13);
        assert!(matches!(outbox_error(dir, denied), MailError::Temporary(_)));
    }
}
