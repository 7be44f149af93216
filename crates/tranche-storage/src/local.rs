use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::{free_space, is_full, Storage, StorageError, StoreKey};

/// A store in a local directory: one file per key. Writes go to a temporary file that
/// is renamed into place, so a reader (or a crash) never sees half an object.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// A store under `root`; the directory is made (owner-only) on the first write.
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { root: root.into() }
    }

    fn path(&self, key: &StoreKey) -> PathBuf {
        self.root.join(key.as_str())
    }

    /// A failed write of `bytes`: a full disk is told apart, naming the store's root.
    fn failed(
        &self,
        op: &'static str,
        key: &StoreKey,
        bytes: usize,
        e: std::io::Error,
    ) -> StorageError {
        if is_full(&e) {
            return StorageError::Full {
                op,
                key: key.to_string(),
                location: self.root.display().to_string(),
                bytes: bytes as u64,
                source: e,
            };
        }
        io(op, key, e)
    }
}

/// Write `bytes` to `tmp` owner-only and rename it to `path`; what failed, and how.
fn write_file(path: &Path, tmp: &Path, bytes: &[u8]) -> Result<(), (&'static str, std::io::Error)> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        // Notes hold personal data: nobody but the store's owner may list or read.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| ("create directory for", e))?;
    }
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written {
        // Half a write on a full disk holds space nothing will ever free.
        let _ = std::fs::remove_file(tmp);
        return Err(("write", e));
    }
    if let Err(e) = std::fs::rename(tmp, path) {
        let _ = std::fs::remove_file(tmp);
        return Err(("rename into place", e));
    }
    Ok(())
}

fn io(op: &'static str, key: &StoreKey, e: std::io::Error) -> StorageError {
    if e.kind() == std::io::ErrorKind::NotFound && op == "read" {
        return StorageError::NotFound {
            key: key.to_string(),
        };
    }
    StorageError::Io {
        op,
        key: key.to_string(),
        source: Box::new(e),
    }
}

#[async_trait]
impl Storage for LocalStore {
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError> {
        let path = self.path(key);
        // Unique per write, so concurrent writers of one key never share a temporary.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        let len = bytes.len();
        // One blocking task for the whole write: through tokio::fs each of the four
        // calls would be a thread hand-off of its own (measured: ~1 ms of system time
        // per note more).
        let written = tokio::task::spawn_blocking(move || write_file(&path, &tmp, &bytes))
            .await
            .map_err(|e| io("write", key, std::io::Error::other(e)))?;
        written.map_err(|(op, e)| self.failed(op, key, len, e))
    }

    async fn get(&self, key: &StoreKey) -> Result<Vec<u8>, StorageError> {
        tokio::fs::read(self.path(key))
            .await
            .map_err(|e| io("read", key, e))
    }

    async fn exists(&self, key: &StoreKey) -> Result<bool, StorageError> {
        tokio::fs::try_exists(self.path(key))
            .await
            .map_err(|e| io("check", key, e))
    }

    async fn delete(&self, key: &StoreKey) -> Result<(), StorageError> {
        match tokio::fs::remove_file(self.path(key)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("delete", key, e)),
            _ => Ok(()),
        }
    }

    fn locate(&self, key: &StoreKey) -> String {
        self.path(key).display().to_string()
    }

    fn free_space(&self) -> Option<u64> {
        free_space(&self.root)
    }
}
