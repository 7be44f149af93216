//! One job at a time: list jobs by run, state, queue and kind a page at a time; retry
//! one failed or cancelled job; delete one ended job.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use tranche_types::{JobFilter, JobId, JobPage, JobState, JobSummary};
use utoipa::IntoParams;

use crate::error::{ApiError, ErrorBody};
use crate::personal_data::PersonalData;
use crate::runs::{query, run_name, Count, JobPath};
use crate::state::AppState;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// Only this run's jobs.
    #[param(value_type = Option<tranche_types::RunName>)]
    run: Option<String>,
    /// Only jobs in this state.
    #[param(value_type = Option<JobState>)]
    state: Option<JobState>,
    /// Only this queue's jobs.
    queue: Option<String>,
    /// Only jobs of this task kind.
    kind: Option<String>,
    /// Jobs with a larger id than this: the previous page's `next`.
    #[param(value_type = Option<JobId>)]
    after: Option<i64>,
    /// At most this many (default 50, max 1000).
    #[serde(default = "default_limit")]
    #[param(default = default_limit)]
    limit: usize,
}

fn default_limit() -> usize {
    50
}

/// Jobs by id, filtered by run, state, queue and kind (they combine), a page at a time.
///
/// Pass `next` as `after` for the next page; `null` after the last. A page may be
/// short while more follow (each call's work is bounded); jobs submitted while paging
/// never make a page skip or repeat one.
#[utoipa::path(
    get,
    path = "/v1/jobs",
    operation_id = "list_jobs",
    tag = "runs",
    params(JobsQuery),
    responses(
        (status = 200, description = "OK", body = JobPage),
        (status = 400, description = "A query parameter is not acceptable", body = ErrorBody),
    )
)]
pub async fn list(
    State(app): State<AppState>,
    personal_data: PersonalData,
    q: Result<Query<JobsQuery>, QueryRejection>,
) -> Result<axum::Json<JobPage>, ApiError> {
    let q = query(q)?;
    let filter = JobFilter {
        run: q.run.map(run_name).transpose()?,
        state: q.state,
        queue: q.queue,
        kind: q.kind,
    };
    let page = app
        .backend()
        .list_jobs(&filter, q.after.map(JobId), q.limit.clamp(1, 1000))
        .await?;
    let jobs = page
        .jobs
        .into_iter()
        .map(|j| JobSummary {
            error: j.error.map(|e| personal_data.text(e)),
            ..j
        })
        .collect();
    Ok(axum::Json(JobPage {
        jobs,
        next: page.next,
    }))
}

/// Run a failed or cancelled job again, with fresh attempts; the chain steps cancelled
/// after it wait for it again. `count`: the jobs revived.
#[utoipa::path(
    post,
    path = "/v1/jobs/{id}/retry",
    operation_id = "retry_job",
    tag = "runs",
    params(JobPath),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a job id, or the job has not failed nor been cancelled (the message says its state)", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub async fn retry(
    State(app): State<AppState>,
    Path(JobPath { id }): Path<JobPath>,
) -> Result<axum::Json<Count>, ApiError> {
    let count = app.backend().retry_job(JobId(id)).await?;
    Ok(axum::Json(Count::new(count)))
}

/// Delete an ended job (succeeded, failed or cancelled) and its attempts; its run's
/// counters no longer count it. `count`: 1.
#[utoipa::path(
    delete,
    path = "/v1/jobs/{id}",
    operation_id = "delete_job",
    tag = "runs",
    params(JobPath),
    responses(
        (status = 200, description = "OK", body = Count),
        (status = 400, description = "Not a job id, or the job has not ended: cancel it first", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
    )
)]
pub async fn delete(
    State(app): State<AppState>,
    Path(JobPath { id }): Path<JobPath>,
) -> Result<axum::Json<Count>, ApiError> {
    if app.backend().delete_job(JobId(id)).await? {
        Ok(axum::Json(Count::new(1)))
    } else {
        Err(ApiError::not_found(format!("job {id} not found")))
    }
}
