//! Metrics in Prometheus text format (`/metrics`) through the `metrics` facade, plus
//! `/healthz` (the process answers) and `/readyz` (the backend answers).
//!
//! Two sources. What the backend records for every job, whoever works it (attempts
//! started, outcomes, retries, lease expiries, wait and run times per queue: see
//! [`crate::queue_stats`]) and gauges of its state (jobs per queue and state, runs'
//! counters) are read from the backend at scrape time, which costs O(queues +
//! available + running). What only this process sees (submissions, jobs handed to and
//! reported by remote workers over HTTP, HTTP requests) is recorded where it happens
//! through the `metrics` facade; its recorder is process-wide (the facade has one
//! global recorder), so several servers in one process share those figures.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing::Instrument;
use tranche_types::LATENCY_BUCKETS_MS;

use crate::queue_stats;
use crate::state::AppState;

pub const SUBMITTED: &str = "tranche_jobs_submitted_total";
pub const SUBMIT_REFUSED: &str = "tranche_submissions_refused_total";
pub const HTTP_POLLED: &str = "tranche_http_jobs_polled_total";
pub const HTTP_REPORTED: &str = "tranche_http_jobs_reported_total";
pub const HTTP_LEASES_LOST: &str = "tranche_http_leases_lost_total";
pub const JOBS: &str = "tranche_jobs";
pub const QUEUE_DEPTH: &str = "tranche_queue_depth";
pub const RUN_JOBS: &str = "tranche_run_jobs";
pub const HTTP_REQUESTS: &str = "tranche_http_requests_total";
pub const HTTP_DURATION: &str = "tranche_http_request_duration_seconds";

/// How many of the newest runs get per-run gauges (label cardinality stays bounded).
const RUNS_IN_METRICS: usize = 20;

/// The HTTP request histogram's bounds (seconds): the backend's latency buckets.
fn buckets() -> Vec<f64> {
    LATENCY_BUCKETS_MS.iter().map(|ms| ms / 1000.0).collect()
}

/// The process-wide recorder, installed on first use.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(&buckets())
            .expect("bucket list is not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "another metrics recorder is installed; /metrics shows only backend gauges"
            );
        }
        describe();
        handle
    })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(SUBMITTED, "Jobs accepted through the submit API, by queue.");
    describe_counter!(
        SUBMIT_REFUSED,
        "Submissions refused (429) because a queue was full."
    );
    describe_counter!(
        HTTP_POLLED,
        "Jobs handed to remote workers by this process's poll endpoint, by queue."
    );
    describe_counter!(
        HTTP_REPORTED,
        "Attempt results reported through this process's complete and fail endpoints and applied, by outcome."
    );
    describe_counter!(HTTP_LEASES_LOST, "Heartbeats and reports through this process refused because the attempt no longer held its job (its lease expired, or the job was cancelled).");
    describe_gauge!(
        JOBS,
        "Jobs waiting (available) and running, by queue and state."
    );
    describe_gauge!(QUEUE_DEPTH, "Available jobs per queue.");
    describe_gauge!(RUN_JOBS, "Jobs of the newest runs, by run and state.");
    describe_counter!(HTTP_REQUESTS, "HTTP requests, by method, route and status.");
    describe_histogram!(
        HTTP_DURATION,
        Unit::Seconds,
        "HTTP request handling time, by method and route."
    );
}

/// Keeps histogram data bounded between scrapes.
pub fn spawn_upkeep(stop: tokio_util::sync::CancellationToken) {
    let handle = handle();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = tick.tick() => handle.run_upkeep(),
                _ = stop.cancelled() => break,
            }
        }
    });
}

