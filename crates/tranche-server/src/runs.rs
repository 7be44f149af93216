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

use utoipa::{IntoParams, ToSchema};

use crate::body::Json;
use crate::error::{ApiError, ErrorBody};
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

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many (default 50, max 1000).
    #[serde(default = "default_limit")]
    #[param(default = default_limit)]
    limit: usize,
}

fn default_limit() -> usize {
    50
}

#[derive(Serialize, ToSchema)]
pub struct RunsOut {
    /// Newest first, at most `limit`.
    runs: Vec<RunProgress>,
}

/// A run name in a path. Taken as text so a bad name is answered 400 naming `run`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// Run name, percent-encoded (`/` as `%2F`).
    #[param(value_type = RunName)]
    run: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct JobPath {
    /// Job id, as answered by a submission.
    #[param(value_type = JobId)]
    pub id: i64,
}

/// Runs, newest first, with progress.
#[utoipa::path(
    get,
    path = "/v1/runs",
    operation_id = "list_runs",
    tag = "runs",
    params(ListQuery),
    responses(
        (status = 200, description = "OK", body = RunsOut),
        (status = 400, description = "A query parameter is not acceptable", body = ErrorBody),
    )
)]
pub async fn list(
    State(app): State<AppState>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<axum::Json<RunsOut>, ApiError> {
    let limit = query(q)?.limit.clamp(1, 1000);
    let runs = app.backend().list_runs(limit).await?;
    Ok(axum::Json(RunsOut { runs }))
}

/// A run's progress (O(1)).
#[utoipa::path(
    get,
    path = "/v1/runs/{run}",
    operation_id = "run_progress",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = RunProgress),
        (status = 400, description = "Not a run name", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn progress(
    State(app): State<AppState>,
    Path(RunPath { run }): Path<RunPath>,
) -> Result<axum::Json<RunProgress>, ApiError> {
    let run = run_name(run)?;
    match app.backend().run_progress(&run).await? {
        Some(p) => Ok(axum::Json(p)),
        None => Err(ApiError::not_found(format!("run {run} not found"))),
    }
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct FailuresQuery {
    /// Job id to continue after (the previous page's `next`).
    after: Option<i64>,
    /// Page size (default 50, max 1000).
    #[serde(default = "default_limit")]
    #[param(default = default_limit)]
    limit: usize,
}

/// Failed jobs' errors are masked unless the token may see personal data.
#[derive(Serialize, ToSchema)]
pub struct FailuresOut {
    /// By job id, at most `limit`.
    failures: Vec<JobFailure>,
    /// Pass as `after` for the next page; `null` when this page was not full. A full
    /// page may be followed by an empty one.
    next: Option<JobId>,
}

/// A run's failed jobs, by id, paged.
#[utoipa::path(
    get,
    path = "/v1/runs/{run}/failures",
    operation_id = "run_failures",
    tag = "runs",
    params(RunPath, FailuresQuery),
    responses(
        (status = 200, description = "OK", body = FailuresOut),
        (status = 400, description = "Not a run name, or a query parameter is not acceptable", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn failures(
    State(app): State<AppState>,
    personal_data: PersonalData,
    Path(RunPath { run }): Path<RunPath>,
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

/// What a retry or a cancel changed.
#[derive(Serialize, ToSchema)]
pub struct Count {
    /// How many jobs were changed.
    count: u64,
}

impl Count {
    pub fn new(count: u64) -> Self {
        Count { count }
    }
}

/// Re-run the run's failed jobs and the chain steps they blocked.
#[utoipa::path(
    post,
    path = "/v1/runs/{run}/retry",
    operation_id = "retry_run",
    tag = "runs",
    params(RunPath),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a run name", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn retry(
    State(app): State<AppState>,
    Path(RunPath { run }): Path<RunPath>,
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

/// Cancel every job of the run that has not ended.
#[utoipa::path(
    post,
    path = "/v1/runs/{run}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    params(RunPath),
    request_body(content = Option<Reason>, description = "Optional: absent, blank or `null` cancels with a default reason"),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a run name, or the body is not acceptable", body = ErrorBody),
        (status = 404, description = "No such run", body = ErrorBody),
    )
)]
pub async fn cancel_run(
    State(app): State<AppState>,
    Path(RunPath { run }): Path<RunPath>,
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

/// Cancel a job (and the chain steps after it).
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/cancel",
    operation_id = "cancel_job",
    tag = "runs",
    params(JobPath),
    request_body(content = Option<Reason>, description = "Optional: absent, blank or `null` cancels with a default reason"),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a job id, or the body is not acceptable", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub async fn cancel_job(
    State(app): State<AppState>,
    Path(JobPath { id }): Path<JobPath>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    cancel_job_or_chain(&app, id, false, body).await
}

/// Cancel the chain steps from this job on, even if it has ended.
#[utoipa::path(
    post,
    path = "/v1/chains/{id}/cancel",
    operation_id = "cancel_chain",
    tag = "runs",
    params(JobPath),
    request_body(content = Option<Reason>, description = "Optional: absent, blank or `null` cancels with a default reason"),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a job id, or the body is not acceptable", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub async fn cancel_chain(
    State(app): State<AppState>,
    Path(JobPath { id }): Path<JobPath>,
    body: Option<Json<Reason>>,
) -> Result<axum::Json<Count>, ApiError> {
    cancel_job_or_chain(&app, id, true, body).await
}

/// A job with its payloads as JSON values rather than JSON text in a string, and
/// personal data in its text (args, input, result, error, errors, unique_key) masked
/// unless the caller may see it.
#[derive(Serialize, ToSchema)]
#[schema(as = Job)]
pub struct JobOut {
    id: JobId,
    /// The run the job belongs to.
    run: RunName,
    /// The task kind, as submitted.
    kind: String,
    /// The queue it waits in, as submitted.
    queue: String,
    state: JobState,
    /// Attempts started so far: 0 until the job first runs, and again once a retry of
    /// its run revives it.
    attempt: u32,
    /// Attempts allowed in all, as submitted.
    max_attempts: u32,
    /// Any JSON value.
    #[schema(value_type = Value)]
    args: Box<RawValue>,
    /// The previous chain step's result, or a group callback's member outcomes.
    #[schema(value_type = Value)]
    input: Option<Box<RawValue>>,
    /// What the job returned, once it succeeded.
    #[schema(value_type = Value)]
    result: Option<Box<RawValue>>,
    /// The last error or the cancellation reason.
    error: Option<String>,
    /// Each failed attempt's error.
    errors: Vec<AttemptError>,
    /// The key it was submitted with, if any.
    unique_key: Option<String>,
    /// The chain's next step.
    next: Option<JobId>,
    /// When the job was submitted.
    created_at: Timestamp,
    /// When the job last became runnable, or the earliest it may run if it is not yet.
    available_at: Timestamp,
    /// When its latest attempt started; `null` until it first runs.
    started_at: Option<Timestamp>,
    /// When it ended; `null` until then, and again after a retry of its run.
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

/// One job with its attempts' errors.
#[utoipa::path(
    get,
    path = "/v1/jobs/{id}",
    operation_id = "get_job",
    tag = "runs",
    params(JobPath),
    responses(
        (status = 200, description = "OK", body = JobOut),
        (status = 400, description = "Not a job id", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub async fn job(
    State(app): State<AppState>,
    personal_data: PersonalData,
    Path(JobPath { id }): Path<JobPath>,
) -> Result<axum::Json<JobOut>, ApiError> {
    match app.backend().job(JobId(id)).await? {
        Some(r) => Ok(axum::Json(JobOut::new(r, personal_data))),
        None => Err(ApiError::not_found(format!("job {id} not found"))),
    }
}

#[derive(Serialize, ToSchema)]
pub struct QueuesOut {
    /// Every queue with jobs waiting or running, with statistics, or paused, by name.
    queues: Vec<QueueOut>,
}

/// A queue's depth now and its cumulative statistics (every worker's, remote or not).
#[derive(Serialize, Default, ToSchema)]
pub struct QueueOut {
    /// The queue's name, as jobs were submitted to it.
    queue: String,
    /// Jobs waiting: runnable now or scheduled.
    available: u64,
    /// Jobs held by a worker now.
    running: u64,
    /// Attempts handed out (reserved), since the backend's data began.
    started: u64,
    /// Jobs that succeeded.
    succeeded: u64,
    /// Jobs that ended failed: reported failed, or out of attempts.
    failed: u64,
    /// Attempts reported failed whose job was put back to run again.
    retried: u64,
    /// Leases that expired (the worker stopped heartbeating) whose job was recovered.
    expired: u64,
    /// Present (and true) only when the queue is paused: no worker takes its jobs
    /// until it is resumed (`POST /v1/queues/{queue}/resume`). Absent otherwise, so an
    /// answer about queues never paused reads as it did before pausing existed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
}

/// Per queue: jobs available and running now, and the backend's cumulative statistics.
///
/// Every queue with jobs waiting or running, with statistics, or paused, sorted by
/// name. The statistics (attempts started, jobs succeeded and failed, retries, lease
/// expiries) count every worker's jobs, remote or not.
#[utoipa::path(
    get,
    path = "/v1/queues",
    operation_id = "list_queues",
    tag = "runs",
    responses((status = 200, description = "OK", body = QueuesOut))
)]
pub async fn queues(State(app): State<AppState>) -> Result<axum::Json<QueuesOut>, ApiError> {
    let backend = app.backend();
    let (depths, stats, paused) = tokio::try_join!(
        backend.queue_depths(),
        backend.queue_stats(),
        backend.paused_queues()
    )?;
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
    for queue in paused {
        entry(&mut by_queue, queue).paused = true;
    }
    Ok(axum::Json(QueuesOut {
        queues: by_queue.into_values().collect(),
    }))
}
