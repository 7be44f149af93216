use std::time::{Duration, Instant};

use tranche_types::{BackendError, RunName, RunProgress};

use tranche_backend::Backend;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("run {0} does not exist")]
    NoSuchRun(RunName),
    #[error("run {run} did not finish within {waited:?} ({ended} of {total} jobs ended)")]
    Timeout {
        run: RunName,
        waited: Duration,
        ended: u64,
        total: u64,
    },
}

/// Poll a run's O(1) progress until it has finished, calling `on_progress` on each
/// read, for at most `deadline`.
pub(crate) async fn wait_finished(
    backend: &dyn Backend,
    run: &RunName,
    every: Duration,
    deadline: Option<Duration>,
    mut on_progress: impl FnMut(&RunProgress),
) -> Result<RunProgress, WaitError> {
    let start = Instant::now();
    loop {
        let p = backend
            .run_progress(run)
            .await?
            .ok_or_else(|| WaitError::NoSuchRun(run.clone()))?;
        on_progress(&p);
        if p.is_finished() {
            return Ok(p);
        }
        if let Some(limit) = deadline {
            if start.elapsed() >= limit {
                return Err(WaitError::Timeout {
                    run: run.clone(),
                    waited: limit,
                    ended: p.ended(),
                    total: p.total,
                });
            }
        }
        tokio::time::sleep(every).await;
    }
}
