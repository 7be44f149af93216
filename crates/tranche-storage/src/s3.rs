use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
};

use crate::{Storage, StorageError, StoreKey};

/// Retries of one request, on 5xx (503 SlowDown included, and 200s whose body says
/// `SlowDown`/`InternalError`), 429, 408, connection errors and timeouts of idempotent
/// requests (GET, HEAD, PUT and DELETE of an object all are).
///
/// Each wait is drawn uniformly from `[200 ms, 2 × the previous wait]`, capped at
/// 10 s: waits grow ~0.2, 0.4, 0.8 … 10 s with jitter, so a fleet throttled together
/// does not retry together. At most 10 retries and at most 120 s from the first
/// attempt (well below the 5 minutes a SigV4 signature stays valid: retried requests
/// are not re-signed).
const RETRY_INIT_BACKOFF: Duration = Duration::from_millis(200);
const RETRY_MAX_BACKOFF: Duration = Duration::from_secs(10);
const RETRY_BASE: f64 = 2.0;
const RETRY_MAX_RETRIES: usize = 10;
const RETRY_TIMEOUT: Duration = Duration::from_secs(120);
/// One attempt's limits (the defaults when `AWS_TIMEOUT` / `AWS_CONNECT_TIMEOUT` are
/// not set): 30 s for a whole request, 5 s to connect. An 8 MB object needs more than
/// 2 Mbit/s to fit.
const REQUEST_TIMEOUT: &str = "30s";
const CONNECT_TIMEOUT: &str = "5s";

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: RETRY_INIT_BACKOFF,
            max_backoff: RETRY_MAX_BACKOFF,
            base: RETRY_BASE,
        },
        max_retries: RETRY_MAX_RETRIES,
        retry_timeout: RETRY_TIMEOUT,
    }
}

/// An `object_store` error, as the cause of a [`StorageError`]. object_store writes
/// each of its error's sources into its message and returns them as `source()` too, so
/// a printed chain would say each three times: this one says it once, in its message,
/// and reports no source of its own (the original, with its sources, is `.0`).
#[derive(Debug)]
pub struct ObjectStoreError(pub object_store::Error);

impl fmt::Display for ObjectStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ObjectStoreError {}

/// A store in an S3 bucket (AWS or any S3-compatible server), one object per key under
/// an optional prefix. A PUT is atomic: readers see the old object or the new one.
///
/// Built from a URL `s3://bucket[/prefix]` and the standard environment:
/// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT`), `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP=true` for a plain http
/// endpoint, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true` for `bucket.host` addressing (path
/// style, `host/bucket`, is the default). Credentials never come from the URL, and
/// neither `Debug` nor errors show them.
///
/// Throttling (503 SlowDown), 5xx, 429, 408, connection errors and timeouts are retried
/// with jittered exponential backoff: waits from 200 ms doubling up to 10 s, at most 10
/// retries within 120 s of the first attempt. One attempt may take 30 s, 5 s of it to
/// connect, unless `AWS_TIMEOUT` / `AWS_CONNECT_TIMEOUT` say otherwise.
pub struct S3Store {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    prefix: Option<String>,
    endpoint: Option<String>,
    region: Option<String>,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint.as_deref().map(redact_userinfo))
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// An endpoint could carry `user:password@`; show the host only.
fn redact_userinfo(endpoint: &str) -> String {
    match endpoint.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            match rest[..authority_end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => endpoint.to_string(),
            }
        }
        None => endpoint.to_string(),
    }
}

pub(crate) fn bad_location(got: &str) -> StorageError {
    StorageError::Config(format!(
        "expected s3://bucket[/prefix] or a directory, got {:?}",
        redact_userinfo(got)
    ))
}

/// Bucket and prefix of `s3://bucket[/prefix]`. Bucket names follow S3's rules
/// (3–63 lowercase letters, digits, '-' or '.', starting and ending with a letter or
/// digit); the prefix's parts follow the key rules.
fn parse_s3_url(url: &str) -> Result<(String, Option<String>), StorageError> {
    let rest = url.strip_prefix("s3://").ok_or_else(|| bad_location(url))?;
    let (bucket, prefix) = match rest.split_once('/') {
        Some((b, p)) => (b, p.trim_end_matches('/')),
        None => (rest, ""),
    };
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b))
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !bucket_ok {
        return Err(bad_location(url));
    }
    if prefix.is_empty() {
        return Ok((bucket.to_string(), None));
    }
    StoreKey::parse(prefix).map_err(|_| bad_location(url))?;
    Ok((bucket.to_string(), Some(prefix.to_string())))
}

