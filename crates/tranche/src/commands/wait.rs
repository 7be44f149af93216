use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tranche_types::BackendError;

use crate::cli::DataArgs;
use crate::data::{open_existing, riding_outages, run_name};
use crate::output::run_line;

pub async fn wait(
    at: &DataArgs,
    run: &str,
    on_done: Option<String>,
    timeout: Option<u64>,
) -> Result<ExitCode> {
    let backend = riding_outages(open_existing(at).await?, at);
    let name = run_name(run)?;
    eprintln!("waiting for {run} to finish ({})", at.describe());
    let mut last = std::time::Instant::now();
    let p = backend
        .clone()
        .wait_finished(
            &name,
            Duration::from_millis(250),
            timeout.map(Duration::from_secs),
            |p| {
                if last.elapsed() >= Duration::from_secs(10) {
                    eprintln!("{}", run_line(p));
                    last = std::time::Instant::now();
                }
            },
        )
        .await?;
    println!("{}", run_line(&p));
    if let Some(cmd) = on_done {
        // Claimed in the backend, so one command runs per finish however many
        // processes wait on the run.
        let claimed = backend
            .claim_finish_hook(&name, &cmd, p.finishes)
            .await
            .map_err(|e| match e {
                // Repeating the claim would answer "claimed elsewhere" if this one did
                // land, and nobody would run the command: say so instead.
                BackendError::Unavailable {
                    maybe_applied: true,
                    ..
                } => anyhow::anyhow!(e).context(format!(
                    "the broker went away while claiming the --on-done command for {run}; \
                     if no waiter runs it, run it by hand"
                )),
                e => anyhow::anyhow!(e).context("could not claim the --on-done command"),
            })?;
        if claimed {
            let status = tokio::process::Command::new("sh")
                .arg("-c")
                .arg(&cmd)
                .env("TRANCHE_RUN", run)
                .env("TRANCHE_SUCCEEDED", p.succeeded.to_string())
                .env("TRANCHE_FAILED", p.failed.to_string())
                .env("TRANCHE_CANCELLED", p.cancelled.to_string())
                .status()
                .await
                .context("could not start the --on-done command")?;
            if !status.success() {
                bail!("the --on-done command exited with {status}");
            }
        } else {
            eprintln!("the --on-done command already ran for this finish of {run} (elsewhere)");
        }
    }
    Ok(if p.failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
