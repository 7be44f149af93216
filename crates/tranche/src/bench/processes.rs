//! `tranche bench engine --broker … --processes N`: the jobs are worked by N worker
//! processes (this binary again) that share nothing with the bench but Redis, as a
//! fleet's machines would. Each works until the run is done and prints its latency
//! percentiles as one JSON line on stdout.

use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tranche_core::Engine;
use tranche_types::RunName;

use super::figures::{Latencies, LatencySummary};
use super::noop::{registry, worker_config};
use crate::cli::{BenchEngine, DataArgs};
use crate::data::{open_redis, riding_outages, run_name};

pub struct Fleet {
    children: Vec<tokio::process::Child>,
}

/// Starts the worker processes on `run`, under the bench's key prefix.
pub fn start(at: &DataArgs, prefix: &str, run: &RunName, args: &BenchEngine) -> Result<Fleet> {
    let url = at.broker.as_deref().unwrap_or_default();
    let reconnect_for = at.reconnect_for;
    let exe = std::env::current_exe().context("could not find this program to start workers")?;
    let children = (1..=args.processes)
        .map(|i| {
            tokio::process::Command::new(&exe)
                .args(["--broker", url, "--prefix", prefix, "bench", "engine"])
                .args(["--work-run", run.as_str()])
                .args(["--reconnect-for", &reconnect_for.to_string()])
                .args(["--concurrency", &args.concurrency.to_string()])
                .args(["--batch", &args.batch.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("could not start worker process {i}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Fleet { children })
}

impl Fleet {
    /// Waits for every worker process (they stop once the run is done) and reads
    /// their reports.
    pub async fn finish(self) -> Result<Vec<LatencySummary>> {
        let mut reports = Vec::with_capacity(self.children.len());
        for (i, child) in self.children.into_iter().enumerate() {
            let out = child.wait_with_output().await?;
            anyhow::ensure!(
                out.status.success(),
                "worker process {} failed ({})",
                i + 1,
                out.status
            );
            reports.push(
                serde_json::from_slice(&out.stdout)
                    .with_context(|| format!("worker process {} sent no report", i + 1))?,
            );
        }
        Ok(reports)
    }
}

/// The highest of each percentile across the worker processes.
pub fn worst(reports: &[LatencySummary]) -> LatencySummary {
    reports
        .iter()
        .fold(LatencySummary::default(), |a, r| LatencySummary {
            queue_p50: a.queue_p50.max(r.queue_p50),
            queue_p99: a.queue_p99.max(r.queue_p99),
            run_p50: a.run_p50.max(r.run_p50),
            run_p99: a.run_p99.max(r.run_p99),
        })
}

/// One worker process: works the run's jobs until the run is done (or it is told to
/// stop), then prints its latency percentiles.
pub async fn work(at: &DataArgs, args: &BenchEngine, run: &str) -> Result<ExitCode> {
    let url = at
        .broker
        .as_deref()
        .context("a bench worker process needs --broker")?;
    let backend = riding_outages(open_redis(url, &at.prefix).await?, at);
    let run = run_name(run)?;
    let engine = Engine::new(backend.clone(), registry());
    let latencies = Arc::new(Latencies::default());
    let worker = engine.worker(worker_config(args, &latencies))?;
    let stop = tranche_core::on_terminate();
    let s = stop.clone();
    let handle = tokio::spawn(async move { worker.run(s).await });
    let done = engine
        .client()
        .wait_finished(&run, Duration::from_millis(50), None, |_| {});
    tokio::select! {
        p = done => { p?; }
        _ = stop.cancelled() => {}
    }
    stop.cancel();
    handle.await??;
    println!("{}", serde_json::to_string(&latencies.summary())?);
    Ok(ExitCode::SUCCESS)
}
