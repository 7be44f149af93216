//! Tranche's engine: the part every pipeline runs on.
//!
//! - [`Client`] is what applications, pipelines, the HTTP server and the CLI hold: it
//!   enqueues, steers and inspects runs, reads the change feed, takes locks and records
//!   effects on whichever backend it was built from (SQLite embedded, Redis for fleets).
//!   The backend contract behind it (`tranche_backend::Backend`) is internal: the
//!   engine holds no SQL or Redis commands, and callers never hold the trait.
//! - [`Registry`] maps a stable task kind string to a typed handler and its options
//!   (queue, concurrency, attempts, backoff, timeout). CPU-bound handlers run on a pool
//!   sized to the cores so they never starve the async runtime.
//! - [`Worker`] reserves jobs in batches per queue, runs handlers, extends leases while
//!   they run and reports results in batches; a result is durable before its slot is
//!   reused. Handlers reach the world only through [`JobContext`].
//! - [`Engine`] is a client with the task kinds known to this process: it builds typed
//!   jobs and workers.
//! - [`Reconnecting`] (through [`Client::riding_outages`]) rides out an outage of a
//!   remote backend (a broker restart) instead of failing on the first broken
//!   connection.

#![deny(missing_docs)]

mod client;
mod context;
mod listing;
mod reconnect;
mod runs;
mod signals;
mod task;
pub mod trace;
mod worker;

pub use client::{Client, WorkerProtocol};
pub use context::{EffectError, JobContext};
pub use reconnect::{Outage, Reconnecting};
pub use runs::WaitError;
pub use signals::on_terminate;
pub use task::{Backoff, Registry, TaskOptions};
pub use tranche_types as types;
pub use worker::{
    BackendTrouble, Finished, Observer, Worker, WorkerConfig, WorkerError, WorkerStats,
};

use serde::Serialize;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, Enqueued, JobSpec, RunName};

/// A [`Client`] and the task kinds known to this process.
#[derive(Clone)]
pub struct Engine {
    client: Client,
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
    /// An engine enqueueing through `client` the tasks registered in `registry`.
    pub fn new(client: Client, registry: Registry) -> Self {
        Engine { client, registry }
    }

    /// The client this engine enqueues through.
    pub fn client(&self) -> &Client {
        &self.client
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
        self.client
            .enqueue(EnqueueRequest {
                run: run.clone(),
                items,
                on_done: None,
            })
            .await
    }

    /// A worker serving `config`'s queues with this engine's handlers.
    pub fn worker(&self, config: WorkerConfig) -> Result<Worker, WorkerError> {
        Worker::new(&self.client, self.registry.clone(), config)
    }
}

/// The README's code examples, compiled and run by `cargo test -p tranche-core --doc` so
/// that the library example there cannot drift from the API (its other blocks are
/// marked `sh` or `text`).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
