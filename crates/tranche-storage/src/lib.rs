//! Where a night's artifacts live: one [`Storage`] trait, implemented by a local
//! directory ([`LocalStore`], the default) and, for fleets, an S3-compatible store.
//!
//! Keys are partitioned: `{d}-{kind}/{date}/{entity}.{ext}` where `d` is a stable hash
//! digit of the entity, so an object store spreads a night's writes over ten prefixes
//! instead of one hot one. [`conformance::exercise`] is the suite every implementation
//! passes.

pub mod conformance;
mod key;
mod local;

pub use key::{InvalidKey, StoreKey};
pub use local::LocalStore;

use async_trait::async_trait;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{key} not found in the store")]
    NotFound { key: String },
    #[error("{op} {key}: {message}")]
    Io {
        op: &'static str,
        key: String,
        message: String,
    },
}

#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Store `bytes` under `key`, replacing what was there. Readers never see a
    /// partial object.
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError>;

    async fn get(&self, key: &StoreKey) -> Result<Vec<u8>, StorageError>;

    async fn exists(&self, key: &StoreKey) -> Result<bool, StorageError>;

    /// Remove `key`; removing a missing key is not an error.
    async fn delete(&self, key: &StoreKey) -> Result<(), StorageError>;

    /// A human-readable location of `key`, e.g. a path or an s3:// URL.
    fn locate(&self, key: &StoreKey) -> String;
}
