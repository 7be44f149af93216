use std::process::ExitCode;

use anyhow::{bail, Result};

use crate::cli::DataArgs;
use crate::data::{open_existing, run_name};
use crate::output::{run_line, when};

pub async fn runs(at: &DataArgs, limit: usize, json: bool) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let runs = backend.list_runs(limit).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
    } else if runs.is_empty() {
        println!("no runs yet in {}", at.describe());
    } else {
        for p in &runs {
            println!("{}", run_line(p));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn status(at: &DataArgs, run: &str, failures: usize, json: bool) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let name = run_name(run)?;
    let Some(p) = backend.run_progress(&name).await? else {
        bail!(
            "run {run} not found in {} (see `tranche runs`)",
            at.describe()
        );
    };
    let failed = backend.run_failures(&name, None, failures).await?;
    if json {
        let out = serde_json::json!({ "progress": p, "failures": failed });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", run_line(&p));
        println!(
            "  pending {}  available {}  created {}  finished {}  (finished {} time(s))",
            p.pending,
            p.available,
            when(p.created_at),
            when(p.finished_at),
            p.finishes
        );
        if !failed.is_empty() {
            println!("failures (first {}):", failed.len());
            for f in &failed {
                println!(
                    "  job {:>10}  {:<20} attempt {:>2}  {}",
                    f.id, f.kind, f.attempt, f.error
                );
            }
            if (failed.len() as u64) < p.failed {
                println!(
                    "  … {} more: tranche {} status {run} --failures {}",
                    p.failed - failed.len() as u64,
                    at.as_args(),
                    p.failed
                );
            }
            println!("re-run them: tranche {} retry {run}", at.as_args());
        }
    }
    // Non-zero when the run has failures, so scripts can check a night in one call.
    Ok(if p.failed > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
