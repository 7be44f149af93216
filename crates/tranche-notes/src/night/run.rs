//! One call of a night: publish → plan → enqueue → work → report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tranche_core::{Client, WorkerError};
use tranche_storage::{Storage, StorageError};
use tranche_types::{BackendError, RunName};

use super::{place_report, NightProgress, PlannedNight, ReportPlace, StallWatch};
use crate::pipeline::{
    collect_report, plan_night, publish_broker, run_name, submit_night, work_until_finished,
    write_accounting, Attention, ChainIds, Corrections, Day, DriveError, EnqueueError, NightPlan,
    NightSource, ReportRow, ReportSummary, StepCounts, Unaccounted, Workers, LEASE,
};

/// Chains per enqueue call: big enough to amortise a call, small enough that one
/// call's transaction does not hold up the workers.
const ENQUEUE_BATCH: usize = 2_000;

/// How often the run's progress is read while it is worked.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// How a night is done.
pub struct NightConfig {
    /// Where `accounting.csv` and `report.csv` go.
    pub out: PathBuf,
    /// Where the night's broker details are published, for whichever process works a
    /// step.
    pub store: Arc<dyn Storage>,
    /// Work the steps in this process; `None`: only enqueue, and watch workers
    /// elsewhere do it.
    pub work_here: Option<WorkHere>,
    /// Mailed clients whose changed input may become corrected notes.
    pub corrections: Corrections,
}

/// What this process works a night's steps with.
pub struct WorkHere {
    /// The store, renderer, signer and mailer the steps use.
    pub source: Arc<NightSource>,
    /// How many of each step run at once, and which queues.
    pub workers: Workers,
}

/// What one call of a night saw.
#[derive(Debug)]
pub struct NightSummary {
    /// The night's run, `contract-notes/<date>`.
    pub run: RunName,
    /// Where `report.csv` was written, if anywhere.
    pub report: ReportPlace,
    /// The report's lines: one per client, one per input row no client is named for.
    pub rows: Vec<ReportRow>,
    /// The rows counted by status.
    pub totals: ReportSummary,
    /// Each client's chain, as the report reads them.
    pub chains: Vec<ChainIds>,
    /// Clients a person must look at: input changed after mailing, or while mailing.
    pub attention: Vec<Attention>,
    /// Stopped (a signal) before the run finished.
    pub interrupted: bool,
    /// What this process did per step.
    pub steps: Arc<StepCounts>,
    /// Spent submitting the night.
    pub enqueue_time: Duration,
    /// Spent working or watching the run, until it finished or this process stopped.
    pub work_time: Duration,
}

/// Why a night stopped. Whatever was enqueued stays: calling [`run_night`] again for
/// the same day resumes.
#[derive(Debug, thiserror::Error)]
pub enum NightError {
    /// The broker details could not be put where workers read them.
    #[error("cannot publish the night's broker details to the store")]
    Publish(#[source] StorageError),
    /// Input rows were lost on the way: nothing was submitted.
    #[error(transparent)]
    Plan(#[from] Unaccounted),
    /// The output directory could not be created.
    #[error("cannot create {}", .path.display())]
    CreateOut {
        /// The output directory.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// `accounting.csv` could not be written: nothing was submitted.
    #[error("cannot write {}", .path.display())]
    Accounting {
        /// Where it was to go.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The night could not be submitted.
    #[error(transparent)]
    Enqueue(#[from] EnqueueError),
    /// The worker for this process could not be made.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// Working or watching the run stopped before it finished.
    #[error(transparent)]
    Drive(#[from] DriveError),
    /// The chains' records could not be read for the report.
    #[error(transparent)]
    Report(#[from] BackendError),
}

/// Do `day`'s night: enqueue it (idempotently), work it to the end here or watch
/// workers elsewhere do it, write the report. `stop_on` is asked for the token that
/// stops the work when the work starts (a signal handler installed only then leaves
/// the enqueueing interruptible as any process is).
pub async fn run_night(
    backend: Client,
    day: Day,
    config: NightConfig,
    progress: &mut dyn NightProgress,
    stop_on: impl FnOnce() -> CancellationToken,
) -> Result<NightSummary, NightError> {
    let date = day.date;
    let run = run_name(date);
    let trades = day.trades.count();
    publish_broker(&*config.store, date, &day.broker)
        .await
        .map_err(NightError::Publish)?;
    let broker = day.broker.clone();
    let NightPlan {
        chains,
        unattributed,
        accounts,
    } = plan_night(day)?;
    std::fs::create_dir_all(&config.out).map_err(|source| NightError::CreateOut {
        path: config.out.clone(),
        source,
    })?;
    let accounting = config.out.join("accounting.csv");
    write_accounting(&accounting, &accounts).map_err(|source| NightError::Accounting {
        path: accounting,
        source,
    })?;
    progress.planned(&PlannedNight {
        run: &run,
        clients: chains.len(),
        trades,
        accounts: &accounts,
        working_here: config.work_here.is_some(),
    });
    let started = Instant::now();
    let submitted = submit_night(
        &backend,
        &broker,
        date,
        &chains,
        &config.corrections,
        ENQUEUE_BATCH,
        |_| {},
    )
    .await?;
    let enqueue_time = started.elapsed();
    drop(chains);
    progress.submitted(&submitted);
    let ids = submitted.chains;

    let steps = Arc::new(StepCounts::default());
    let work_started = Instant::now();
    // A day without trades has no run to work: its report is empty, and nothing is wrong.
    let finished = ids.is_empty()
        || work(
            backend.clone(),
            &run,
            config.work_here.as_ref(),
            &steps,
            progress,
            stop_on,
        )
        .await?;
    let work_time = work_started.elapsed();
    if let Some(here) = &config.work_here {
        here.source.mailer.close().await;
    }
    let rows = collect_report(&backend, &ids, &unattributed).await?;
    let report = place_report(&config.out.join("report.csv"), &run, &rows);
    Ok(NightSummary {
        run,
        report,
        totals: ReportSummary::of(&rows),
        rows,
        chains: ids,
        attention: submitted.attention,
        interrupted: !finished,
        steps,
        enqueue_time,
        work_time,
    })
}

/// Work (or watch) the run until it has finished (true) or the work is stopped.
async fn work(
    backend: Client,
    run: &RunName,
    here: Option<&WorkHere>,
    steps: &Arc<StepCounts>,
    progress: &mut dyn NightProgress,
    stop_on: impl FnOnce() -> CancellationToken,
) -> Result<bool, NightError> {
    let worker = match here {
        Some(h) => Some(
            h.workers
                .worker(backend.clone(), h.source.clone(), steps.clone())?,
        ),
        None => None,
    };
    progress.work_started(run);
    let mut stalls = match (here, &worker) {
        (Some(h), Some(w)) => Some(StallWatch::new(h.source.space.clone(), w.stats(), LEASE)),
        _ => None,
    };
    let counted = here.is_some().then_some(&**steps);
    let finished = work_until_finished(backend, worker, run, stop_on(), PROGRESS_EVERY, |p| {
        let stall = stalls.as_mut().and_then(|w| w.check(p));
        progress.working(p, counted, stall);
    })
    .await?;
    progress.work_ended();
    Ok(finished.is_some())
}
