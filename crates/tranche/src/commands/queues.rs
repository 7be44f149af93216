//! `tranche queues`, `tranche pause QUEUE`, `tranche resume QUEUE`: what waits in each
//! queue, and holding a queue's work back (every worker of every process sharing the
//! state stops taking it) without losing anything in flight.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cli::DataArgs;
use crate::data::open_existing;

#[derive(Serialize, Default)]
struct QueueLine {
    queue: String,
    available: u64,
    running: u64,
    paused: bool,
}

pub async fn list(at: &DataArgs, json: bool) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let (depths, paused) = tokio::try_join!(backend.queue_depths(), backend.paused_queues())?;
    let mut by_queue: BTreeMap<String, QueueLine> = BTreeMap::new();
    for d in depths {
        by_queue.insert(
            d.queue.clone(),
            QueueLine {
                queue: d.queue,
                available: d.available,
                running: d.running,
                paused: false,
            },
        );
    }
    // A paused queue is listed even with no jobs: that is how it gets resumed.
    for queue in paused {
        by_queue
            .entry(queue.clone())
            .or_insert_with(|| QueueLine {
                queue,
                ..QueueLine::default()
            })
            .paused = true;
    }
    let lines: Vec<QueueLine> = by_queue.into_values().collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&lines)?);
    } else if lines.is_empty() {
        println!("no jobs waiting or running in {}", at.describe());
    } else {
        println!("{:<24} {:>10} {:>10}", "QUEUE", "AVAILABLE", "RUNNING");
        for l in &lines {
            let flag = if l.paused { "  paused" } else { "" };
            println!(
                "{:<24} {:>10} {:>10}{flag}",
                l.queue, l.available, l.running
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn pause(at: &DataArgs, queue: &str) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let changed = backend
        .pause_queue(queue)
        .await
        .with_context(|| format!("could not pause queue {queue:?}"))?;
    if changed {
        println!(
            "paused queue {queue}: no worker takes its jobs until `tranche {} resume {queue}`; running jobs finish, new ones wait",
            at.as_args()
        );
    } else {
        println!("queue {queue} was already paused");
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn resume(at: &DataArgs, queue: &str) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let changed = backend
        .resume_queue(queue)
        .await
        .with_context(|| format!("could not resume queue {queue:?}"))?;
    if changed {
        println!("resumed queue {queue}: its jobs are runnable again");
    } else {
        println!("queue {queue} was not paused");
    }
    Ok(ExitCode::SUCCESS)
}
