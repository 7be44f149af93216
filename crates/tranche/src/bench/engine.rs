//! `tranche bench engine`: the engine's own figures on the embedded backend.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use tranche_core::Engine;
use tranche_types::{BackendError, EnqueueItem, JobSpec, RunName, RunProgress};

use super::figures::{ms, peak_rss_mb, Latencies, LatencySummary};
use super::noop::{registry, worker_config};
use super::processes;
use super::rate;
use super::state_dir::{stamp, StateDir};
use crate::cli::{BenchEngine, DataArgs};
use crate::data::{open_redis, open_with, riding_outages, run_name};
use crate::output::duration;

#[derive(Serialize)]
struct Report {
    jobs: u64,
    chains: u64,
    chain_length: u32,
    full_sync: bool,
    cores: usize,
    enqueue_seconds: f64,
    enqueue_jobs_per_sec: f64,
    process_seconds: f64,
    process_jobs_per_sec: f64,
    end_to_end_jobs_per_sec: f64,
    /// 0: the jobs were worked in the bench's own process.
    worker_processes: usize,
    latency_p50_ms: f64,
    latency_p99_ms: f64,
    run_time_p50_ms: f64,
    run_time_p99_ms: f64,
    peak_rss_mb: f64,
}

/// Who works the bench's jobs.
enum Workers {
    Here(tokio::task::JoinHandle<Result<(), tranche_types::BackendError>>),
    Processes(processes::Fleet),
}

