//! The change feed: `GET /v1/events?after=CURSOR&wait=MS&limit=N` (`after=latest`
//! starts from now). Returns events
//! after the cursor in commit order, waiting up to `wait` ms when there are none; pass
//! the answer's `next` as the following `after`. Never skips or reorders (the
//! backend's contract); an empty answer comes only after `wait`.

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use tranche_types::JobEvent;

use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorBody};
use crate::runs::query;
use crate::state::AppState;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Cursor: the previous answer's `next` (0 or absent for the beginning), or
    /// `latest` for only the changes from now on.
    #[serde(default)]
    after: Option<String>,
    /// Milliseconds to wait for an event (at most the server's `max_wait`, 60000 by
    /// default).
    #[serde(default)]
    wait: u64,
    /// At most this many events (default 1000, max 10000).
    #[serde(default = "default_limit")]
    #[param(default = default_limit)]
    limit: usize,
}

fn default_limit() -> usize {
    1000
}

/// A page of the change feed.
#[derive(Serialize, ToSchema)]
pub struct EventsOut {
    /// In commit order, `seq` increasing; empty only when `wait` passed without a change.
    events: Vec<JobEvent>,
    /// The cursor to pass as `after` next time: the last event's `seq`, or when there
    /// were none the cursor asked for (`latest` as the number it stood for).
    next: u64,
}

/// The change feed: job state changes after a cursor, in commit order; waits up to
/// `wait` ms when there are none.
#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "events",
    tag = "feed",
    params(EventsQuery),
    responses(
        (status = 200, description = "OK", body = EventsOut),
        (status = 400, description = "A query parameter is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn events(
    State(app): State<AppState>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Result<axum::Json<EventsOut>, ApiError> {
    let q = query(q)?;
    let wait = Duration::from_millis(q.wait);
    let max_wait = app.config().max_wait;
    if wait > max_wait {
        return Err(ApiError::invalid(
            "wait",
            format!(
                "expected at most {} ms, got {}",
                max_wait.as_millis(),
                q.wait
            ),
        ));
    }
    let after = match q.after.as_deref() {
        None => 0,
        Some("latest") => app.backend().last_event().await?,
        Some(n) => n.parse().map_err(|_| {
            ApiError::invalid("after", format!("expected a cursor or `latest`, got {n:?}"))
        })?,
    };
    let limit = q.limit.clamp(1, 10_000);
    let events = app.backend().events(after, limit, wait).await?;
    let next = events.last().map_or(after, |e| e.seq);
    Ok(axum::Json(EventsOut { events, next }))
}
