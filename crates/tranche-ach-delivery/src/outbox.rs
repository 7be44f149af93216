//! Files delivered into a local directory, for a bank's own transfer agent to collect
//! (or for runs with no bank).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use crate::protocol::{self, Store};
use crate::{name, Delivery, DeliveryError};

/// A directory the files are delivered into, created if missing (mode 0700, files
/// 0600: payment files hold account numbers). An existing directory keeps its mode: a
/// transfer agent running as another user of a group may need to read it.
///
/// Files appear by a hard link from their temporary, which fails when the name exists,
/// so the directory must be on a filesystem with hard links (any Unix one).
#[derive(Debug, Clone)]
pub struct Outbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Absolute, so the location names it whatever the working directory.
    dir: PathBuf,
    location: String,
}

impl Outbox {
    /// An outbox in `dir`, created (with its parents) if missing. Blocks on the
    /// filesystem: call it at start-up, or from `spawn_blocking`.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Outbox, DeliveryError> {
        let dir = dir.into();
        let fail = |doing: &str, e| DeliveryError::io(&location(&dir), doing.to_string(), e);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| fail("creating the outbox directory", e))?;
        let dir = std::fs::canonicalize(&dir)
            .map_err(|e| fail("finding the outbox directory's absolute path", e))?;
        Ok(Outbox {
            inner: Arc::new(Inner {
                location: location(&dir),
                dir,
            }),
        })
    }

    /// The directory, absolute.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Run `f` on the directory off the async runtime's threads.
    async fn blocking<T: Send + 'static>(
        &self,
        doing: String,
        f: impl FnOnce(&Path) -> io::Result<T> + Send + 'static,
    ) -> Result<T, DeliveryError> {
        let inner = self.inner.clone();
        match tokio::task::spawn_blocking(move || f(&inner.dir)).await {
            Ok(result) => result.map_err(|e| DeliveryError::io(&self.inner.location, doing, e)),
            Err(e) => Err(DeliveryError::Failed {
                location: self.inner.location.clone(),
                doing,
                transient: true,
                source: e.into(),
            }),
        }
    }
}

fn location(dir: &Path) -> String {
    format!("outbox:{}", dir.display())
}

#[async_trait]
impl Delivery for Outbox {
    async fn deliver(&self, name: &str, bytes: &[u8]) -> Result<(), DeliveryError> {
        name::check(name)?;
        protocol::deliver(self, name, bytes).await
    }

    async fn find(&self, name: &str) -> Result<Option<String>, DeliveryError> {
        name::check(name)?;
        self.hash(name).await
    }

    fn location(&self) -> String {
        self.inner.location.clone()
    }

    fn free_space(&self) -> Option<u64> {
        tranche_storage::free_space(&self.inner.dir)
    }
}

#[async_trait]
impl Store for Outbox {
    fn location(&self) -> String {
        self.inner.location.clone()
    }

    async fn hash(&self, name: &str) -> Result<Option<String>, DeliveryError> {
        let fail = |e| DeliveryError::io(&self.inner.location, format!("reading {name}"), e);
        let file = match tokio::fs::File::open(self.inner.dir.join(name)).await {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e)),
        };
        crate::sha256_hex_of(file).await.map(Some).map_err(fail)
    }

    async fn write_temporary(&self, temp: &str, bytes: &[u8]) -> Result<(), DeliveryError> {
        let (file, bytes) = (temp.to_string(), bytes.to_vec());
        self.blocking(format!("writing {temp}"), move |dir| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dir.join(file))?;
            f.write_all(&bytes)?;
            // On disk before it gets its name: a power cut must not leave a named file
            // with a hole in it.
            f.sync_all()
        })
        .await
    }

    async fn publish(&self, temp: &str, name: &str) -> Result<bool, DeliveryError> {
        let (temp, name) = (temp.to_string(), name.to_string());
        self.blocking(format!("renaming {temp} to {name}"), move |dir| {
            // A hard link, unlike rename(2), fails when the name exists: no overwrite
            // even when two deliveries race for one name.
            match std::fs::hard_link(dir.join(&temp), dir.join(&name)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
                Err(e) => return Err(e),
            }
            // Delivered now; a temporary that will not go is only a leftover.
            if let Err(e) = std::fs::remove_file(dir.join(&temp)) {
                tracing::warn!(temp, error = %e, "a temporary file was left");
            }
            // The new name is durable once the directory is.
            File::open(dir)?.sync_all()?;
            Ok(true)
        })
        .await
    }

    async fn discard(&self, temp: &str) {
        let path = self.inner.dir.join(temp);
        if let Err(e) = tokio::fs::remove_file(&path).await {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "a temporary file was left");
            }
        }
    }
}
