//! Submit: one job, a batch (up to `max_jobs_per_request` jobs, one backend enqueue,
//! so one transaction), a chain, a group. Each answers the new ids.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use tranche_types::{EnqueueItem, EnqueueRequest, Enqueued, RunName};

use crate::body::Json;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::state::AppState;
use crate::telemetry;
use crate::wire::{ItemIn, JobIn, SubmitBatch, SubmitChain, SubmitGroup, SubmitJob, Submitted};

/// One answer per submitted item, in order.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct BatchOut {
    /// One per submitted item, in the order submitted.
    pub items: Vec<Submitted>,
}

/// Submit one job.
#[utoipa::path(
    post,
    path = "/v1/jobs",
    operation_id = "submit_job",
    tag = "submit",
    request_body = SubmitJob,
    responses(
        (status = 201, description = "Created", body = Submitted),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
        (status = 429, description = "The job's queue is full: retry after Retry-After", body = ErrorBody),
    )
)]
pub async fn job(
    State(app): State<AppState>,
    Json(req): Json<SubmitJob>,
) -> Result<(StatusCode, axum::Json<Submitted>), ApiError> {
    let mut out = enqueue(&app, req.run, vec![ItemIn::Job(req.job)], None).await?;
    Ok((StatusCode::CREATED, axum::Json(out.remove(0))))
}

/// Submit a chain: each step runs after the previous one succeeded and receives its
/// result.
#[utoipa::path(
    post,
    path = "/v1/chains",
    operation_id = "submit_chain",
    tag = "submit",
    request_body = SubmitChain,
    responses(
        (status = 201, description = "Created", body = Submitted),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
        (status = 429, description = "The first step's queue is full: retry after Retry-After", body = ErrorBody),
    )
)]
pub async fn chain(
    State(app): State<AppState>,
    Json(req): Json<SubmitChain>,
) -> Result<(StatusCode, axum::Json<Submitted>), ApiError> {
    if req.steps.is_empty() {
        return Err(ApiError::invalid(
            "steps",
            "expected at least one step, got an empty chain",
        ));
    }
    let mut out = enqueue(&app, req.run, vec![ItemIn::Chain(req.steps)], None).await?;
    Ok((StatusCode::CREATED, axum::Json(out.remove(0))))
}

/// Submit a group: members run independently; the callback runs once when all have
/// ended. Ids are the members', then the callback's.
#[utoipa::path(
    post,
    path = "/v1/groups",
    operation_id = "submit_group",
    tag = "submit",
    request_body = SubmitGroup,
    responses(
        (status = 201, description = "Created", body = Submitted),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
        (status = 429, description = "A member's queue is full: retry after Retry-After", body = ErrorBody),
    )
)]
pub async fn group(
    State(app): State<AppState>,
    Json(req): Json<SubmitGroup>,
) -> Result<(StatusCode, axum::Json<Submitted>), ApiError> {
    let item = ItemIn::Group {
        members: req.members,
        callback: req.callback,
    };
    let mut out = enqueue(&app, req.run, vec![item], None).await?;
    Ok((StatusCode::CREATED, axum::Json(out.remove(0))))
}

/// Submit up to 10,000 jobs (jobs, chains, groups) into one run, in one transaction.
///
/// The limit is the server's `max_jobs_per_request`; `on_done` is enqueued into the
/// run `<run>/done` each time the run finishes.
#[utoipa::path(
    post,
    path = "/v1/batches",
    operation_id = "submit_batch",
    tag = "submit",
    request_body = SubmitBatch,
    responses(
        (status = 201, description = "Created", body = BatchOut),
        (status = 400, description = "A field is not acceptable, or too many jobs: `field` names it", body = ErrorBody),
        (status = 429, description = "A queue is full: retry after Retry-After", body = ErrorBody),
    )
)]
pub async fn batch(
    State(app): State<AppState>,
    Json(req): Json<SubmitBatch>,
) -> Result<(StatusCode, axum::Json<BatchOut>), ApiError> {
    let items = enqueue(&app, req.run, req.items, req.on_done).await?;
    Ok((StatusCode::CREATED, axum::Json(BatchOut { items })))
}

async fn enqueue(
    app: &AppState,
    run: RunName,
    items: Vec<ItemIn>,
    on_done: Option<JobIn>,
) -> Result<Vec<Submitted>, ApiError> {
    let total: usize = items.iter().map(|i| i.jobs().count()).sum();
    let max = app.config().max_jobs_per_request;
    if total > max {
        return Err(ApiError::invalid(
            "items",
            format!("expected at most {max} jobs in one request, got {total}"),
        ));
    }
    let mut incoming: HashMap<&str, u64> = HashMap::new();
    for job in items.iter().flat_map(|i| i.queued_now()) {
        *incoming.entry(job.queue.as_str()).or_default() += 1;
    }
    if let Err(full) = app.intake().admit(app.backend(), &incoming).await? {
        metrics::counter!(telemetry::SUBMIT_REFUSED, "queue" => full.queue.clone()).increment(1);
        return Err(ApiError {
            retry_after_secs: Some(1),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::QueueFull,
                format!(
                    "queue {:?} holds {} waiting jobs, its limit is {}: retry later",
                    full.queue, full.depth, full.limit
                ),
            )
        });
    }
    let counted: Vec<(String, u64)> = incoming.iter().map(|(q, n)| (q.to_string(), *n)).collect();
    app.intake().accepted(&incoming);
    drop(incoming);
    // The request's trace context (docs/traces.md): the jobs' attempts continue it.
    let trace = tranche_core::trace::context_of(&tracing::Span::current());
    let spec = |j: JobIn| {
        let mut spec = j.into_spec();
        spec.trace.clone_from(&trace);
        spec
    };
    let items: Vec<EnqueueItem> = items
        .into_iter()
        .map(|item| match item {
            ItemIn::Job(j) => EnqueueItem::Job(spec(j)),
            ItemIn::Chain(steps) => EnqueueItem::Chain(steps.into_iter().map(spec).collect()),
            ItemIn::Group { members, callback } => EnqueueItem::Group {
                members: members.into_iter().map(spec).collect(),
                callback: spec(callback),
            },
        })
        .collect();
    let out: Vec<Enqueued> = app
        .backend()
        .enqueue(EnqueueRequest {
            run,
            items,
            on_done: on_done.map(spec),
        })
        .await?;
    for (queue, n) in counted {
        metrics::counter!(telemetry::SUBMITTED, "queue" => queue).increment(n);
    }
    Ok(out
        .into_iter()
        .map(|e| Submitted {
            ids: e.ids,
            existed: e.existed,
        })
        .collect())
}
