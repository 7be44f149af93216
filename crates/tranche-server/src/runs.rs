//! Runs and jobs: list, progress, paged failures, one job with its attempts; retry a
//! run; cancel a job, a chain or a run. Run names contain `/`: in a path they are
//! percent-encoded (`contract-notes%2F2026-11-20`).

use std::collections::BTreeMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tranche_types::{
    AttemptError, CancelTarget, JobFailure, JobId, JobRecord, JobState, RunName, RunProgress,
    Timestamp,
};

use crate::body::Json;
use crate::error::ApiError;
use crate::personal_data::PersonalData;
use crate::state::AppState;
use crate::wire::{raw, Reason};

pub fn run_name(name: String) -> Result<RunName, ApiError> {
    RunName::new(name).map_err(|e| ApiError::invalid("run", e.to_string()))
}

pub fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::invalid("query", e.body_text()))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default = "default_limit")]
    limit: usize,
}

fn default_limit() -> usize {
    50
}

#[derive(Serialize)]
pub struct RunsOut {
    runs: Vec<RunProgress>,
}

pub async fn list(
    State(app): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<axum::Json<RunsOut>, ApiError> {
    let limit = query(q)?.limit.clamp(1, 1000);
    let runs = app.backend().list_runs(limit).await?;
    Ok(axum::Json(RunsOut { runs }))
}

pub async fn progress(
    State(app): State<AppState>,
    Path(run): Path<String>,
) -> Result<axum::Json<RunProgress>, ApiError> {
    let run = run_name(run)?;
    match app.backend().run_progress(&run).await? {
        Some(p) => Ok(axum::Json(p)),
        None => Err(ApiError::not_found(format!("run {run} not found"))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailuresQuery {
    after: Option<i64>,
    #[serde(default = "default_limit")]
    limit: usize,
}

#[derive(Serialize)]
pub struct FailuresOut {
    failures: Vec<JobFailure>,
    /// Pass as `after` for the next page; absent on the last page.
    next: Option<JobId>,
}

pub async fn failures(
    State(app): State<AppState>,
    personal_data: PersonalData,
    Path(run): Path<String>,
    q: Result<Query<FailuresQuery>, QueryRejection>,
) -> Result<axum::Json<FailuresOut>, ApiError> {
    let run = run_name(run)?;
    let q = query(q)?;
    let limit = q.limit.clamp(1, 1000);
    if app.backend().run_progress(&run).await?.is_none() {
        return Err(ApiError::not_found(format!("run {run} not found")));
    }
    let failures = app
        .backend()
        .run_failures(&run, q.after.map(JobId), limit)
        .await?;
    let next = (failures.len() == limit)
        .then(|| failures.last().map(|f| f.id))
        .flatten();
    let failures = failures
        .into_iter()
        .map(|f| JobFailure {
            error: personal_data.text(f.error),
            ..f
        })
        .collect();
    Ok(axum::Json(FailuresOut { failures, next }))
}

#[derive(Serialize)]
pub struct Count {
    count: u64,
}

pub async fn retry(
    State(app): State<AppState>,
    Path(run): Path<String>,
) -> Result<axum::Json<Count>, ApiError> {
    let run = run_name(run)?;
    if app.backend().run_progress(&run).await?.is_none() {
        return Err(ApiError::not_found(format!("run {run} not found")));
    }
    let count = app.backend().retry_run(&run).await?;
    Ok(axum::Json(Count { count }))
}

const DEFAULT_REASON: &str = "cancelled through the API";

/// The body of a cancel request is optional.
fn reason(body: Option<Json<Reason>>) -> String {
    body.and_then(|Json(r)| r.reason)
        .unwrap_or_else(|| DEFAULT_REASON.to_string())
}

pub async fn cancel_run(
    State(app): State<AppState>,
    Path(run): Path<String>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    let run = run_name(run)?;
    if app.backend().run_progress(&run).await?.is_none() {
        return Err(ApiError::not_found(format!("run {run} not found")));
    }
    let count = app
        .backend()
        .cancel(CancelTarget::Run(run), &reason(body))
        .await?;
    Ok(axum::Json(Count { count }))
}

async fn cancel_job_or_chain(
    app: &AppState,
    id: i64,
    chain: bool,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    let id = JobId(id);
    if app.backend().job(id).await?.is_none() {
        return Err(ApiError::not_found(format!("job {id} not found")));
    }
    let target = if chain {
        CancelTarget::Chain(id)
    } else {
        CancelTarget::Job(id)
    };
    let count = app.backend().cancel(target, &reason(body)).await?;
    Ok(axum::Json(Count { count }))
}

pub async fn cancel_job(
    State(app): State<AppState>,
    Path(id): Path<i64>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    cancel_job_or_chain(&app, id, false, body).await
}

pub async fn cancel_chain(
    State(app): State<AppState>,
    Path(id): Path<i64>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    cancel_job_or_chain(&app, id, true, body).await
}

/// A job with its payloads as JSON values rather than JSON text in a string, and
/// personal data in its text masked unless the caller may see it.
#[derive(Serialize)]
pub struct JobOut {
    id: JobId,
    run: RunName,
    kind: String,
    queue: String,
    state: JobState,
    attempt: u32,
    max_attempts: u32,
    args: Box<RawValue>,
    input: Option<Box<RawValue>>,
    result: Option<Box<RawValue>>,
    error: Option<String>,
    errors: Vec<AttemptError>,
    unique_key: Option<String>,
    next: Option<JobId>,
    created_at: Timestamp,
    available_at: Timestamp,
    started_at: Option<Timestamp>,
    finished_at: Option<Timestamp>,
}

impl JobOut {
    fn new(r: JobRecord, personal_data: PersonalData) -> Self {
        let payload = |stored: String| personal_data.json(raw(stored));
        let text = |stored: String| personal_data.text(stored);
        JobOut {
            id: r.id,
            run: r.run,
            kind: r.kind,
            queue: r.queue,
            state: r.state,
            attempt: r.attempt,
            max_attempts: r.max_attempts,
            args: payload(r.args),
            input: r.input.map(payload),
            result: r.result.map(payload),
            error: r.error.map(text),
            errors: r
                .errors
                .into_iter()
                .map(|e| AttemptError {
                    error: text(e.error),
                    ..e
                })
                .collect(),
            unique_key: r.unique_key.map(text),
            next: r.next,
            created_at: r.created_at,
            available_at: r.available_at,
            started_at: r.started_at,
            finished_at: r.finished_at,
        }
    }
}

pub async fn job(
    State(app): State<AppState>,
    personal_data: PersonalData,
    Path(id): Path<i64>,
) -> Result<axum::Json<JobOut>, ApiError> {
    match app.backend().job(JobId(id)).await? {
        Some(r) => Ok(axum::Json(JobOut::new(r, personal_data))),
        None => Err(ApiError::not_found(format!("job {id} not found"))),
    }
}

#[derive(Serialize)]
pub struct QueuesOut {
    queues: Vec<QueueOut>,
}

/// A queue's depth now and its cumulative statistics (every worker's, remote or not).
#[derive(Serialize, Default)]
pub struct QueueOut {
    queue: String,
    available: u64,
    running: u64,
    started: u64,
    succeeded: u64,
    failed: u64,
    retried: u64,
    expired: u64,
}

/// Every queue with jobs waiting or running or with statistics, sorted by name.
pub async fn queues(State(app): State<AppState>) -> Result<axum::Json<QueuesOut>, ApiError> {
    let backend = app.backend();
    let (depths, stats) = tokio::try_join!(backend.queue_depths(), backend.queue_stats())?;
    let mut by_queue: BTreeMap<String, QueueOut> = BTreeMap::new();
    fn entry(m: &mut BTreeMap<String, QueueOut>, queue: String) -> &mut QueueOut {
        m.entry(queue.clone()).or_insert_with(|| QueueOut {
            queue,
            ..QueueOut::default()
        })
    }
    for d in depths {
        let q = entry(&mut by_queue, d.queue);
        (q.available, q.running) = (d.available, d.running);
    }
    for s in stats {
        let q = entry(&mut by_queue, s.queue);
        (q.started, q.succeeded, q.failed, q.retried, q.expired) =
            (s.started, s.succeeded, s.failed, s.retried, s.expired);
    }
    Ok(axum::Json(QueuesOut {
        queues: by_queue.into_values().collect(),
    }))
}
