//! `tranche bench browse`: how long browsing takes on a big store. It fills a fresh
//! store with N jobs over many runs (four kinds on two queues; one job in
//! `--fail-every` fails; the last run is left waiting, so the newest jobs are
//! available), then times what an operator does during a night: one job by id, a
//! page of the job list with each filter, and gathering the first 50 matches the way
//! `tranche jobs` and the dashboard do (following short pages' cursors).
//!
//! Listing keeps no index of its own (see `Backend::list_jobs`), so a page's cost is
//! bounded but a rare filter walks windows: the gathering figures show what that costs
//! a user on this store.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use rand::{RngExt as _, SeedableRng};
use serde::Serialize;
use tranche_core::{Client, Engine, Registry, TaskOptions, WorkerConfig};
use tranche_types::{EnqueueItem, JobFilter, JobId, JobSpec, JobState, Outcome, RunName};

use super::figures::ms;
use super::state_dir::{stamp, StateDir};
use crate::cli::{BenchBrowse, DataArgs};
use crate::data::{open_redis, open_with, run_name};

const KINDS: [&str; 4] = ["statement", "contract-note", "ledger-post", "mail"];
const QUEUES: [&str; 2] = ["docs", "io"];
/// Jobs a page asks for: the dashboard's and `tranche jobs`' default.
const PAGE: usize = 50;

#[derive(Serialize)]
struct Timing {
    query: String,
    samples: usize,
    /// Backend calls per sample (more than one when short pages were followed).
    calls_per_sample: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Jobs found per sample, on average.
    found: f64,
}

#[derive(Serialize)]
struct Report {
    jobs: u64,
    runs: u64,
    failed: u64,
    available: u64,
    fill_seconds: f64,
    timings: Vec<Timing>,
}

fn registry(fail_every: u64) -> Registry {
    let mut registry = Registry::new();
    for (i, kind) in KINDS.into_iter().enumerate() {
        let options = TaskOptions::default()
            .queue(QUEUES[i % QUEUES.len()])
            .max_attempts(1);
        registry.register(kind, options, move |_ctx, n: u64| async move {
            if n.is_multiple_of(fail_every) {
                Outcome::Discard(format!("job {n} fails on purpose (one in {fail_every})"))
            } else {
                Outcome::Complete(())
            }
        });
    }
    registry
}

/// Job `n` of the store: its kind (and so its queue) turns with `n`.
fn item(n: u64) -> EnqueueItem {
    let kind = KINDS[(n % KINDS.len() as u64) as usize];
    let mut spec = JobSpec::new(kind, n.to_string());
    spec.queue = QUEUES[(n % KINDS.len() as u64) as usize % QUEUES.len()].to_string();
    spec.max_attempts = 1;
    EnqueueItem::Job(spec)
}

fn run_of(i: u64) -> Result<RunName> {
    run_name(&format!("bench/browse-{i:04}"))
}

/// Enqueues the jobs of runs `runs`; with `worked`, waits for each run to finish
/// before the next (a worker is running).
async fn fill(
    engine: &Engine,
    args: &BenchBrowse,
    redis: bool,
    runs: std::ops::Range<u64>,
    worked: bool,
) -> Result<()> {
    let per_run = args.jobs / args.runs;
    let per_call: u64 = if redis { 2_000 } else { 100_000 };
    let in_flight = if redis { 4 } else { 1 };
    let started = Instant::now();
    let mut last = Instant::now();
    let from = runs.start * per_run;
    let mut enqueued = from;
    for r in runs {
        let run = run_of(r)?;
        let first = r * per_run;
        let count = if r + 1 == args.runs {
            args.jobs - first
        } else {
            per_run
        };
        let calls = (first..first + count)
            .step_by(per_call as usize)
            .map(|start| (start, per_call.min(first + count - start)));
        let mut enqueues = futures::stream::iter(calls)
            .map(|(start, n)| {
                let (engine, run) = (engine, &run);
                async move {
                    let items: Vec<_> = (start..start + n).map(item).collect();
                    engine.enqueue(run, items).await.map(|_| n)
                }
            })
            .buffer_unordered(in_flight);
        while let Some(n) = enqueues.try_next().await? {
            enqueued += n;
            if last.elapsed() >= Duration::from_secs(2) {
                let rate = (enqueued - from) as f64 / started.elapsed().as_secs_f64();
                eprintln!("  enqueued {enqueued}/{} ({rate:.0}/s)", args.jobs);
                last = Instant::now();
            }
        }
        if worked {
            let client = engine.client();
            client
                .wait_finished(
                    &run,
                    Duration::from_millis(50),
                    None,
                    &mut |_: &tranche_types::RunProgress| {},
                )
                .await?;
        }
    }
    Ok(())
}