pub async fn track_http(req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let start = Instant::now();
    // What is logged while answering (a server error's cause) names the request.
    let span = match tranche_core::trace::propagator() {
        None => tracing::info_span!("http", method = %method, route = %route),
        // Exported as the request's span (docs/traces.md): jobs it enqueues continue it.
        Some(p) => {
            let span = tracing::info_span!(
                "http",
                method = %method,
                route = %route,
                otel.name = %format_args!("{method} {route}"),
                otel.kind = "server",
                http.request.method = %method,
                http.route = %route,
                http.response.status_code = tracing::field::Empty,
            );
            if let Some(parent) = req
                .headers()
                .get("traceparent")
                .and_then(|v| v.to_str().ok())
            {
                p.continue_trace(&span, parent);
            }
            span
        }
    };
    let resp = next.run(req).instrument(span.clone()).await;
    span.record("http.response.status_code", resp.status().as_u16());
    let status = resp.status().as_u16().to_string();
    metrics::histogram!(HTTP_DURATION, "method" => method.clone(), "route" => route.clone())
        .record(start.elapsed().as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "method" => method, "route" => route, "status" => status)
        .increment(1);
    resp
}

/// Prometheus text format metrics.
///
/// Jobs by queue and state, per-queue attempts, outcomes, retries, lease expiries and
/// wait/run histograms (from the backend: every worker's jobs), runs' jobs,
/// submissions, remote-worker traffic and HTTP requests.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "service",
    responses((status = 200, description = "metrics", body = String, content_type = "text/plain"))
)]
pub async fn metrics_text(State(app): State<AppState>) -> Response {
    let backend = app.backend();
    match backend.queue_depths().await {
        Ok(depths) => {
            // A queue that emptied is absent from the answer; its gauges must drop to
            // zero rather than keep their last value.
            static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
            let mut seen = SEEN.lock().expect("seen queues lock");
            for q in seen.iter() {
                if !depths.iter().any(|d| &d.queue == q) {
                    metrics::gauge!(QUEUE_DEPTH, "queue" => q.clone()).set(0.0);
                    metrics::gauge!(JOBS, "queue" => q.clone(), "state" => "available").set(0.0);
                    metrics::gauge!(JOBS, "queue" => q.clone(), "state" => "running").set(0.0);
                }
            }
            for d in &depths {
                if !seen.contains(&d.queue) {
                    seen.push(d.queue.clone());
                }
            }
            drop(seen);
            for d in depths {
                metrics::gauge!(QUEUE_DEPTH, "queue" => d.queue.clone()).set(d.available as f64);
                metrics::gauge!(JOBS, "queue" => d.queue.clone(), "state" => "available")
                    .set(d.available as f64);
                metrics::gauge!(JOBS, "queue" => d.queue, "state" => "running")
                    .set(d.running as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read queue depths for /metrics"),
    }
    match backend.list_runs(RUNS_IN_METRICS).await {
        Ok(runs) => {
            for p in runs {
                let Some(run) = p.run.as_ref().map(|r| r.to_string()) else {
                    continue;
                };
                for (state, n) in [
                    ("pending", p.pending),
                    ("available", p.available),
                    ("running", p.running),
                    ("succeeded", p.succeeded),
                    ("failed", p.failed),
                    ("cancelled", p.cancelled),
                ] {
                    metrics::gauge!(RUN_JOBS, "run" => run.clone(), "state" => state).set(n as f64);
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not read runs for /metrics"),
    }
    let mut text = handle().render();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match backend.queue_stats().await {
        Ok(stats) => text.push_str(&queue_stats::render(&stats)),
        Err(e) => tracing::warn!(error = %e, "could not read queue statistics for /metrics"),
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// The process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "service",
    responses((status = 200, description = "ok", body = String, content_type = "text/plain"))
)]
pub async fn healthz() -> &'static str {
    "ok\n"
}

/// The backend answers.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "service",
    responses(
        (status = 200, description = "ready", body = String, content_type = "text/plain"),
        (status = 503, description = "backend not ready (why is in the server log, under the request id given)", body = String, content_type = "text/plain"),
    )
)]
pub async fn readyz(State(app): State<AppState>) -> Response {
    let probe = tokio::time::timeout(Duration::from_secs(2), app.backend().list_runs(1)).await;
    match probe {
        Ok(Ok(_)) => "ready\n".into_response(),
        // The probe is open to anyone: why the backend failed goes to the log only.
        Ok(Err(e)) => {
            let request_id = crate::error::request_id();
            tracing::warn!(%request_id, error = %crate::error::Chain(&e), "backend not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("backend not ready (request id {request_id})\n"),
            )
                .into_response()
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "backend did not answer within 2 s\n",
        )
            .into_response(),
    }
}
