//! The engine bench's one task, a no-op, so the figures are the engine's own cost; and
//! the worker settings it runs with, in the bench's process or in each worker process.

use std::sync::Arc;
use std::time::Duration;

use tranche_core::{Registry, TaskOptions, WorkerConfig};

use super::figures::Latencies;
use crate::cli::BenchEngine;

pub fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register("noop", TaskOptions::default(), |_ctx, _: ()| async {
        Ok::<_, std::convert::Infallible>(())
    });
    registry
}

/// On Redis (`remote`), two reserve calls are in flight, so that the server is never
/// idle while this process takes in a batch.
pub fn worker_config(args: &BenchEngine, latencies: &Arc<Latencies>, remote: bool) -> WorkerConfig {
    WorkerConfig {
        batch: args.batch,
        lease: Duration::from_secs(30),
        heartbeat: Duration::from_secs(10),
        fetchers_per_queue: if remote { 2 } else { 1 },
        observer: Some(latencies.clone()),
        ..WorkerConfig::default()
    }
    .queues(["default"], args.concurrency)
}
