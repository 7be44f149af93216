//! Pause and resume a queue: workers of every process stop taking its jobs, and start
//! again at once on resume. Nothing in flight is lost: running jobs finish and report,
//! submissions into the paused queue are accepted and wait.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// A queue name in a path, checked by the backend (400 naming `queue`).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QueuePath {
    /// The queue's name, as jobs are submitted to it (percent-encoded).
    #[param(max_length = 128)]
    queue: String,
}

/// Where a queue stands after a pause or resume.
#[derive(Serialize, ToSchema)]
pub struct PauseOut {
    /// The queue.
    queue: String,
    /// Whether it is paused now.
    paused: bool,
    /// False when it already was as asked (a repeat changes nothing).
    changed: bool,
}

/// Pause a queue: no worker, local or remote, takes its jobs until it is resumed.
///
/// Jobs running at the pause finish and report as usual; jobs submitted meanwhile are
/// accepted and wait. The queue need not have jobs yet. Pausing a paused queue
/// changes nothing (`changed: false`).
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/pause",
    operation_id = "pause_queue",
    tag = "runs",
    params(QueuePath),
    responses(
        (status = 200, description = "OK", body = PauseOut),
        (status = 400, description = "Not a queue name (empty or too long)", body = ErrorBody),
    )
)]
pub async fn pause(
    State(app): State<AppState>,
    Path(QueuePath { queue }): Path<QueuePath>,
) -> Result<axum::Json<PauseOut>, ApiError> {
    let changed = app.backend().pause_queue(&queue).await?;
    Ok(axum::Json(PauseOut {
        queue,
        paused: true,
        changed,
    }))
}

/// Resume a paused queue: its jobs are runnable again at once, and waiting workers
/// (long-polls included) are woken.
///
/// Resuming a queue that is not paused changes nothing (`changed: false`).
#[utoipa::path(
    post,
    path = "/v1/queues/{queue}/resume",
    operation_id = "resume_queue",
    tag = "runs",
    params(QueuePath),
    responses(
        (status = 200, description = "OK", body = PauseOut),
        (status = 400, description = "Not a queue name (empty or too long)", body = ErrorBody),
    )
)]
pub async fn resume(
    State(app): State<AppState>,
    Path(QueuePath { queue }): Path<QueuePath>,
) -> Result<axum::Json<PauseOut>, ApiError> {
    let changed = app.backend().resume_queue(&queue).await?;
    Ok(axum::Json(PauseOut {
        queue,
        paused: false,
        changed,
    }))
}

#[cfg(test)]
mod tests {
    use tranche_types::JobSpec;

    /// The `max_length` attribute is a literal: it must say what the backends check.
    #[test]
    fn the_documented_limit_is_the_codes() {
        let doc: serde_json::Value = serde_json::from_str(crate::openapi::json()).unwrap();
        let params = &doc["paths"]["/v1/queues/{queue}/pause"]["post"]["parameters"];
        assert_eq!(params[0]["schema"]["maxLength"], JobSpec::MAX_QUEUE_LEN);
    }
}
