//! Where a night's artifacts live (note data, PDFs, files): one [`Storage`] trait,
//! implemented by a local directory ([`LocalStore`], the default) and, for fleets whose
//! workers share no disk, an S3 bucket ([`S3Store`], AWS or any S3-compatible server).
//! [`open_store`] picks one from `s3://bucket[/prefix]` or a directory.
//!
//! Keys are partitioned: `{d}-{kind}/{date}/{entity}.{ext}` where `d` is a stable hash
//! digit of the entity, so an object store spreads a night's writes over ten prefixes
//! (S3 scales request rates per prefix) instead of one hot one. Throttling (503
//! SlowDown), 5xx and timeouts are retried with jittered exponential backoff (numbers in
//! [`S3Store`]); a missing key is [`StorageError::NotFound`] in every store, and a full disk
//! [`StorageError::Full`] (waiting for space helps, retrying soon does not).
//! `conformance::exercise` (feature `conformance`) is the suite every implementation
//! passes, against a real store.

#![deny(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod key;
mod local;
mod s3;
mod space;

pub use key::{InvalidKey, StoreKey};
pub use local::LocalStore;
pub use s3::{ObjectStoreError, S3Store};
pub use space::{free_space, human_bytes, is_full};

use std::sync::Arc;

use async_trait::async_trait;

/// Why a store operation failed. No variant carries an object's bytes or a credential.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// `get` of a key with no object; `delete` and `exists` never return it.
    #[error("{key} not found in the store")]
    NotFound {
        /// The key as given, e.g. `3-signed-pdf/2026-11-20/C0000042.pdf`.
        key: String,
    },
    /// The disk or the object store failed (for S3, after its own retries).
    #[error("{op} {key}")]
    Io {
        /// What was being done, e.g. `write`, `get`, `rename into place`.
        op: &'static str,
        /// The key of the object concerned.
        key: String,
        /// An `std::io::Error` from a local disk, an [`ObjectStoreError`] from S3.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No room left where the store writes (ENOSPC, EDQUOT): nothing was stored, and the
    /// same write succeeds once space is freed at `location`.
    #[error("{op} {key}: the store at {location} is full ({} to write): free space there", human_bytes(*.bytes))]
    Full {
        /// The step of the write that failed, e.g. `write`, `create directory for`.
        op: &'static str,
        /// The key that was being written.
        key: String,
        /// The store's root (a directory, an s3:// URL): where space must be freed.
        location: String,
        /// The size of the write that did not fit.
        bytes: u64,
        /// ENOSPC or EDQUOT, as the OS reported it.
        #[source]
        source: std::io::Error,
    },
    /// A store that cannot be opened: a bad location or configuration.
    #[error("{0}")]
    Config(String),
    /// The S3 client refused its configuration (a bad endpoint, region or option).
    #[error("s3://{bucket}: cannot set up the S3 client")]
    S3Setup {
        /// The bucket from the `s3://` location.
        bucket: String,
        /// object_store's complaint; it names keys and URLs, never secret values.
        #[source]
        source: ObjectStoreError,
    },
}

impl StorageError {
    /// What another attempt can do (see [`Transience`](tranche_types::Transience)): a
    /// full store waits for space; a missing key stays missing until the step that
    /// writes it runs again (both stores read what was written); a bad configuration is
    /// refused again; a failing disk or object store may pass.
    pub fn transience(&self) -> tranche_types::Transience {
        use tranche_types::Transience;
        match self {
            StorageError::Full { .. } => Transience::Full,
            StorageError::NotFound { .. }
            | StorageError::Config(_)
            | StorageError::S3Setup { .. } => Transience::Permanent,
            StorageError::Io { .. } => Transience::Transient,
        }
    }
}

/// The store at `location`: `s3://bucket[/prefix]` is an [`S3Store`] configured from the
/// `AWS_*` environment, anything else without a `scheme://` a [`LocalStore`] of that
/// directory.
pub fn open_store(location: &str) -> Result<Arc<dyn Storage>, StorageError> {
    open_store_with_vars(location, std::env::vars())
}

/// As [`open_store`], with the environment given as name/value pairs.
pub fn open_store_with_vars(
    location: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<Arc<dyn Storage>, StorageError> {
    if location.starts_with("s3://") {
        return Ok(Arc::new(S3Store::from_vars(location, vars)?));
    }
    if location.trim().is_empty() || location.contains("://") {
        return Err(s3::bad_location(location));
    }
    Ok(Arc::new(LocalStore::new(location)))
}

/// A flat store of whole objects by [`StoreKey`]: what the pipeline steps read and write,
/// whichever store the night was given. Shared between tasks as `Arc<dyn Storage>`.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Store `bytes` under `key`, replacing what was there. Readers never see a
    /// partial object.
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError>;

    /// The whole object under `key`; [`StorageError::NotFound`] when there is none.
    async fn get(&self, key: &StoreKey) -> Result<Vec<u8>, StorageError>;

    /// Whether an object is stored under `key`.
    async fn exists(&self, key: &StoreKey) -> Result<bool, StorageError>;

    /// Remove `key`; removing a missing key is not an error.
    async fn delete(&self, key: &StoreKey) -> Result<(), StorageError>;

    /// A human-readable location of `key`, e.g. a path or an s3:// URL.
    fn locate(&self, key: &StoreKey) -> String;

    /// Bytes still free where new objects go, when the store can tell (a local disk);
    /// `None` for a store without a notion of it (an object store).
    fn free_space(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
mod transience_tests {
    use super::StorageError;
    use tranche_types::Transience;

    #[test]
    fn a_missing_key_and_a_bad_configuration_are_final_a_full_store_waits() {
        let missing = StorageError::NotFound { key: "k".into() };
        assert_eq!(missing.transience(), Transience::Permanent);
        let config = StorageError::Config("bad location".into());
        assert_eq!(config.transience(), Transience::Permanent);
        let io = StorageError::Io {
            op: "get",
            key: "k".into(),
            source: "connection reset".into(),
        };
        assert_eq!(io.transience(), Transience::Transient);
        let full = StorageError::Full {
            op: "write",
            key: "k".into(),
            location: "/store".into(),
            bytes: 1,
            source: std::io::Error::other("no space"),
        };
        assert_eq!(full.transience(), Transience::Full);
    }
}
