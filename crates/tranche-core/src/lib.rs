//! Tranche's engine: the part every pipeline runs on.
//!
//! - [`Backend`] is the one seam to where job state lives (SQLite embedded, Redis for
//!   fleets); the engine holds no SQL or Redis commands. Its contract is written on the
//!   trait and enforced by `tranche-backend-tests`.
//! - [`Registry`] maps a stable task kind string to a typed handler and its options
//!   (queue, concurrency, attempts, backoff, timeout). CPU-bound handlers run on a pool
//!   sized to the cores so they never starve the async runtime.
//! - [`Worker`] reserves jobs in batches per queue, runs handlers, extends leases while
//!   they run and reports results in batches; a result is durable before its slot is
//!   reused. Handlers reach the world only through [`JobContext`].
//! - [`Engine`] ties a backend and a registry together for callers that enqueue.
//! - [`Reconnecting`] wraps a remote backend so that long-running callers ride out an
//!   outage (a broker restart) instead of failing on the first broken connection.

mod backend;
mod context;
mod reconnect;
mod runs;
mod signals;
mod task;
mod worker;

use std::sync::Arc;

pub use backend::Backend;
pub use context::{EffectError, JobContext};
pub use reconnect::{Outage, Reconnecting};
pub use runs::{wait_finished, WaitError};
pub use signals::on_terminate;
pub use task::{Backoff, Registry, TaskOptions};
pub use tranche_types as types;
pub use worker::{
    BackendTrouble, Finished, Observer, Worker, WorkerConfig, WorkerError, WorkerStats,
};

use serde::Serialize;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, Enqueued, JobSpec, RunName};

/// A backend and the task kinds known to this process.
#[derive(Clone)]
pub struct Engine {
    backend: Arc<dyn Backend>,
    registry: Registry,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("registry", &self.registry)
            .finish()
    }
}

impl Engine {
    pub fn new(backend: Arc<dyn Backend>, registry: Registry) -> Self {
        Engine { backend, registry }
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// A job of `kind` with `args`, using the task's registered options.
    pub fn job<A: Serialize>(&self, kind: &str, args: &A) -> Result<JobSpec, serde_json::Error> {
        self.registry.spec(kind, args)
    }

    /// Enqueue items into `run` in one transaction.
    pub async fn enqueue(
        &self,
        run: &RunName,
        items: Vec<EnqueueItem>,
    ) -> Result<Vec<Enqueued>, BackendError> {
        self.backend
            .enqueue(EnqueueRequest {
                run: run.clone(),
                items,
                on_done: None,
            })
            .await
    }

    /// A worker serving `config`'s queues with this engine's handlers.
    pub fn worker(&self, config: WorkerConfig) -> Result<Worker, WorkerError> {
        Worker::new(self.backend.clone(), self.registry.clone(), config)
    }
}
