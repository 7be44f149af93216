//! Remote workers, in any language: `poll` leases a batch with a long-poll, `heartbeat`
//! extends leases, `complete` and `fail` report results in batches. Lease rules are
//! the engine's: a worker that stops heartbeating loses its jobs to other pollers once
//! the lease expires, and a late report for a lost attempt is answered `stale`.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use tranche_core::Backoff;
use tranche_types::{Completion, CompletionAck, LeaseRef, ReservedJob, Resolution};
use utoipa::ToSchema;

use crate::body::Json;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::longpoll;
use crate::state::AppState;
use crate::telemetry;
use crate::wire::{LeaseIn, PolledJob};

/// Body of `POST /v1/workers/poll`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PollIn {
    /// The queue to take jobs from; at most 128 bytes.
    #[serde(deserialize_with = "crate::wire::queue")]
    #[schema(min_length = 1, max_length = 128)]
    queue: String,
    /// Most jobs to return (at most the server's `max_poll`, 1000 by default).
    #[serde(default = "default_max")]
    #[schema(default = default_max, minimum = 1)]
    max: usize,
    /// How long to wait for `max` jobs, in milliseconds (at most the server's
    /// `max_wait`, 60000 by default).
    #[serde(default)]
    #[schema(default = 0)]
    wait_ms: u64,
    /// Lease length in milliseconds (default: the server's, 30000 unless configured);
    /// the worker must heartbeat well within it.
    #[serde(default)]
    #[schema(minimum = 1000, maximum = 3600000)]
    lease_ms: Option<u64>,
}

fn default_max() -> usize {
    10
}

#[derive(Serialize, ToSchema)]
pub struct PollOut {
    /// Leased to the caller, at most `max`; empty only when `wait_ms` passed with
    /// nothing ready. Heartbeat each before its `lease_until`, then complete or fail it.
    jobs: Vec<PolledJob>,
}

