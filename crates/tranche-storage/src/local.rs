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
    pub fn new(root: impl Into<PathBuf>) -> LocalStore {
        LocalStore { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
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

fn io(op: &'static str, key: &StoreKey, e: std::io::Error) -> StorageError {
    if e.kind() == std::io::ErrorKind::NotFound && op == "read" {
        return StorageError::NotFound {
            key: key.to_string(),
        };
    }
    StorageError::Io {
        op,
        key: key.to_string(),
        message: e.to_string(),
    }
}

#[async_trait]
impl Storage for LocalStore {
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError> {
        let path = self.path(key);
        if let Some(dir) = path.parent() {
            // Notes hold personal data: nobody but the store's owner may list or read.
            let mut create = tokio::fs::DirBuilder::new();
            create.recursive(true).mode(0o700);
            create
                .create(dir)
                .await
                .map_err(|e| self.failed("create directory for", key, bytes.len(), e))?;
        }
        // Unique per write, so concurrent writers of one key never share a temporary.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp-{}-{n}", std::process::id()));
        let written = async {
            let mut f = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .await?;
            tokio::io::AsyncWriteExt::write_all(&mut f, &bytes).await?;
            tokio::io::AsyncWriteExt::flush(&mut f).await
        };
        if let Err(e) = written.await {
            // Half a write on a full disk holds space nothing will ever free.
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(self.failed("write", key, bytes.len(), e));
        }
        if let Err(e) = tokio::fs::rename(&tmp, &path).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(self.failed("rename into place", key, bytes.len(), e));
        }
        Ok(())
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
