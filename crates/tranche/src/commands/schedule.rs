//! `tranche schedule apply|delete` and `tranche schedules`; and the scheduler loop that
//! `tranche worker` and `tranche server` run beside their work.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_core::Client;
use tranche_schedule::{timing::local_time, Listed, Scheduler, When};

use crate::cli::DataArgs;
use crate::data::{open, open_existing};
use crate::output::when;

pub async fn apply(at: &DataArgs, file: &Path) -> Result<ExitCode> {
    let schedules = tranche_schedule::read_file(file)?;
    let client = open(at).await?;
    for s in &schedules {
        let fresh = tranche_schedule::apply(&client, s).await?;
        println!("{} {}", if fresh { "declared" } else { "updated " }, s.name);
    }
    println!(
        "{} schedule(s) from {} in {}",
        schedules.len(),
        file.display(),
        at.describe()
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn delete(at: &DataArgs, name: &str) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    if tranche_schedule::delete(&client, name).await? {
        println!("deleted schedule {name}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "no schedule {name:?} in {} (see `tranche schedules`)",
            at.describe()
        );
        Ok(ExitCode::FAILURE)
    }
}

pub async fn list(at: &DataArgs, json: bool) -> Result<ExitCode> {
    let client = open_existing(at).await?;
    let listed = tranche_schedule::list(&client).await?;
    if json {
        let rows: Vec<_> = listed.iter().map(json_row).collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if listed.is_empty() {
        println!("no schedules in {}", at.describe());
    } else {
        for l in &listed {
            println!("{}", line(l));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn zone_of(l: &Listed) -> &str {
    match l.schedule.as_ref().map(|s| &s.when) {
        Ok(When::Cron { zone, .. }) => zone,
        _ => "UTC",
    }
}

fn line(l: &Listed) -> String {
    let s = match &l.schedule {
        Ok(s) => s,
        Err(e) => return format!("{:<20} cannot be read: {e}", l.name),
    };
    let timing = match &s.when {
        When::Cron { expr, zone } => format!("cron {expr:?} in {zone}"),
        When::At(t) => format!("at {}", when(Some(*t))),
    };
    let next = match l.next_due {
        Some(t) => format!(
            "{} ({})",
            when(Some(t)),
            local_time(zone_of(l), t).unwrap_or_default()
        ),
        None => "never again".to_string(),
    };
    format!(
        "{:<20} {timing}{}\n{:<20} next due {next}; last fired {}; job {} on {} into {}",
        l.name,
        if s.skip_missed { ", skip missed" } else { "" },
        "",
        when(l.last_fired),
        s.job.kind,
        s.job.queue,
        s.run_name()
    )
}

fn json_row(l: &Listed) -> serde_json::Value {
    serde_json::json!({
        "name": l.name,
        "schedule": l.schedule.as_ref().ok(),
        "problem": l.schedule.as_ref().err(),
        "next_due": l.next_due,
        "last_fired": l.last_fired,
    })
}

/// Fire schedules from this process until `stop`: every worker and server process
/// runs one, and the backend lets exactly one of them enqueue each due time.
pub fn spawn_scheduler(client: Client, stop: &CancellationToken) -> JoinHandle<()> {
    let stop = stop.clone();
    tokio::spawn(async move {
        Scheduler::new(client)
            .run(Scheduler::DEFAULT_EVERY, stop.cancelled_owned())
            .await
    })
}
