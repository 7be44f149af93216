//! Retention on demand over HTTP: `POST /v1/prune`, one bounded step of
//! [`Client::prune`](tranche_core::Client::prune) per request (call again while
//! `more`), or its dry run.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::body::Json;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Most runs one request removes, so that a request stays short.
const MAX_LIMIT: usize = 1000;

fn default_limit() -> usize {
    100
}

/// What to remove: runs that finished before `before`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PruneIn {
    /// Runs whose last job ended before this (microseconds since the Unix epoch, in the
    /// past) are removed with their jobs; unfinished runs never are.
    pub before: i64,
    /// Most runs to remove in this request (1 to 1000).
    #[serde(default = "default_limit")]
    #[schema(default = default_limit, minimum = 1, maximum = 1000)]
    pub limit: usize,
    /// Count what would be removed (every due run, regardless of `limit`) and remove
    /// nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What was removed (or, for a dry run, would be).
#[derive(Debug, Serialize, ToSchema)]
pub struct PruneOut {
    /// Runs removed whole.
    pub runs: u64,
    /// Jobs removed (a large run's may go over several requests, the run last).
    pub jobs: u64,
    /// Records written ended removed (ended workflows' state), a batch at a time; a
    /// backend that lets them expire instead counts none. Not counted by a dry run.
    pub records: u64,
    /// The limit was reached, or records were removed: more may be due, call again.
    pub more: bool,
    /// Nothing was removed: the figures are what a prune would remove.
    pub dry_run: bool,
}

/// Remove runs that finished before a time, with their jobs (both backends also do so
/// by themselves after their retention). Effects are kept.
#[utoipa::path(
    post,
    path = "/v1/prune",
    operation_id = "prune",
    tag = "runs",
    request_body = PruneIn,
    responses(
        (status = 200, description = "OK", body = PruneOut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn prune(
    State(app): State<AppState>,
    Json(req): Json<PruneIn>,
) -> Result<axum::Json<PruneOut>, ApiError> {
    let client = app.backend();
    let now = client.clock().now();
    if req.before > now.micros() {
        return Err(ApiError::invalid(
            "before",
            format!(
                "expected a time in the past (now is {}), got {}",
                now.micros(),
                req.before
            ),
        ));
    }
    if !(1..=MAX_LIMIT).contains(&req.limit) {
        return Err(ApiError::invalid(
            "limit",
            format!("expected 1 to {MAX_LIMIT}, got {}", req.limit),
        ));
    }
    let before = tranche_types::Timestamp(req.before);
    if req.dry_run {
        let runs = client.prunable(before).await?;
        return Ok(axum::Json(PruneOut {
            runs: runs.len() as u64,
            jobs: runs.iter().map(|p| p.total).sum(),
            records: 0,
            more: false,
            dry_run: true,
        }));
    }
    let pruned = client.prune(before, req.limit).await?;
    Ok(axum::Json(PruneOut {
        runs: pruned.runs,
        jobs: pruned.jobs,
        records: pruned.records,
        more: pruned.runs as usize == req.limit || pruned.records > 0,
        dry_run: false,
    }))
}