impl Workers {
    /// Stops the worker in this process, or waits for the worker processes (they stop
    /// once the run is done) and returns their latency reports.
    async fn stop(
        self,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Option<Vec<LatencySummary>>> {
        match self {
            Workers::Here(handle) => {
                stop.cancel();
                handle.await??;
                Ok(None)
            }
            Workers::Processes(fleet) => Ok(Some(fleet.finish().await?)),
        }
    }
}

/// `n` no-op jobs, or chains of `chain_length` of them.
fn noop_items(spec: &JobSpec, chain_length: u32, n: u64) -> Vec<EnqueueItem> {
    (0..n)
        .map(|_| {
            if chain_length == 1 {
                EnqueueItem::Job(spec.clone())
            } else {
                EnqueueItem::Chain(vec![spec.clone(); chain_length as usize])
            }
        })
        .collect()
}

/// After enqueues cut by a broker outage: the bench's jobs are interchangeable, so
/// counting what the run holds tells how many are missing (nobody can tell which call
/// landed), and those are enqueued again, until the run holds all `items`.
async fn top_up(
    engine: &Engine,
    run: &RunName,
    spec: &JobSpec,
    chain_length: u32,
    items: u64,
    per_call: u64,
) -> Result<()> {
    'count: loop {
        let jobs = engine
            .client()
            .run_progress(run)
            .await?
            .map_or(0, |p| p.total);
        let missing = items.saturating_sub(jobs / u64::from(chain_length));
        if missing == 0 {
            return Ok(());
        }
        eprintln!("  {missing} of {items} items lost in the broker outage: enqueueing them again");
        let mut left = missing;
        while left > 0 {
            let n = left.min(per_call);
            match engine.enqueue(run, noop_items(spec, chain_length, n)).await {
                Ok(_) => left -= n,
                Err(BackendError::Unavailable {
                    maybe_applied: true,
                    ..
                }) => continue 'count,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn progress_line(what: &str, done: u64, total: u64, started: Instant) {
    let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
    eprintln!("  {what}: {done}/{total} ({rate:.0}/s)");
}

pub async fn engine(at: &DataArgs, args: BenchEngine) -> Result<ExitCode> {
    if let Some(run) = &args.work_run {
        return processes::work(at, &args, run).await;
    }
    anyhow::ensure!(
        args.processes == 0 || at.broker.is_some(),
        "--processes needs --broker: worker processes share nothing but Redis"
    );
    let chain_length = args.chain_length.max(1);
    let total_jobs = args.jobs * u64::from(chain_length);
    let dir = StateDir::new(args.keep.then_some(&*at.data), "engine")?;
    let options = tranche_sqlite::SqliteOptions {
        full_sync: args.full_sync,
        ..Default::default()
    };
    let stamp = stamp();
    let (backend, location) = match &at.broker {
        // A fresh prefix per bench: nothing of an earlier run is in the way.
        Some(url) => {
            let prefix = format!("{{bench-{stamp}}}:");
            let location = format!(
                "Redis at {} (prefix {prefix})",
                crate::output::server_address(url, 6379)
            );
            (
                riding_outages(open_redis(url, &prefix).await?, at),
                location,
            )
        }
        None => (
            open_with(dir.path(), options)?,
            dir.path().display().to_string(),
        ),
    };
    let run = run_name(&format!("bench/engine-{stamp}"))?;
    let engine = Engine::new(backend.clone(), registry());
    eprintln!(
        "bench engine: {} {} of {chain_length} step(s) = {total_jobs} jobs, state in {}",
        args.jobs,
        if chain_length == 1 { "jobs" } else { "chains" },
        location
    );

    let spec = engine.job("noop", &())?;
    let started = Instant::now();
    let redis = at.broker.is_some();
    let per_call = args
        .enqueue_batch
        .unwrap_or(if redis { 2_000 } else { 100_000 });
    let per_call = (per_call as u64 / u64::from(chain_length)).max(1);
    let in_flight = args.enqueuers.unwrap_or(if redis { 4 } else { 1 }).max(1);
    let calls = (0..args.jobs)
        .step_by(per_call as usize)
        .map(|start| per_call.min(args.jobs - start));
    let mut enqueues = futures::stream::iter(calls)
        .map(|n| {
            let items = noop_items(&spec, chain_length, n);
            let (engine, run) = (&engine, &run);
            async move {
                match engine.enqueue(run, items).await {
                    Ok(_) => Ok((n, 0)),
                    // Cut by a broker outage: it may or may not have landed. Settled by
                    // counting once the other calls are done.
                    Err(BackendError::Unavailable {
                        maybe_applied: true,
                        ..
                    }) => Ok((0, n)),
                    Err(e) => Err(e),
                }
            }
        })
        .buffer_unordered(in_flight);
    let mut enqueued = 0u64;
    let mut unsure = 0u64;
    let mut last = Instant::now();
    while let Some((n, cut)) = enqueues.try_next().await? {
        enqueued += n;
        unsure += cut;
        // bench/engine-vs-asynq-tasqueue.sh reads Redis memory on the final line.
        if enqueued == args.jobs || last.elapsed() >= Duration::from_secs(1) {
            progress_line(
                "enqueued",
                enqueued * u64::from(chain_length),
                total_jobs,
                started,
            );
            last = Instant::now();
        }
    }
    drop(enqueues);
    if unsure > 0 {
        top_up(&engine, &run, &spec, chain_length, args.jobs, per_call).await?;
        progress_line("enqueued", total_jobs, total_jobs, started);
    }
    let enqueue_time = started.elapsed();

    if args.rate_limited {
        rate::limit(engine.client(), "default", args.rate).await?;
    }
    let stop = tranche_core::on_terminate();
    let process_started = Instant::now();
    let mut progress = |p: &RunProgress| {
        if last.elapsed() >= Duration::from_secs(1) {
            progress_line("processed", p.ended(), total_jobs, process_started);
            last = Instant::now();
        }
    };
    let latencies = Arc::new(Latencies::default());
    let workers = if args.processes > 0 {
        let prefix = format!("{{bench-{stamp}}}:");
        Workers::Processes(processes::start(at, &prefix, &run, &args)?)
    } else {
        let worker = engine.worker(worker_config(&args, &latencies))?;
        let s = stop.clone();
        Workers::Here(tokio::spawn(async move { worker.run(s).await }))
    };
    let client = backend.clone();
    let finished = client.wait_finished(&run, Duration::from_millis(50), None, &mut progress);
    let p: RunProgress = tokio::select! {
        p = finished => p?,
        _ = stop.cancelled() => {
            // Graceful shutdown: the workers (worker processes got the same signal)
            // finish or hand back what they hold.
            if let Err(e) = workers.stop(&stop).await {
                eprintln!("warning: {e:#}");
            }
            let p = backend.run_progress(&run).await?.unwrap_or_default();
            eprintln!(
                "interrupted: {} of {total_jobs} jobs done, {} running; state in {location}",
                p.ended(),
                p.running,
            );
            return Ok(ExitCode::from(130));
        }
    };
    // Timed when the last result is durable: stopping the workers waits out their idle
    // reserve calls, which are not part of the work.
    let process_time = process_started.elapsed();
    let children = workers.stop(&stop).await?;

    // Worker processes report their own percentiles; the highest of each is shown (an
    // upper bound on the fleet's, since each saw an equal share).
    let lat = match &children {
        Some(reports) => processes::worst(reports),
        None => latencies.summary(),
    };
    let report = Report {
        jobs: total_jobs,
        chains: if chain_length > 1 { args.jobs } else { 0 },
        chain_length,
        full_sync: args.full_sync,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        enqueue_seconds: enqueue_time.as_secs_f64(),
        enqueue_jobs_per_sec: total_jobs as f64 / enqueue_time.as_secs_f64(),
        process_seconds: process_time.as_secs_f64(),
        process_jobs_per_sec: total_jobs as f64 / process_time.as_secs_f64(),
        end_to_end_jobs_per_sec: total_jobs as f64 / (enqueue_time + process_time).as_secs_f64(),
        worker_processes: args.processes,
        latency_p50_ms: ms(lat.queue_p50),
        latency_p99_ms: ms(lat.queue_p99),
        run_time_p50_ms: ms(lat.run_p50),
        run_time_p99_ms: ms(lat.run_p99),
        peak_rss_mb: peak_rss_mb(),
    };
    anyhow::ensure!(
        p.succeeded == total_jobs,
        "expected {total_jobs} jobs to succeed, got {} (failed {}, cancelled {})",
        p.succeeded,
        p.failed,
        p.cancelled
    );
    let rate = if args.rate_limited {
        let starts = rate::starts(engine.client(), &run).await?;
        Some(rate::report(starts, args.rate)?)
    } else {
        None
    };
    if args.json {
        match &rate {
            Some(rate) => println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({"engine": report, "rate": rate}))?
            ),
            None => println!("{}", serde_json::to_string_pretty(&report)?),
        }
    } else {
        println!(
            "jobs                 {} ({} chains of {})",
            report.jobs, report.chains, chain_length
        );
        println!("cores                {}", report.cores);
        println!(
            "enqueue              {} ({:.0} jobs/s)",
            duration(enqueue_time),
            report.enqueue_jobs_per_sec
        );
        println!(
            "process              {} ({:.0} jobs/s, {:.0} jobs/s per core)",
            duration(process_time),
            report.process_jobs_per_sec,
            report.process_jobs_per_sec / report.cores as f64
        );
        println!(
            "end to end           {:.0} jobs/s (enqueue + process)",
            report.end_to_end_jobs_per_sec
        );
        println!(
            "latency runnable→done p50 {:.1} ms  p99 {:.1} ms",
            report.latency_p50_ms, report.latency_p99_ms
        );
        println!(
            "latency started→done  p50 {:.2} ms  p99 {:.2} ms",
            report.run_time_p50_ms, report.run_time_p99_ms
        );
        println!("peak RSS             {:.0} MB", report.peak_rss_mb);
        if let Some(r) = &rate {
            println!(
                "start rate           {:.0}/s measured over {} s, limit {}/s ({:+.2} %); busiest 1 s window {} starts",
                r.measured_per_sec, r.windows_measured, r.limit_per_sec, r.deviation_pct, r.busiest_window
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