/// Lease up to `max` jobs of a queue; returns as soon as `max` are leased or `wait_ms`
/// has passed, never empty before.
#[utoipa::path(
    post,
    path = "/v1/workers/poll",
    operation_id = "poll",
    tag = "workers",
    request_body = PollIn,
    responses(
        (status = 200, description = "OK", body = PollOut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn poll(
    State(app): State<AppState>,
    Json(req): Json<PollIn>,
) -> Result<axum::Json<PollOut>, ApiError> {
    let config = app.config();
    if req.queue.is_empty() {
        return Err(ApiError::invalid(
            "queue",
            "expected a queue name, got \"\"",
        ));
    }
    if req.max == 0 || req.max > config.max_poll {
        return Err(ApiError::invalid(
            "max",
            format!("expected 1 to {}, got {}", config.max_poll, req.max),
        ));
    }
    let wait = Duration::from_millis(req.wait_ms);
    if wait > config.max_wait {
        return Err(ApiError::invalid(
            "wait_ms",
            format!(
                "expected at most {}, got {}",
                config.max_wait.as_millis(),
                req.wait_ms
            ),
        ));
    }
    let lease = req
        .lease_ms
        .map_or(config.default_lease, Duration::from_millis);
    if lease < Duration::from_secs(1) || lease > Duration::from_secs(3600) {
        return Err(ApiError::invalid(
            "lease_ms",
            format!("expected 1000 to 3600000, got {}", lease.as_millis()),
        ));
    }
    // The poll runs in its own task: if the client goes away mid-wait, this handler is
    // dropped, and jobs leased for it are handed straight back instead of waiting out
    // their lease.
    let (tx, rx) = oneshot::channel();
    let task_app = app.clone();
    tokio::spawn(async move {
        let result = longpoll::collect(&task_app, req.queue, req.max, wait, lease).await;
        if let Err(Ok(jobs)) = tx.send(result) {
            let leases: Vec<LeaseRef> = jobs.iter().map(ReservedJob::lease).collect();
            if !leases.is_empty() {
                if let Err(e) = task_app.backend().worker_protocol().release(leases).await {
                    tracing::warn!(error = %e, "could not hand back jobs of a vanished poller; their leases will expire");
                }
            }
        }
    });
    let jobs = rx.await.map_err(|e| {
        ApiError::server(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "the poll task stopped",
            e,
        )
    })??;
    if let Some(first) = jobs.first() {
        metrics::counter!(telemetry::HTTP_POLLED, "queue" => first.queue.clone())
            .increment(jobs.len() as u64);
    }
    Ok(axum::Json(PollOut {
        jobs: jobs.into_iter().map(PolledJob::from).collect(),
    }))
}

/// Body of `POST /v1/workers/heartbeat`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatIn {
    /// The leases to extend, as polled; at most the server's `max_jobs_per_request`
    /// (10,000 by default).
    leases: Vec<LeaseIn>,
    /// New lease length in milliseconds from now (default: the server's).
    #[serde(default)]
    #[schema(minimum = 1000, maximum = 3600000)]
    lease_ms: Option<u64>,
}

#[derive(Serialize, ToSchema)]
pub struct HeartbeatOut {
    /// Leases no longer held (expired and taken, or the job was cancelled): stop them.
    lost: Vec<LeaseIn>,
}

/// Extend leases; answers the ones lost (stop those jobs).
#[utoipa::path(
    post,
    path = "/v1/workers/heartbeat",
    operation_id = "heartbeat",
    tag = "workers",
    request_body = HeartbeatIn,
    responses(
        (status = 200, description = "OK", body = HeartbeatOut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn heartbeat(
    State(app): State<AppState>,
    Json(req): Json<HeartbeatIn>,
) -> Result<axum::Json<HeartbeatOut>, ApiError> {
    let lease = req
        .lease_ms
        .map_or(app.config().default_lease, Duration::from_millis);
    if lease < Duration::from_secs(1) || lease > Duration::from_secs(3600) {
        return Err(ApiError::invalid(
            "lease_ms",
            format!("expected 1000 to 3600000, got {}", lease.as_millis()),
        ));
    }
    check_count(&app, "leases", req.leases.len())?;
    let leases: Vec<LeaseRef> = req.leases.into_iter().map(LeaseRef::from).collect();
    let lost = app
        .backend()
        .worker_protocol()
        .heartbeat(leases, lease)
        .await?;
    if !lost.is_empty() {
        metrics::counter!(telemetry::HTTP_LEASES_LOST).increment(lost.len() as u64);
    }
    Ok(axum::Json(HeartbeatOut {
        lost: lost.into_iter().map(LeaseIn::from).collect(),
    }))
}

fn check_count(app: &AppState, field: &'static str, n: usize) -> Result<(), ApiError> {
    let max = app.config().max_jobs_per_request;
    if n > max {
        return Err(ApiError::invalid(
            field,
            format!("expected at most {max} entries, got {n}"),
        ));
    }
    Ok(())
}

/// Body of `POST /v1/workers/complete`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteIn {
    /// One per succeeded attempt; at most the server's `max_jobs_per_request` (10,000
    /// by default).
    results: Vec<ResultIn>,
}

/// One attempt that succeeded.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultIn {
    /// The polled job's `id`.
    job: tranche_types::JobId,
    /// The polled job's `attempt`: a report for an attempt that lost its lease is
    /// answered `stale` and changes nothing.
    attempt: u32,
    /// Any JSON value, handed to the next chain step; `null` when absent.
    #[serde(default)]
    #[schema(value_type = Value)]
    result: Option<Box<RawValue>>,
}

#[derive(Serialize, ToSchema)]
pub struct AcksOut {
    /// One per entry, in order: `applied`, or `stale` when the attempt had lost its job.
    acks: Vec<CompletionAck>,
}

/// Report successes, in a batch.
#[utoipa::path(
    post,
    path = "/v1/workers/complete",
    operation_id = "complete",
    tag = "workers",
    request_body = CompleteIn,
    responses(
        (status = 200, description = "OK", body = AcksOut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn complete(
    State(app): State<AppState>,
    Json(req): Json<CompleteIn>,
) -> Result<axum::Json<AcksOut>, ApiError> {
    check_count(&app, "results", req.results.len())?;
    let batch = req
        .results
        .into_iter()
        .map(|r| Completion {
            lease: LeaseRef {
                job: r.job,
                attempt: r.attempt,
            },
            resolution: Resolution::Succeeded {
                result: r
                    .result
                    .map_or_else(|| "null".to_string(), |v| String::from(Box::<str>::from(v))),
            },
        })
        .collect();
    report(&app, batch).await
}

/// Body of `POST /v1/workers/fail`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailIn {
    /// One per failed attempt; at most the server's `max_jobs_per_request` (10,000 by
    /// default).
    failures: Vec<FailureIn>,
}

/// One attempt that failed. The job runs again later unless `discard` or this was its
/// last attempt, which end it `failed`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailureIn {
    /// The polled job's `id`.
    job: tranche_types::JobId,
    /// The polled job's `attempt`: a report for an attempt that lost its lease is
    /// answered `stale` and changes nothing.
    attempt: u32,
    /// Why it failed, for people: kept in the job's `errors`.
    error: String,
    /// Fail for good, without further attempts.
    #[serde(default)]
    #[schema(default = false)]
    discard: bool,
    /// Retry after this long instead of the default backoff (1 s doubling, ±20 %).
    #[serde(default)]
    retry_in_ms: Option<u64>,
}

/// Report failures, in a batch: retried with backoff unless `discard`.
#[utoipa::path(
    post,
    path = "/v1/workers/fail",
    operation_id = "fail",
    tag = "workers",
    request_body = FailIn,
    responses(
        (status = 200, description = "OK", body = AcksOut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn fail(
    State(app): State<AppState>,
    Json(req): Json<FailIn>,
) -> Result<axum::Json<AcksOut>, ApiError> {
    check_count(&app, "failures", req.failures.len())?;
    let now = app.backend().clock().now();
    let backoff = Backoff::default();
    let batch = req
        .failures
        .into_iter()
        .map(|f| Completion {
            lease: LeaseRef {
                job: f.job,
                attempt: f.attempt,
            },
            resolution: if f.discard {
                Resolution::Failed { error: f.error }
            } else {
                let delay = f
                    .retry_in_ms
                    .map_or_else(|| backoff.delay(f.attempt), Duration::from_millis);
                Resolution::Retry {
                    error: f.error,
                    at: now.plus(delay),
                }
            },
        })
        .collect();
    report(&app, batch).await
}

/// Applies a batch of results. Per-queue outcomes and run times are recorded by the
/// backend (see `queue_stats.rs`); counted here is only what came through HTTP.
async fn report(app: &AppState, batch: Vec<Completion>) -> Result<axum::Json<AcksOut>, ApiError> {
    let outcomes: Vec<&'static str> = batch
        .iter()
        .map(|c| match c.resolution {
            Resolution::Succeeded { .. } | Resolution::SucceededTraced { .. } => "succeeded",
            Resolution::Retry { .. } => "retried",
            Resolution::Failed { .. } => "failed",
            Resolution::Snooze { .. } => "snoozed",
            Resolution::Cancelled { .. } => "cancelled",
        })
        .collect();
    let acks = app.backend().worker_protocol().complete(batch).await?;
    let mut counts: HashMap<&'static str, u64> = HashMap::new();
    let mut lost = 0;
    for (outcome, ack) in outcomes.into_iter().zip(&acks) {
        match ack {
            CompletionAck::Applied => *counts.entry(outcome).or_default() += 1,
            CompletionAck::Stale => lost += 1,
        }
    }
    for (outcome, n) in counts {
        metrics::counter!(telemetry::HTTP_REPORTED, "outcome" => outcome).increment(n);
    }
    if lost > 0 {
        metrics::counter!(telemetry::HTTP_LEASES_LOST).increment(lost);
    }
    Ok(axum::Json(AcksOut { acks }))
}
