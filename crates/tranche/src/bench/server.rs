//! `tranche bench server`: the HTTP API's figures, over a server started in this
//! process on a free loopback port (so clients and server share the machine's cores),
//! with its state in a fresh embedded database, or under a fresh prefix in the Redis
//! server given by `--broker`.
//!
//! 1. Submit: `clients` concurrent clients POST batches of `batch` jobs to
//!    `/v1/batches` until `jobs` are in: jobs/s and per-request latency.
//! 2. Remote executions: `executions` no-op jobs, `workers` HTTP workers each looping
//!    poll (max `poll_batch`) → complete: executions/s and per-job latency from the poll
//!    request to its completion being acknowledged.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tranche_server::ServerConfig;

use super::figures::{ms, percentile_of};
use super::state_dir::{stamp, StateDir};
use crate::cli::{BenchServer, DataArgs};
use crate::data::{open_redis, open_with, run_name};

#[derive(Serialize)]
struct Report {
    cores: usize,
    /// `sqlite` or `redis`.
    backend: &'static str,
    submit_jobs: u64,
    submit_batch: usize,
    submit_clients: usize,
    submit_seconds: f64,
    submit_jobs_per_sec: f64,
    submit_requests_per_sec: f64,
    submit_request_p50_ms: f64,
    submit_request_p99_ms: f64,
    executions: u64,
    workers: usize,
    poll_batch: usize,
    execution_seconds: f64,
    executions_per_sec: f64,
    poll_to_complete_p50_ms: f64,
    poll_to_complete_p99_ms: f64,
}