impl S3Store {
    /// The store at `url` (`s3://bucket[/prefix]`), configured from the `AWS_*` pairs
    /// among `vars` (name, value); [`open_store`](crate::open_store) passes the process
    /// environment. Checks the URL; nothing is sent to the server yet.
    pub fn from_vars(
        url: &str,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<S3Store, StorageError> {
        let (bucket, prefix) = parse_s3_url(url)?;
        let mut builder = AmazonS3Builder::new();
        for (name, value) in vars {
            if !name.starts_with("AWS_") {
                continue;
            }
            // Names object_store does not know (AWS_PROFILE, …) are not ours to refuse.
            if let Ok(key) = name.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value);
            }
        }
        for (key, default) in [
            (ClientConfigKey::Timeout, REQUEST_TIMEOUT),
            (ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT),
        ] {
            let key = AmazonS3ConfigKey::Client(key);
            if builder.get_config_value(&key).is_none() {
                builder = builder.with_config(key, default);
            }
        }
        let endpoint = builder
            .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
            .or_else(|| builder.get_config_value(&AmazonS3ConfigKey::Endpoint));
        let region = builder.get_config_value(&AmazonS3ConfigKey::Region);
        let store = builder
            .with_bucket_name(&bucket)
            .with_retry(retry_config())
            .build()
            // object_store's configuration errors name keys and URLs, never values of
            // secrets.
            .map_err(|e| StorageError::S3Setup {
                bucket: bucket.clone(),
                source: ObjectStoreError(e),
            })?;
        Ok(S3Store {
            store: Arc::new(store),
            bucket,
            prefix,
            endpoint,
            region,
        })
    }

    fn object(&self, key: &StoreKey) -> Result<Path, StorageError> {
        let full = match &self.prefix {
            Some(p) => format!("{p}/{key}"),
            None => key.to_string(),
        };
        Path::parse(full).map_err(|e| StorageError::Io {
            op: "name",
            key: key.to_string(),
            source: Box::new(ObjectStoreError(e.into())),
        })
    }
}

/// A 404 is a missing object, unless the bucket is what is missing: that is a broken
/// configuration, which must not pass for a missing artifact. (A HEAD's 404 has no body
/// to tell: `exists` in a missing bucket is `false`, and the next put or get says why.)
fn s3_error(op: &'static str, key: &StoreKey, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } if !e.to_string().contains("NoSuchBucket") => {
            StorageError::NotFound {
                key: key.to_string(),
            }
        }
        _ => StorageError::Io {
            op,
            key: key.to_string(),
            source: Box::new(ObjectStoreError(e)),
        },
    }
}

#[async_trait]
impl Storage for S3Store {
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError> {
        let path = self.object(key)?;
        self.store
            .put(&path, PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| s3_error("put", key, e))
    }

    async fn get(&self, key: &StoreKey) -> Result<Vec<u8>, StorageError> {
        let path = self.object(key)?;
        let result = self
            .store
            .get(&path)
            .await
            .map_err(|e| s3_error("get", key, e))?;
        let bytes = result.bytes().await.map_err(|e| s3_error("get", key, e))?;
        Ok(Vec::from(bytes))
    }

    async fn exists(&self, key: &StoreKey) -> Result<bool, StorageError> {
        let path = self.object(key)?;
        match self.store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(s3_error("check", key, e)),
        }
    }

    async fn delete(&self, key: &StoreKey) -> Result<(), StorageError> {
        let path = self.object(key)?;
        match self.store.delete(&path).await {
            Ok(()) => Ok(()),
            Err(e) => match s3_error("delete", key, e) {
                StorageError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
        }
    }

    fn locate(&self, key: &StoreKey) -> String {
        match &self.prefix {
            Some(p) => format!("s3://{}/{p}/{key}", self.bucket),
            None => format!("s3://{}/{key}", self.bucket),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_s3_url("s3://nightly-artifacts").unwrap(),
            ("nightly-artifacts".to_string(), None)
        );
        assert_eq!(
            parse_s3_url("s3://nightly.artifacts/fleet-a/2026/").unwrap(),
            ("nightly.artifacts".to_string(), Some("fleet-a/2026".into()))
        );
        for bad in [
            "s3://",
            "s3://ab",
            "s3://Upper",
            "s3://-dash",
            "s3://b_u",
            "s3://bucket/../etc",
            "s3://bucket//x",
            "s3://user:pw@bucket",
            "gs://bucket",
        ] {
            let e = parse_s3_url(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("expected s3://bucket[/prefix] or a directory, got"),
                "{bad}: {e}"
            );
            assert!(!e.contains("pw"), "{e}");
        }
    }

    #[test]
    fn debug_shows_no_secrets() {
        let store = S3Store::from_vars(
            "s3://bucket/p",
            [
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"),
                ("AWS_SESSION_TOKEN", "t0ken-value"),
                ("AWS_ENDPOINT_URL", "http://user:pa55word@127.0.0.1:9"),
                ("AWS_ALLOW_HTTP", "true"),
                ("AWS_REGION", "eu-west-1"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .unwrap();
        let shown = format!("{store:?}");
        for secret in ["s3cr3t-value", "t0ken-value", "pa55word"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("eu-west-1") && shown.contains("127.0.0.1:9"));
        assert_eq!(
            store.locate(&StoreKey::parse("1-tmp-pdf/d/C1.pdf").unwrap()),
            "s3://bucket/p/1-tmp-pdf/d/C1.pdf"
        );
    }
}
