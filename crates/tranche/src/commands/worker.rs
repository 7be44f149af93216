//! `tranche worker`: one machine of a fleet. Serves the contract-note queues it is
//! given for every night submitted to the shared broker, until SIGINT/SIGTERM, when it
//! finishes what it holds within the grace period and hands the rest back.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Result};
use tranche_notes::pipeline::{StepCounts, STEPS};

use crate::cli::{DataArgs, WorkerArgs};
use crate::data::{open, riding_outages};
use crate::notes_setup::{open_store, setup, RunOptions};

pub async fn worker(at: &DataArgs, args: WorkerArgs) -> Result<ExitCode> {
    for q in &args.queues {
        if !STEPS.iter().any(|s| s.queue == q) {
            let known: Vec<&str> = STEPS.iter().map(|s| s.queue).collect();
            bail!(
                "--queues: unknown queue {q:?}; expected some of {}",
                known.join(", ")
            );
        }
    }
    let options = RunOptions::new(&args.out, &args.steps, args.queues.clone());
    let store = open_store(&options)?;
    let steps = setup(&options, store)?;
    let backend = riding_outages(open(at).await?, at);
    let schedules = backend.clone();
    let counts = Arc::new(StepCounts::default());
    let worker = options
        .workers
        .worker(backend, steps.source.clone(), counts.clone())?;
    let mut notes = vec![format!(
        "tranche worker: queues {} on {}",
        args.queues.join(","),
        at.describe()
    )];
    if args.queues.iter().any(|q| q == "sign") {
        notes.push(steps.signer_note.clone());
    }
    if args.queues.iter().any(|q| q == "mail") {
        notes.push(steps.mail_to.clone());
    }
    eprintln!("{}", notes.join("; "));
    let stop = tranche_core::on_terminate();
    let scheduler = super::spawn_scheduler(schedules, &stop);
    worker.run(stop.clone()).await?;
    stop.cancel();
    let _ = scheduler.await;
    steps.source.mailer.close().await;
    eprintln!("tranche worker stopped: {}", counts.summary());
    Ok(ExitCode::SUCCESS)
}
