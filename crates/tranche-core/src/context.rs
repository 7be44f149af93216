use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tranche_types::{BackendError, Effect, JobId, LeaseRef, LockClaim, ReservedJob, RunName};
use tranche_types::{EffectRecord, LockRequest};

use tranche_backend::Backend;

/// What a handler knows about its job and the only way it reaches the engine: input
/// from upstream, cancellation, and recorded effects.
#[derive(Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

struct Inner {
    job: ReservedJob,
    cancel: CancellationToken,
    backend: Arc<dyn Backend>,
    lease: Duration,
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for JobContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("job", &self.inner.job.id)
            .field("kind", &self.inner.job.kind)
            .field("attempt", &self.inner.job.attempt)
            .finish()
    }
}

/// Why an effect was not performed or recorded.
#[derive(Debug, thiserror::Error)]
pub enum EffectError<E> {
    /// The attempt no longer holds its job (cancelled, lease lost or timed out): the
    /// effect was not performed.
    #[error("job was cancelled before the effect")]
    Cancelled,
    /// The backend failed: looking the effect up or checking the lease (the effect was
    /// not performed), or recording it (performed, not recorded).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The effect itself failed; nothing was recorded, so a later attempt tries again.
    #[error("{0}")]
    Effect(E),
}

impl JobContext {
    pub(crate) fn new(
        job: ReservedJob,
        cancel: CancellationToken,
        backend: Arc<dyn Backend>,
        lease: Duration,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        JobContext {
            inner: Arc::new(Inner {
                job,
                cancel,
                backend,
                lease,
                runtime,
            }),
        }
    }

    /// The job being run.
    pub fn id(&self) -> JobId {
        self.inner.job.id
    }
    /// The run the job belongs to.
    pub fn run(&self) -> &RunName {
        &self.inner.job.run
    }
    /// 1 on the first attempt; a snooze does not count.
    pub fn attempt(&self) -> u32 {
        self.inner.job.attempt
    }
    pub(crate) fn lease(&self) -> LeaseRef {
        self.inner.job.lease()
    }

    /// The previous chain step's result, or a group callback's `Vec<MemberOutcome>`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<Option<T>, serde_json::Error> {
        self.inner
            .job
            .input
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
    }

    /// True once the job was cancelled, its lease lost, or the attempt timed out.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Resolves when [`is_cancelled`](Self::is_cancelled) becomes true.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Ask the backend, now, whether this attempt still holds its job (and extend the
    /// lease). Use before anything irreversible: cancellation wins.
    pub async fn still_held(&self) -> Result<bool, BackendError> {
        if self.is_cancelled() {
            return Ok(false);
        }
        let lost = self
            .inner
            .backend
            .heartbeat(vec![self.lease()], self.inner.lease)
            .await?;
        if !lost.is_empty() {
            self.inner.cancel.cancel();
            return Ok(false);
        }
        Ok(true)
    }

    /// The effect recorded under `key`, if any.
    pub(crate) async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        self.inner.backend.effect(key).await
    }

    /// Record that the effect `key` happened, with `value` as its proof. False if it was
    /// already recorded.
    pub(crate) async fn record_effect(&self, key: &str, value: &str) -> Result<bool, BackendError> {
        self.inner
            .backend
            .record_effect(EffectRecord {
                key,
                job: Some(self.id()),
                value,
            })
            .await
    }

    /// Perform an effect at most once per key, as far as this engine can know: skip it
    /// (returning the recorded value) when a previous attempt recorded it, refuse it
    /// when the job is cancelled, else run `f` and record its value before returning.
    /// A crash between `f` and the record can repeat `f`: make `f` idempotent on the
    /// receiving side where you can (e.g. a stable Message-ID).
    pub async fn once<F, Fut, E>(&self, key: &str, f: F) -> Result<String, EffectError<E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, E>>,
    {
        if let Some(done) = self.effect(key).await? {
            return Ok(done.value);
        }
        if !self.still_held().await? {
            return Err(EffectError::Cancelled);
        }
        let value = f().await.map_err(EffectError::Effect)?;
        self.record_effect(key, &value).await?;
        Ok(value)
    }

    /// Claim entity ids (e.g. payment entries) for this attempt, all or none, until
    /// `ttl` passes or [`release_locks`](Self::release_locks) is called.
    pub async fn claim_locks(
        &self,
        keys: &[String],
        ttl: Duration,
    ) -> Result<LockClaim, BackendError> {
        self.inner
            .backend
            .claim_locks(LockRequest {
                owner: &self.lock_owner(),
                keys,
                ttl,
            })
            .await
    }

    /// Release keys this attempt claimed; how many it held.
    pub async fn release_locks(&self, keys: &[String]) -> Result<u64, BackendError> {
        self.inner
            .backend
            .release_locks(&self.lock_owner(), keys)
            .await
    }

    /// Locks belong to one attempt, so a redelivered job cannot mistake a lost
    /// attempt's locks for its own.
    fn lock_owner(&self) -> String {
        format!("job:{}:{}", self.id(), self.attempt())
    }

    /// Run an async context call from a CPU-bound handler (which runs off the runtime).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.inner.runtime.block_on(f)
    }
}

impl JobContext {
    pub(crate) fn args_owned(&self) -> String {
        self.inner.job.args.clone()
    }
}