/// Times `samples` calls of `one`, which returns (backend calls, jobs found).
async fn time<F, Fut>(query: &str, samples: usize, mut one: F) -> Result<Timing>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<(usize, usize)>>,
{
    let mut took = Vec::with_capacity(samples);
    let (mut calls, mut found) = (0usize, 0usize);
    for i in 0..samples {
        let started = Instant::now();
        let (c, f) = one(i).await?;
        took.push(started.elapsed());
        calls += c;
        found += f;
    }
    took.sort_unstable();
    let at = |p: f64| took[((took.len() as f64 * p).ceil() as usize).clamp(1, took.len()) - 1];
    let t = Timing {
        query: query.to_string(),
        samples,
        calls_per_sample: calls as f64 / samples as f64,
        p50_ms: ms(at(0.50)),
        p99_ms: ms(at(0.99)),
        max_ms: ms(took[took.len() - 1]),
        found: found as f64 / samples as f64,
    };
    eprintln!(
        "  {:<52} p50 {:>8.2} ms  p99 {:>8.2} ms  ({:.1} calls, {:.0} found)",
        t.query, t.p50_ms, t.p99_ms, t.calls_per_sample, t.found
    );
    Ok(t)
}

/// Up to `PAGE` jobs from `after`, following short pages as `tranche jobs` does:
/// (backend calls, jobs found).
async fn gather(
    client: &Client,
    filter: &JobFilter,
    after: Option<JobId>,
) -> Result<(usize, usize)> {
    let (mut calls, mut found, mut after) = (0, 0, after);
    loop {
        let page = client.list_jobs(filter, after, PAGE - found).await?;
        calls += 1;
        found += page.jobs.len();
        match page.next {
            Some(next) if found < PAGE => after = Some(next),
            _ => return Ok((calls, found)),
        }
    }
}

