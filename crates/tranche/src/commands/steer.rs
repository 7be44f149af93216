use std::process::ExitCode;

use anyhow::{bail, Result};
use tranche_types::{CancelTarget, JobId};

use crate::cli::DataArgs;
use crate::data::{open_existing, run_name};

pub async fn retry(at: &DataArgs, run: &str) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let name = run_name(run)?;
    if backend.run_progress(&name).await?.is_none() {
        bail!(
            "run {run} not found in {} (see `tranche runs`)",
            at.describe()
        );
    }
    let n = backend.retry_run(&name).await?;
    println!("re-enqueued {n} job(s) of {run}");
    Ok(ExitCode::SUCCESS)
}

pub async fn cancel(
    at: &DataArgs,
    run: Option<String>,
    job: Option<i64>,
    chain: Option<i64>,
    reason: &str,
) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let target = match (run, job, chain) {
        (Some(run), _, _) => {
            let name = run_name(&run)?;
            if backend.run_progress(&name).await?.is_none() {
                bail!(
                    "run {run} not found in {} (see `tranche runs`)",
                    at.describe()
                );
            }
            CancelTarget::Run(name)
        }
        (None, Some(id), _) => CancelTarget::Job(JobId(id)),
        (None, None, Some(id)) => CancelTarget::Chain(JobId(id)),
        (None, None, None) => bail!("expected a run, --job ID or --chain ID"),
    };
    if let CancelTarget::Job(id) | CancelTarget::Chain(id) = &target {
        if backend.job(*id).await?.is_none() {
            bail!("job {id} not found in {}", at.describe());
        }
    }
    let n = backend.cancel(target, reason).await?;
    println!("cancelled {n} job(s)");
    Ok(ExitCode::SUCCESS)
}
