//! The engine bench's one task, a no-op, so the figures are the engine's own cost; and
//! the worker settings it runs with, in the bench's process or in each worker process.

use std::sync::Arc;
use std::time::Duration;

use tranche_core::{Registry, TaskOptions, WorkerConfig};

use super::figures::Latencies;
use crate::cli::BenchEngine;

/// The bench's one task: a no-op, so the figures are the engine's own cost.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register("noop", TaskOptions::default(), |_ctx, _: ()| async {
        Ok::<_, std::convert::Infallible>(())
    });
    registry
}

/// The worker settings of the bench, in this process or in each worker process
/// (reserve calls in flight per queue: the backend's hint).
pub fn worker_config(args: &BenchEngine, latencies: &Arc<Latencies>) -> WorkerConfig {
    WorkerConfig {
        batch: args.batch,
        lease: Duration::from_secs(30),
        heartbeat: Duration::from_secs(10),
        observer: Some(latencies.clone()),
        ..WorkerConfig::default()
    }
    .queues(["default"], args.concurrency)
}