pub async fn browse(at: &DataArgs, args: BenchBrowse) -> Result<ExitCode> {
    anyhow::ensure!(
        args.runs >= 2,
        "--runs must be at least 2 (the last is left waiting)"
    );
    anyhow::ensure!(args.jobs >= args.runs, "--jobs must be at least --runs");
    let dir = StateDir::new(args.keep.then_some(&*at.data), "browse")?;
    let stamp = stamp();
    let redis = at.broker.is_some();
    let client = match &at.broker {
        Some(url) => open_redis(url, &format!("{{bench-browse-{stamp}}}:")).await?,
        None => open_with(dir.path(), Default::default())?,
    };
    let engine = Engine::new(client.clone(), registry(args.fail_every.max(1)));
    eprintln!(
        "bench browse: filling {} jobs in {} runs ({})",
        args.jobs,
        args.runs,
        if redis { "Redis" } else { "embedded SQLite" }
    );
    let stop = tranche_core::on_terminate();
    let worker = engine.worker(
        WorkerConfig {
            batch: 1024,
            ..WorkerConfig::default()
        }
        .queues(QUEUES, 2048),
    )?;
    let s = stop.clone();
    let working = tokio::spawn(async move { worker.run(s).await });
    let fill_started = Instant::now();
    // Every run but the last is worked before the next is enqueued; the last is
    // enqueued with the worker stopped, so the newest jobs are the ones waiting, as in
    // a store during a night.
    let filled = fill(&engine, &args, redis, 0..args.runs - 1, true).await;
    stop.cancel();
    working.await??;
    filled?;
    fill(&engine, &args, redis, args.runs - 1..args.runs, false).await?;
    let fill_time = fill_started.elapsed();
    eprintln!("  filled in {:.0} s; timing", fill_time.as_secs_f64());

    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let top = args.jobs as i64;
    let n = args.samples.max(1);
    let mid_run = run_of(args.runs / 2)?;
    let last_run = run_of(args.runs - 1)?;
    let random_ids: Vec<i64> = (0..n).map(|_| rng.random_range(1..=top)).collect();
    let deep = |i: usize| Some(JobId(random_ids[i] - 1));
    let by = |run: Option<&RunName>,
              state: Option<JobState>,
              queue: Option<&str>,
              kind: Option<&str>| JobFilter {
        run: run.cloned(),
        state,
        queue: queue.map(str::to_string),
        kind: kind.map(str::to_string),
    };
    let page = |filter: JobFilter, after: Option<JobId>| {
        let client = client.clone();
        async move {
            let p = client.list_jobs(&filter, after, PAGE).await?;
            Ok::<_, anyhow::Error>((1, p.jobs.len()))
        }
    };
    let mut timings = Vec::new();
    timings.push(
        time("one job by id (random)", n, |i| {
            let client = client.clone();
            let id = random_ids[i];
            async move {
                let job = client.job(JobId(id)).await?;
                Ok((1, usize::from(job.is_some())))
            }
        })
        .await?,
    );
    timings.push(
        time("page, no filter, from a random id", n, |i| {
            page(by(None, None, None, None), deep(i))
        })
        .await?,
    );
    timings.push(
        time("page, run (middle run), from its start", n, |_| {
            page(by(Some(&mid_run), None, None, None), None)
        })
        .await?,
    );
    timings.push(
        time("page, queue + kind, from a random id", n, |i| {
            page(by(None, None, Some("docs"), Some("ledger-post")), deep(i))
        })
        .await?,
    );
    timings.push(
        time("page, state failed, from a random id", n, |i| {
            page(by(None, Some(JobState::Failed), None, None), deep(i))
        })
        .await?,
    );
    let gathered = |filter: JobFilter, after: Option<JobId>| {
        let client = client.clone();
        async move { gather(&client, &filter, after).await }
    };
    timings.push(
        time("first 50 failed, whole store", n, |_| {
            gathered(by(None, Some(JobState::Failed), None, None), None)
        })
        .await?,
    );
    timings.push(
        time("first 50 failed of the middle run", n, |_| {
            gathered(by(Some(&mid_run), Some(JobState::Failed), None, None), None)
        })
        .await?,
    );
    timings.push(
        time("first 50 available, whole store (newest run)", n, |_| {
            gathered(by(None, Some(JobState::Available), None, None), None)
        })
        .await?,
    );
    timings.push(
        time("first 50 available of the newest run", n, |_| {
            gathered(
                by(Some(&last_run), Some(JobState::Available), None, None),
                None,
            )
        })
        .await?,
    );

    let per_run = args.jobs / args.runs;
    let report = Report {
        jobs: args.jobs,
        runs: args.runs,
        failed: ((args.runs - 1) * per_run).div_ceil(args.fail_every.max(1)),
        available: args.jobs - (args.runs - 1) * per_run,
        fill_seconds: fill_time.as_secs_f64(),
        timings,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} jobs in {} runs: {} failed, {} available (the newest run); filled in {:.0} s",
            report.jobs, report.runs, report.failed, report.available, report.fill_seconds
        );
        println!(
            "{:<52} {:>10} {:>10} {:>10} {:>7} {:>6}",
            "query", "p50 ms", "p99 ms", "max ms", "calls", "found"
        );
        for t in &report.timings {
            println!(
                "{:<52} {:>10.2} {:>10.2} {:>10.2} {:>7.1} {:>6.0}",
                t.query, t.p50_ms, t.p99_ms, t.max_ms, t.calls_per_sample, t.found
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
