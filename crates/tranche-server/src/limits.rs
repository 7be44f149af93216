//! Rate limits and running caps over HTTP: declare a limit on a queue's or a task
//! kind's jobs, list limits with their use now, remove one. The backend stores and
//! enforces them, so they hold for every worker of the fleet, local or remote.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use tranche_types::{Limit, LimitScope, LimitStatus, StartRate};
use utoipa::{IntoParams, ToSchema};

use crate::body::Json;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// A limit's scope in a path.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct LimitPath {
    /// `queue` or `kind`.
    #[param(pattern = "^(queue|kind)$")]
    scope: String,
    /// The queue's or task kind's name (percent-encoded).
    #[param(max_length = 128)]
    name: String,
}

/// A limit's declaration: at least one of `starts` and `running`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitIn {
    /// At most `count` starts in any window of `per_ms` milliseconds (a strict
    /// sliding window; retries count as starts).
    #[serde(default)]
    starts: Option<StartRate>,
    /// At most this many running at once, across every worker.
    #[serde(default)]
    running: Option<u32>,
}

/// What a declaration did.
#[derive(Serialize, ToSchema)]
pub struct LimitPut {
    /// The limit as stored.
    limit: Limit,
    /// True when the scope had no limit before; false when one was replaced.
    created: bool,
}

/// Every limit.
#[derive(Serialize, ToSchema)]
pub struct LimitList {
    /// Queues first, then kinds, each by name.
    limits: Vec<LimitStatus>,
}

/// A removed limit.
#[derive(Serialize, ToSchema)]
pub struct LimitDeleted {
    /// The scope that had it.
    scope: LimitScope,
    /// Always true: a scope without a limit is answered 404.
    deleted: bool,
}

/// Every limit with its use now: jobs running, starts within the current window.
#[utoipa::path(
    get,
    path = "/v1/limits",
    operation_id = "list_limits",
    tag = "limits",
    responses((status = 200, description = "OK", body = LimitList))
)]
pub async fn list(State(app): State<AppState>) -> Result<axum::Json<LimitList>, ApiError> {
    let limits = app.backend().limits().await?;
    Ok(axum::Json(LimitList { limits }))
}

/// Declare a limit on a queue's or a task kind's jobs, replacing the one it has.
///
/// Enforced by the backend for every worker from the moment it is stored. A job is
/// subject to its queue's limit and its kind's; jobs of a kind at its limit wait in
/// their queue (no attempt used) while other kinds go ahead. Starts already made in
/// the current window keep counting after a replacement.
#[utoipa::path(
    put,
    path = "/v1/limits/{scope}/{name}",
    operation_id = "put_limit",
    tag = "limits",
    params(LimitPath),
    request_body = LimitIn,
    responses(
        (status = 200, description = "OK", body = LimitPut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn put(
    State(app): State<AppState>,
    Path(LimitPath { scope, name }): Path<LimitPath>,
    Json(body): Json<LimitIn>,
) -> Result<axum::Json<LimitPut>, ApiError> {
    let limit = Limit {
        scope: LimitScope::parse(&scope, &name)?,
        starts: body.starts,
        running: body.running,
    };
    let created = app.backend().put_limit(&limit).await?;
    Ok(axum::Json(LimitPut { limit, created }))
}

/// Remove a queue's or a task kind's limit: its jobs start as fast as workers take
/// them, and waiting workers are woken.
#[utoipa::path(
    delete,
    path = "/v1/limits/{scope}/{name}",
    operation_id = "delete_limit",
    tag = "limits",
    params(LimitPath),
    responses(
        (status = 200, description = "OK", body = LimitDeleted),
        (status = 400, description = "Not a scope (`queue` or `kind`) and name", body = ErrorBody),
        (status = 404, description = "The scope has no limit", body = ErrorBody),
    )
)]
pub async fn delete(
    State(app): State<AppState>,
    Path(LimitPath { scope, name }): Path<LimitPath>,
) -> Result<axum::Json<LimitDeleted>, ApiError> {
    let scope = LimitScope::parse(&scope, &name)?;
    if app.backend().delete_limit(&scope).await? {
        Ok(axum::Json(LimitDeleted {
            scope,
            deleted: true,
        }))
    } else {
        Err(ApiError::not_found(format!("no limit on {scope}")))
    }
}
