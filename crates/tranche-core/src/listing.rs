//! Listing the jobs in one state across the whole store. A backend's listing keeps no
//! index for it (one would tax every state change of the bulk path), so without a run
//! it walks ids a window at a time: looking for the few failed jobs, or the waiting
//! jobs of tonight's run, among ten million would take a thousand calls. But every
//! run counts its jobs per state, so the runs that hold any job in that state are
//! known, and listing each of them is cheap (a run's own index). When they are few, or
//! the state is rare (failures), the page is their pages merged in id order.

use futures::{StreamExt, TryStreamExt};
use tranche_backend::Backend;
use tranche_types::{BackendError, JobFilter, JobId, JobPage, JobState, RunProgress};

/// Most runs read to find the ones holding the state; with more runs than this the
/// walk is used (reading them all on every page would cost more than it saves).
const RUNS_READ: usize = 1_000;
/// Most runs merged when the state is common; with more, the walk is used (it finds a
/// common state's jobs in a few windows).
const RUNS_MERGED: usize = 32;
/// Runs' calls in flight at once while merging (pipelined on Redis).
const IN_FLIGHT: usize = 8;

pub(crate) async fn list_jobs(
    backend: &dyn Backend,
    filter: &JobFilter,
    after: Option<JobId>,
    limit: usize,
) -> Result<JobPage, BackendError> {
    let Some(state) = filter.state.filter(|_| filter.run.is_none()) else {
        return backend.list_jobs(filter, after, limit).await;
    };
    let runs = backend.list_runs(RUNS_READ).await?;
    let holding: Vec<_> = runs
        .iter()
        .filter(|r| in_state(r, state) > 0)
        .filter_map(|r| r.run.clone())
        .collect();
    // A rare state (under 1 % of the jobs: failures) is merged from however many runs
    // hold it; a walk would read a hundred windows to find a page of it.
    let matching: u64 = runs.iter().map(|r| in_state(r, state)).sum();
    let total: u64 = runs.iter().map(|r| r.total).sum();
    let rare = matching.saturating_mul(100) <= total;
    if runs.len() >= RUNS_READ || (holding.len() > RUNS_MERGED && !rare) {
        return backend.list_jobs(filter, after, limit).await;
    }
    let limit = limit.max(1);
    let mut jobs = Vec::new();
    // The lowest id up to which every run's jobs have been seen: a job past it may be
    // preceded by a job of a run whose page stopped earlier.
    let mut seen_to: Option<JobId> = None;
    let pages: Vec<JobPage> = futures::stream::iter(holding)
        .map(|run| {
            let one_run = JobFilter {
                run: Some(run),
                ..filter.clone()
            };
            async move { backend.list_jobs(&one_run, after, limit).await }
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await?;
    for page in pages {
        let reached = match page.next {
            None => None,
            Some(_) if page.jobs.len() == limit => page.jobs.last().map(|j| j.id),
            Some(next) => Some(next),
        };
        if let Some(r) = reached {
            seen_to = Some(seen_to.map_or(r, |s| s.min(r)));
        }
        jobs.extend(page.jobs);
    }
    jobs.sort_by_key(|j| j.id);
    jobs.retain(|j| seen_to.is_none_or(|s| j.id <= s));
    jobs.truncate(limit);
    let next = if jobs.len() == limit {
        jobs.last().map(|j| j.id)
    } else {
        seen_to
    };
    Ok(JobPage { jobs, next })
}

fn in_state(r: &RunProgress, state: JobState) -> u64 {
    match state {
        JobState::Pending => r.pending,
        JobState::Available => r.available,
        JobState::Running => r.running,
        JobState::Succeeded => r.succeeded,
        JobState::Failed => r.failed,
        JobState::Cancelled => r.cancelled,
    }
}
