//! Counting lease expiries. A remote worker that dies never reports, so its attempt
//! cannot be counted when it calls; instead, once an attempt handed out here is past
//! its lease, the backend's record of the job is read: the backend writes a "lease
//! expired" error for the attempt when it recovers the job (the conformance suite
//! holds every backend to it). Counting only what the backend recorded keeps a lease
//! renewed through another server sharing the backend from being counted.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tranche_types::JobState;

use crate::state::AppState;
use crate::telemetry;

/// What the backends write when they recover a job whose lease expired.
const EXPIRED: &str = "lease expired";

/// Clock skew between this process and the backend's clock, and the time a backend
/// may take to notice.
const MARGIN: Duration = Duration::from_secs(1);

/// Job records read per tick at most: a mass expiry is counted over a few seconds
/// rather than in one burst of reads.
const PER_TICK: usize = 1000;

pub fn spawn_sweep(app: AppState, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => sweep(&app).await,
                _ = stop.cancelled() => break,
            }
        }
    });
}

async fn sweep(app: &AppState) {
    for (lease, queue) in app.started().due(Instant::now(), MARGIN, PER_TICK) {
        let record = match app.backend().job(lease.job).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, job = %lease.job, "could not check a lease; trying again later");
                continue;
            }
        };
        let Some(record) = record else {
            app.started().forget(&lease);
            continue;
        };
        let expired = record
            .errors
            .iter()
            .any(|e| e.attempt == lease.attempt && e.error.contains(EXPIRED));
        if expired {
            metrics::counter!(telemetry::LEASE_EXPIRIES, "queue" => queue.to_string()).increment(1);
            app.started().forget(&lease);
        } else if record.state != JobState::Running || record.attempt != lease.attempt {
            // Reported elsewhere, or cancelled: not an expiry.
            app.started().forget(&lease);
        }
        // Otherwise still held (renewed through another server), or expired but not
        // yet recovered: `due` re-armed it.
    }
}
