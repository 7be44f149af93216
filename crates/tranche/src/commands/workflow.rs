//! `tranche workflow …`: Conductor-compatible workflows from the command line, over the
//! same backend as `tranche server`'s `/api` (definitions applied, workflows started,
//! shown with their steps' timeline, listed, steered). The steps the engine runs itself
//! (joins, sub-workflows' ends, waits, scripts) are run by every `tranche server`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use tranche_workflow_def::{task_defs_from_json, workflows_from_json_with};
use tranche_workflow_engine::{
    RerunRequest, StartRequest, WorkflowStatus, WorkflowView, Workflows,
};
use tranche_workflow_expr::script_problems;

use crate::cli::DataArgs;
use crate::cli::WorkflowCmd;
use crate::data::{open, open_existing};

pub async fn run(at: &DataArgs, cmd: WorkflowCmd) -> Result<ExitCode> {
    match cmd {
        WorkflowCmd::Apply { files } => apply(at, &files).await,
        WorkflowCmd::Tasks { files } => tasks(at, &files).await,
        WorkflowCmd::Start {
            name,
            version,
            input,
            correlation_id,
        } => start(at, name, version, input.as_deref(), correlation_id).await,
        WorkflowCmd::Show { id, json } => show(at, &id, json).await,
        WorkflowCmd::List {
            name,
            status,
            limit,
            json,
        } => list(at, name, status, limit, json).await,
        WorkflowCmd::Terminate { id, reason } => {
            let w = workflows(at).await?;
            w.terminate(&id, &reason).await?;
            println!("workflow {id} terminated");
            Ok(ExitCode::SUCCESS)
        }
        WorkflowCmd::Pause { id } => {
            workflows(at).await?.pause(&id).await?;
            println!("workflow {id} paused");
            Ok(ExitCode::SUCCESS)
        }
        WorkflowCmd::Resume { id } => {
            workflows(at).await?.resume(&id).await?;
            println!("workflow {id} resumed");
            Ok(ExitCode::SUCCESS)
        }
        WorkflowCmd::Retry { id } => {
            workflows(at).await?.retry(&id).await?;
            println!("workflow {id} retried from its failed step");
            Ok(ExitCode::SUCCESS)
        }
        WorkflowCmd::Rerun {
            id,
            from,
            task_input,
            input,
        } => {
            let request = RerunRequest {
                from: Some(from.clone()),
                workflow_input: input.as_deref().map(|t| object("--input", t)).transpose()?,
                task_input: task_input
                    .as_deref()
                    .map(|t| object("--task-input", t).map(Value::Object))
                    .transpose()?,
                correlation_id: None,
            };
            workflows(at).await?.rerun(&id, request).await?;
            println!("workflow {id} rerun from {from}");
            Ok(ExitCode::SUCCESS)
        }
        WorkflowCmd::Restart { id } => {
            workflows(at).await?.restart(&id, None).await?;
            println!("workflow {id} restarted");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// A JSON object given as text or as `@FILE`.
fn object(flag: &str, text: &str) -> Result<Map<String, Value>> {
    let text = match text.strip_prefix('@') {
        Some(file) => read(Path::new(file))?,
        None => text.to_string(),
    };
    match serde_json::from_str(&text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => bail!("{flag}: expected a JSON object, got another JSON value"),
        Err(e) => bail!("{flag}: expected a JSON object, got text that is not JSON ({e})"),
    }
}

async fn workflows(at: &DataArgs) -> Result<Workflows> {
    Ok(Workflows::new(open_existing(at).await?))
}

fn read(file: &Path) -> Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("could not read {}", file.display()))
}

async fn apply(at: &DataArgs, files: &[std::path::PathBuf]) -> Result<ExitCode> {
    let w = Workflows::new(open(at).await?);
    let mut problems = Vec::new();
    let mut defs = Vec::new();
    for file in files {
        match workflows_from_json_with(&read(file)?, &file.display().to_string(), script_problems) {
            Ok(d) => defs.extend(d),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        eprintln!("{}", problems.join("\n"));
        return Ok(ExitCode::from(2));
    }
    let names: Vec<String> = defs
        .iter()
        .map(|d| format!("{} v{}", d.name, d.version))
        .collect();
    w.put_workflow_defs(defs).await?;
    for n in names {
        println!("applied workflow {n}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn tasks(at: &DataArgs, files: &[std::path::PathBuf]) -> Result<ExitCode> {
    let w = Workflows::new(open(at).await?);
    let mut defs = Vec::new();
    for file in files {
        match task_defs_from_json(&read(file)?, &file.display().to_string()) {
            Ok(d) => defs.extend(d),
            Err(e) => {
                eprintln!("{e}");
                return Ok(ExitCode::from(2));
            }
        }
    }
    let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
    w.put_task_defs(defs).await?;
    for n in names {
        println!("applied task {n}");
    }
    Ok(ExitCode::SUCCESS)
}

async fn start(
    at: &DataArgs,
    name: String,
    version: Option<u32>,
    input: Option<&str>,
    correlation_id: Option<String>,
) -> Result<ExitCode> {
    let input = input
        .map(|t| object("--input", t))
        .transpose()?
        .unwrap_or_default();
    let id = workflows(at)
        .await?
        .start(StartRequest {
            name,
            version,
            input,
            correlation_id,
            priority: 0,
            idempotency_key: None,
        })
        .await?;
    println!("{id}");
    Ok(ExitCode::SUCCESS)
}

fn ms(t: i64) -> String {
    chrono::DateTime::from_timestamp_millis(t)
        .map(|d| d.format("%H:%M:%S%.3f").to_string())
        .unwrap_or_default()
}

async fn show(at: &DataArgs, id: &str, json: bool) -> Result<ExitCode> {
    let view: WorkflowView = workflows(at).await?.workflow(id, true).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&view.to_conductor())?);
        return Ok(ExitCode::SUCCESS);
    }
    let h = &view.header;
    println!("workflow {} ({} v{})", h.id, h.name, h.version);
    println!("status   {}", h.status.as_str());
    if let Some(c) = &h.correlation_id {
        println!("correlation id {c}");
    }
    if let Some(r) = &h.reason {
        println!(
            "reason   {r}{}",
            h.failed_step
                .as_ref()
                .map(|s| format!(" (step {s})"))
                .unwrap_or_default()
        );
    }
    println!("started  {}", ms(h.start_time));
    if let Some(end) = h.end_time {
        println!("ended    {} ({} ms)", ms(end), end - h.start_time);
    }
    println!();
    println!(
        "{:<24} {:<18} {:<12} {:>8} {:>13} {:>10}",
        "STEP", "TYPE", "STATUS", "ATTEMPTS", "STARTED", "TOOK (ms)"
    );
    for step in &view.steps {
        let t = step.to_conductor();
        let start = t["startTime"].as_i64().unwrap_or(0);
        let end = t["endTime"].as_i64().unwrap_or(0);
        println!(
            "{:<24} {:<18} {:<12} {:>8} {:>13} {:>10}",
            t["referenceTaskName"].as_str().unwrap_or(""),
            t["taskType"].as_str().unwrap_or(""),
            step.status,
            t["pollCount"].as_u64().unwrap_or(0),
            if start > 0 { ms(start) } else { "-".into() },
            if start > 0 && end >= start {
                (end - start).to_string()
            } else {
                "-".into()
            },
        );
        if let Some(reason) = t["reasonForIncompletion"].as_str() {
            println!("{:<24} {reason}", "");
        }
    }
    println!("\noutput {}", h.output);
    Ok(ExitCode::SUCCESS)
}

async fn list(
    at: &DataArgs,
    name: Option<String>,
    status: Option<String>,
    limit: usize,
    json: bool,
) -> Result<ExitCode> {
    let status = match status {
        None => None,
        Some(s) => Some(WorkflowStatus::parse(&s.to_uppercase()).with_context(|| {
            format!("--status: expected RUNNING, PAUSED, COMPLETED, FAILED, TIMED_OUT or TERMINATED, got {s:?}")
        })?),
    };
    let found = workflows(at)
        .await?
        .search(200_000, |h| {
            name.as_ref().is_none_or(|n| *n == h.name) && status.is_none_or(|s| s == h.status)
        })
        .await?;
    let shown: Vec<_> = found.iter().take(limit).collect();
    if json {
        let rows: Vec<Value> = shown.iter().map(|h| WorkflowView::summary(h)).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if shown.is_empty() {
        println!("no workflows in {}", at.describe());
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36} {:<24} {:<10} {:<13} {:>10}",
        "ID", "WORKFLOW", "STATUS", "STARTED", "TOOK (ms)"
    );
    for h in shown {
        println!(
            "{:<36} {:<24} {:<10} {:<13} {:>10}",
            h.id,
            format!("{} v{}", h.name, h.version),
            h.status.as_str(),
            ms(h.start_time),
            h.end_time
                .map_or("-".into(), |e| (e - h.start_time).to_string())
        );
    }
    if found.len() > limit {
        println!("… {} more (--limit)", found.len() - limit);
    }
    Ok(ExitCode::SUCCESS)
}
