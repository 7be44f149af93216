//! One job at a time: show one, list them by run, state, queue and kind, retry one,
//! delete one.

use std::process::ExitCode;

use anyhow::{bail, Result};
use tranche_types::{BackendError, JobFilter, JobId, JobState, JobSummary};

use crate::cli::{DataArgs, JobsArgs};
use crate::data::{open_existing, run_name};
use crate::output::when;

/// A `--state` value, with every accepted name in the error.
pub fn parse_state(s: &str) -> Result<JobState, String> {
    JobState::ALL
        .into_iter()
        .find(|state| state.as_str() == s)
        .ok_or_else(|| {
            let names: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
            format!("expected one of {}, got {s:?}", names.join(", "))
        })
}

pub async fn show(at: &DataArgs, id: i64, json: bool) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    let Some(job) = client.job(JobId(id)).await? else {
        bail!("job {id} not found in {}", at.describe());
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&job)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("job {}  {}  run {}", job.id, job.state, job.run);
    println!(
        "  kind {}  queue {}  attempt {} of {}",
        job.kind, job.queue, job.attempt, job.max_attempts
    );
    println!(
        "  created {}  available {}  started {}  finished {}",
        when(Some(job.created_at)),
        when(Some(job.available_at)),
        when(job.started_at),
        when(job.finished_at)
    );
    if let Some(key) = &job.unique_key {
        println!("  unique key {key}");
    }
    if let Some(next) = job.next {
        println!("  next step: job {next}");
    }
    println!("  args   {}", job.args);
    if let Some(input) = &job.input {
        println!("  input  {input}");
    }
    if let Some(result) = &job.result {
        println!("  result {result}");
    }
    if let Some(error) = &job.error {
        println!("  error  {error}");
    }
    if !job.errors.is_empty() {
        println!("attempts that failed:");
        for e in &job.errors {
            println!(
                "  attempt {:>2}  {}  {}",
                e.attempt,
                when(Some(e.at)),
                e.error
            );
        }
    }
    if matches!(job.state, JobState::Failed | JobState::Cancelled) {
        println!("run it again: tranche {} retry --job {id}", at.as_args());
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn list(at: &DataArgs, args: JobsArgs) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    let filter = JobFilter {
        run: args.run.as_deref().map(run_name).transpose()?,
        state: args.state,
        queue: args.queue.clone(),
        kind: args.kind.clone(),
    };
    let limit = args.limit.max(1);
    // A backend's page may be short while more follow: gather up to `limit` jobs.
    let mut jobs: Vec<JobSummary> = Vec::new();
    let mut after = args.after.map(JobId);
    let mut more = true;
    while jobs.len() < limit && more {
        let page = client.list_jobs(&filter, after, limit - jobs.len()).await?;
        jobs.extend(page.jobs);
        more = page.next.is_some();
        after = page.next;
    }
    let next = if more {
        jobs.last().map(|j| j.id).or(after)
    } else {
        None
    };
    if args.json {
        let out = serde_json::json!({ "jobs": jobs, "next": next });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if jobs.is_empty() {
        println!("no jobs match in {}", at.describe());
    } else {
        println!(
            "{:>10}  {:<9}  {:<24}  {:<12}  {:<20}  {:>7}  {:<23}  error",
            "job", "state", "run", "queue", "kind", "attempt", "finished"
        );
        for j in &jobs {
            println!(
                "{:>10}  {:<9}  {:<24}  {:<12}  {:<20}  {:>3}/{:<3}  {:<23}  {}",
                j.id,
                j.state.as_str(),
                j.run.as_str(),
                j.queue,
                j.kind,
                j.attempt,
                j.max_attempts,
                when(j.finished_at),
                j.error.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(next) = next {
        println!(
            "more: tranche {} jobs{} --after {next}",
            at.as_args(),
            args.filter_args()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn retry(at: &DataArgs, id: i64) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    match client.retry_job(JobId(id)).await {
        Ok(n) => {
            println!("re-enqueued job {id} ({n} job(s) with the chain steps after it)");
            Ok(ExitCode::SUCCESS)
        }
        Err(BackendError::NotFound { .. }) => bail!("job {id} not found in {}", at.describe()),
        Err(e) => Err(e.into()),
    }
}

pub async fn delete(at: &DataArgs, id: i64) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    if !client.delete_job(JobId(id)).await? {
        bail!("job {id} not found in {}", at.describe());
    }
    println!("deleted job {id}");
    Ok(ExitCode::SUCCESS)
}
