use std::time::{Duration, Instant};

use tranche_types::{BackendError, RunName, RunProgress};

use tranche_backend::Backend;

/// Why [`Client::wait_finished`](crate::Client::wait_finished) returned before the run
/// finished.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Reading the run's progress failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// No job was ever enqueued into the run.
    #[error("run {0} does not exist")]
    NoSuchRun(RunName),
    /// The deadline passed first; the run goes on.
    #[error("run {run} did not finish within {waited:?} ({ended} of {total} jobs ended)")]
    Timeout {
        /// The run waited for.
        run: RunName,
        /// The deadline given.
        waited: Duration,
        /// Jobs ended at the last read.
        ended: u64,
        /// Jobs in the run at the last read.
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
