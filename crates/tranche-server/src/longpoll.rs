//! The long-poll behind `POST /v1/workers/poll`: it holds the jobs it has leased while
//! it waits for the rest of its batch, and renews their leases as it goes, so a wait
//! longer than the lease neither lets them expire (burning an attempt, or failing a
//! job on its last one) nor hands them out twice.

use std::time::{Duration, Instant};

use tranche_types::{BackendError, LeaseRef, ReserveRequest, ReservedJob};

use crate::state::AppState;

/// Lease up to `max` jobs, returning as soon as `max` are leased or `wait` has passed:
/// never empty before `wait`.
pub async fn collect(
    app: &AppState,
    queue: String,
    max: usize,
    wait: Duration,
    lease: Duration,
) -> Result<Vec<ReservedJob>, BackendError> {
    let backend = app.backend();
    let deadline = Instant::now() + wait;
    let renew_every = lease / 3;
    let mut jobs: Vec<ReservedJob> = Vec::new();
    // When the oldest lease among `jobs` was granted or last renewed.
    let mut leased_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let mut pause = deadline.saturating_duration_since(now);
        if let Some(t) = leased_at {
            pause = pause.min((t + renew_every).saturating_duration_since(now));
        }
        let got = backend
            .worker_protocol()
            .reserve(ReserveRequest {
                queue: queue.clone(),
                max: max - jobs.len(),
                lease,
                wait: pause,
            })
            .await;
        let got = match got {
            Ok(got) => got,
            Err(e) => return Err(give_back(app, jobs, e).await),
        };
        if !got.is_empty() && leased_at.is_none() {
            leased_at = Some(now);
        }
        jobs.extend(got);
        if jobs.len() >= max || Instant::now() >= deadline {
            break;
        }
        if leased_at.is_some_and(|t| t.elapsed() >= renew_every) {
            leased_at = Some(Instant::now());
            if let Err(e) = renew(app, &mut jobs, lease).await {
                return Err(give_back(app, jobs, e).await);
            }
        }
    }
    // Hand them over with (nearly) their whole lease ahead of them.
    if leased_at.is_some_and(|t| t.elapsed() > lease / 4) {
        if let Err(e) = renew(app, &mut jobs, lease).await {
            return Err(give_back(app, jobs, e).await);
        }
    }
    Ok(jobs)
}

/// Extend the leases of `jobs`, dropping any lost meanwhile (cancelled).
async fn renew(
    app: &AppState,
    jobs: &mut Vec<ReservedJob>,
    lease: Duration,
) -> Result<(), BackendError> {
    if jobs.is_empty() {
        return Ok(());
    }
    // Taken before the call: the backend's new lease ends no earlier than this.
    let until = app.backend().clock().now().plus(lease);
    let leases: Vec<LeaseRef> = jobs.iter().map(ReservedJob::lease).collect();
    let lost = app
        .backend()
        .worker_protocol()
        .heartbeat(leases, lease)
        .await?;
    jobs.retain(|j| !lost.contains(&j.lease()));
    for j in jobs.iter_mut() {
        j.lease_until = until;
    }
    Ok(())
}

async fn give_back(app: &AppState, jobs: Vec<ReservedJob>, e: BackendError) -> BackendError {
    if !jobs.is_empty() {
        let leases = jobs.iter().map(ReservedJob::lease).collect();
        if let Err(release) = app.backend().worker_protocol().release(leases).await {
            tracing::warn!(error = %release, "could not hand back the jobs of a failed poll; their leases will expire");
        }
    }
    e
}