pub async fn server(at: &DataArgs, args: BenchServer) -> Result<ExitCode> {
    let stamp = stamp();
    let dir;
    let (backend, location, kind) = match &at.broker {
        // A fresh prefix: nothing of an earlier run is in the way.
        Some(url) => {
            let prefix = format!("{{bench-server-{stamp}}}:");
            let location = format!(
                "Redis at {} (prefix {prefix})",
                crate::output::server_address(url, 6379)
            );
            (open_redis(url, &prefix).await?, location, "redis")
        }
        None => {
            dir = StateDir::new(args.keep.then_some(&*at.data), "server")?;
            let backend = open_with(dir.path(), tranche_sqlite::SqliteOptions::default())?;
            (backend, dir.path().display().to_string(), "sqlite")
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let config = ServerConfig {
        listen: listener.local_addr()?,
        ..ServerConfig::default()
    };
    let base = format!("http://{}", config.listen);
    let stop = CancellationToken::new();
    let server = tokio::spawn(tranche_server::serve(
        listener,
        backend.clone(),
        config,
        stop.clone(),
    ));
    eprintln!("bench server: serving on {base}, state in {location}");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;

    // 1. Submit throughput.
    let run = run_name(&format!("bench/server-submit-{stamp}"))?;
    let body_for = |n: usize| {
        let items: Vec<Value> = (0..n)
            .map(|_| json!({"job": {"kind": "noop", "queue": "bench-submit"}}))
            .collect();
        serde_json::to_vec(&json!({"run": run.as_str(), "items": items}))
    };
    let full_body = Arc::new(body_for(args.batch)?);
    let requests = args.jobs.div_ceil(args.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.clients.max(1) {
        let (client, base, body, next) = (
            client.clone(),
            base.clone(),
            full_body.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let t = Instant::now();
                let resp = client
                    .post(format!("{base}/v1/batches"))
                    .header("content-type", "application/json")
                    .body(body.as_ref().clone())
                    .send()
                    .await?;
                ensure!(
                    resp.status().as_u16() == 201,
                    "submit answered {}: {}",
                    resp.status(),
                    resp.text().await.unwrap_or_default()
                );
                resp.bytes().await?;
                latencies.push(t.elapsed());
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut submit_lat = Vec::new();
    for t in tasks {
        submit_lat.extend(t.await??);
    }
    let submit_time = started.elapsed();
    submit_lat.sort_unstable();
    let submitted = requests * args.batch as u64;
    eprintln!(
        "  submitted {submitted} jobs in {:.2} s",
        submit_time.as_secs_f64()
    );

    // 2. Remote executions.
    let exec_run = run_name(&format!("bench/server-exec-{stamp}"))?;
    let mut left = args.executions;
    while left > 0 {
        let n = left.min(10_000) as usize;
        let items: Vec<Value> = (0..n)
            .map(|_| json!({"job": {"kind": "noop", "queue": "bench-exec"}}))
            .collect();
        let resp = client
            .post(format!("{base}/v1/batches"))
            .json(&json!({"run": exec_run.as_str(), "items": items}))
            .send()
            .await?;
        ensure!(
            resp.status().as_u16() == 201,
            "enqueue answered {}",
            resp.status()
        );
        left -= n as u64;
    }
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.workers.max(1) {
        let (client, base, done) = (client.clone(), base.clone(), done.clone());
        let (total, batch) = (args.executions, args.poll_batch);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while done.load(Ordering::Relaxed) < total {
                let t = Instant::now();
                let polled: Value = client
                    .post(format!("{base}/v1/workers/poll"))
                    .json(&json!({"queue": "bench-exec", "max": batch, "wait_ms": 200}))
                    .send()
                    .await?
                    .json()
                    .await?;
                let results: Vec<Value> = polled["jobs"]
                    .as_array()
                    .context("poll answer without jobs")?
                    .iter()
                    .map(|j| json!({"job": j["id"], "attempt": j["attempt"]}))
                    .collect();
                if results.is_empty() {
                    continue;
                }
                let n = results.len();
                let acks: Value = client
                    .post(format!("{base}/v1/workers/complete"))
                    .json(&json!({"results": results}))
                    .send()
                    .await?
                    .json()
                    .await?;
                ensure!(
                    acks["acks"].as_array().map(Vec::len) == Some(n),
                    "complete answered {acks}"
                );
                let took = t.elapsed();
                latencies.extend(std::iter::repeat_n(took, n));
                done.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok::<_, anyhow::Error>(latencies)
        }));
    }
    let mut exec_lat = Vec::new();
    for t in tasks {
        exec_lat.extend(t.await??);
    }
    let exec_time = started.elapsed();
    exec_lat.sort_unstable();
    let p = backend
        .run_progress(&exec_run)
        .await?
        .context("the execution run vanished")?;
    ensure!(
        p.succeeded == args.executions,
        "expected {} executions to succeed, got {}",
        args.executions,
        p.succeeded
    );
    stop.cancel();
    server.await??;

    let report = Report {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        backend: kind,
        submit_jobs: submitted,
        submit_batch: args.batch,
        submit_clients: args.clients,
        submit_seconds: submit_time.as_secs_f64(),
        submit_jobs_per_sec: submitted as f64 / submit_time.as_secs_f64(),
        submit_requests_per_sec: requests as f64 / submit_time.as_secs_f64(),
        submit_request_p50_ms: ms(percentile_of(&submit_lat, 0.50)),
        submit_request_p99_ms: ms(percentile_of(&submit_lat, 0.99)),
        executions: args.executions,
        workers: args.workers,
        poll_batch: args.poll_batch,
        execution_seconds: exec_time.as_secs_f64(),
        executions_per_sec: args.executions as f64 / exec_time.as_secs_f64(),
        poll_to_complete_p50_ms: ms(percentile_of(&exec_lat, 0.50)),
        poll_to_complete_p99_ms: ms(percentile_of(&exec_lat, 0.99)),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "submit      {} jobs in batches of {} by {} clients: {:.0} jobs/s ({:.0} requests/s), request p50 {:.1} ms p99 {:.1} ms",
            report.submit_jobs,
            report.submit_batch,
            report.submit_clients,
            report.submit_jobs_per_sec,
            report.submit_requests_per_sec,
            report.submit_request_p50_ms,
            report.submit_request_p99_ms
        );
        println!(
            "executions  {} no-op jobs by {} HTTP workers, poll batch {}: {:.0} executions/s, poll→complete p50 {:.1} ms p99 {:.1} ms",
            report.executions,
            report.workers,
            report.poll_batch,
            report.executions_per_sec,
            report.poll_to_complete_p50_ms,
            report.poll_to_complete_p99_ms
        );
        println!("cores       {} (state in {location})", report.cores);
    }
    Ok(ExitCode::SUCCESS)
}
