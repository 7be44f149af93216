//! The order-state feed's HTTP layer (issue 17): an axum [`Router`] over a
//! [`tranche_feed::Store`] and one writer task.
//!
//! - `POST /v1/feed/events` — a JSON batch `{"events": [...]}` of insert and change
//!   events ([`wire::WireEvent`]), applied all-or-nothing. Every request hands its
//!   batch to its shard's one writer task ([`tranche_feed_service::writer`], which TCP
//!   shares); the task drains whatever batches are queued into one
//!   [`tranche_feed::Writer::apply_group`] call (group commit: one log write and one
//!   sync for all of them) and answers each request once its batch is durable per the
//!   store's [`tranche_feed::Durability`]. A bad batch is a 400 naming the event's
//!   `index` and `field`, and nothing of it is applied; the other batches of its group
//!   are unaffected. Bodies up to [`BODY_LIMIT`].
//! - `GET /v1/feed/orders?cursor=&firm=|broker=|instrument=&limit=&min_batch=&wait_ms=&linger_us=`
//!   — the batched long poll: if fewer than `min_batch` (default 1) orders of the
//!   filter are ready after `cursor` (default: the start), wait until enough arrive
//!   or `wait_ms` passes (default [`DEFAULT_WAIT_MS`], cut to [`MAX_WAIT_MS`]; 0
//!   answers at once) — or, with `linger_us`, at most that long once some are
//!   ready (cut to [`tranche_feed_service::MAX_LINGER_US`]; default 0, none) — then
//!   answer up to `limit` (default [`DEFAULT_LIMIT`], cut to [`MAX_READ_LIMIT`])
//!   orders as [`wire::OrdersPage`]: `next_cursor`, `count`, `oldest_created_at`,
//!   `server_wait_us`, `server_read_us`, then `orders`. At most one filter key. A
//!   malformed or altered cursor is a 400 saying why; a cursor older
//!   than what the store retains is a 410 carrying the oldest cursor served; a cursor
//!   past everything the store holds is a 400 (`cursor_ahead`).
//!
//! - `GET /v1/feed/status` — the shards' marks (a core resumes after its shard's),
//!   the cursor after everything held, and on a replica its primary and lag
//!   ([`wire::StatusBody`]) for a core's or a reader's token; a member firm's token
//!   gets its own view only (its orders held and the cursor after its newest order,
//!   [`wire::FirmStatus`]), none of the feed-wide counters.
//! - `GET /v1/feed/openapi.json` — this API's OpenAPI document (no token needed).
//! - `GET /metrics` — the server's figures in the Prometheus text format
//!   ([`metrics`](tranche_feed_service::metrics):
//!   writes and `seq` per shard, reads per protocol, lag, batch sizes, long-poll
//!   wake-ups); with tokens configured, a reader's token is needed.
//! - `GET /` — a dashboard of those figures (no token needed to load it; it asks for
//!   a reader's).
//!
//! **Shards and replicas.** [`feed_router`] serves a [`FeedService`]: one store and
//! writer ([`router`]), a primary's shards with a writer task each
//! ([`tranche_feed_service::spawn_writers`]), or a read replica's copy. With shards, a
//! core posts to its own with
//! `POST /v1/feed/events?shard=k` (0 by default; a shard the server lacks is a 400
//! naming `shard`), each shard numbering its own `seq` and `rec`, and a read merges
//! every shard through a [`VectorCursor`]: the client's
//! opaque `cursor` holds a position per shard, and a client cannot tell how many
//! there are (a one-shard feed's cursors are a store's, and stay valid when shards
//! are added). A cursor naming more shards than the server has is a 400
//! (`bad_cursor`); one too old in any shard a 410 whose `oldest` keeps the other
//! shards' positions. A replica takes no events (403 `replica_read_only`) and serves
//! unfiltered reads only (a filter, or a firm's token, is a 400 `unfiltered_only`).
//!
//! Bearer tokens ([`FeedTokens`]): a core's token may only post, a firm's client's
//! token may only read that firm's orders, a reader's may read all. With no tokens
//! every request is let through: serve such a router on loopback only (`tranche feed
//! serve` refuses any other address without `--tokens`). Errors are
//! `{"error": {"code", "message", ...}}` ([`wire::ErrorBody`]).
//!
//! **The listener.** [`serve`] is the door member firms use: the router behind
//! `tranche-http-door`, the accept loop `tranche server` uses too, with the same
//! [`Limits`] (header, idle and body timeouts, a connection cap) and the same flags and
//! defaults. A body later than its timeout is answered 408 `body_timeout`. A long poll in
//! flight is not idle: the idle and header clocks stop while a request is answered, so
//! a `wait_ms` of up to [`MAX_WAIT_MS`] (30 s) outlasts the 10 s timeouts.

#![deny(missing_docs)]

mod auth;
mod dashboard;
mod metrics_route;
mod openapi;
mod status;
pub mod wire;

pub use status::feed_router;
pub use tranche_http_door::{Limits, LimitsError};

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
pub use tranche_feed::MAX_READ_LIMIT;
use tranche_feed::{
    BrokerId, Filter, FirmId, InstrumentId, ReadError, ShardReadError, Store, VectorCursor,
};
use tranche_feed_service::{
    FeedService, FeedTokens, Grant, Ingest, NoIngest, Protocol, Refused, DEFAULT_LIMIT,
    DEFAULT_WAIT_MS, MAX_WAIT_MS,
};

use crate::wire::{Applied, ErrorBody, ErrorDetail, EventBatch, OrdersPage, WireOrder};

/// The largest request body accepted (about 150,000 events).
pub const BODY_LIMIT: usize = 32 << 20;
#[derive(Clone)]
struct AppState {
    feed: std::sync::Arc<FeedService>,
    shutdown: CancellationToken,
    tokens: std::sync::Arc<FeedTokens>,
}

/// The feed's routes over one `store`, writing through `ingest`, for the holders of
/// `tokens` (none: for everyone, so loopback only). Cancelling `shutdown` makes
/// waiting long polls answer at once with what is ready (for a quick graceful
/// shutdown). [`feed_router`] serves several shards, or a replica.
pub fn router(
    store: Store,
    ingest: Ingest,
    shutdown: CancellationToken,
    tokens: FeedTokens,
) -> Router {
    feed_router(FeedService::single(store, ingest), shutdown, tokens)
}

/// Serve `feed` on `listener` to the holders of `tokens` within `limits`, until
/// `shutdown` is cancelled: waiting long polls then answer at once, and the requests in
/// flight finish before it returns. The only error is `limits` refused, before anything
/// is served.
pub async fn serve(
    listener: TcpListener,
    feed: FeedService,
    tokens: FeedTokens,
    limits: Limits,
    shutdown: CancellationToken,
) -> Result<(), LimitsError> {
    let router = feed_router(feed, shutdown.clone(), tokens);
    tranche_http_door::serve(listener, router, limits, shutdown).await
}

fn routes(feed: FeedService, shutdown: CancellationToken, tokens: FeedTokens) -> Router {
    Router::new()
        .route("/v1/feed/events", post(post_events))
        .route("/v1/feed/orders", get(get_orders))
        .route("/v1/feed/status", get(status::status))
        .route("/v1/feed/openapi.json", get(openapi::document))
        .route("/metrics", get(metrics_route::metrics_text))
        .route("/", get(dashboard::page))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(AppState {
            feed: std::sync::Arc::new(feed),
            shutdown,
            tokens: std::sync::Arc::new(tokens),
        })
}

/// An error answer.
pub(crate) struct ApiError {
    status: StatusCode,
    detail: ErrorDetail,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            detail: ErrorDetail {
                code: code.into(),
                message: message.into(),
                index: None,
                field: None,
                oldest: None,
            },
        }
    }

    fn field(mut self, field: impl Into<String>) -> ApiError {
        self.detail.field = Some(field.into());
        self
    }

    fn bad_batch(index: usize, field: &str, message: String) -> ApiError {
        let mut error = ApiError::new(StatusCode::BAD_REQUEST, "bad_batch", message).field(field);
        error.detail.index = Some(index);
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let mut response = (status, Json(ErrorBody { error: self.detail })).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<NoIngest> for ApiError {
    fn from(e: NoIngest) -> ApiError {
        match e {
            NoIngest::Replica => {
                ApiError::new(StatusCode::FORBIDDEN, "replica_read_only", e.to_string())
            }
            NoIngest::NoSuchShard { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.to_string()).field("shard")
            }
        }
    }
}

impl From<ReadError> for ApiError {
    fn from(error: ReadError) -> ApiError {
        match error {
            ReadError::TooOld { oldest, .. } => {
                let mut e = ApiError::new(StatusCode::GONE, "cursor_too_old", error.to_string())
                    .field("cursor");
                e.detail.oldest = Some(oldest.to_string());
                e
            }
            ReadError::Ahead { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "cursor_ahead", error.to_string())
                    .field("cursor")
            }
        }
    }
}

impl From<ShardReadError> for ApiError {
    fn from(error: ShardReadError) -> ApiError {
        let message = error.to_string();
        match error {
            ShardReadError::TooOld { oldest, .. } => {
                let mut e =
                    ApiError::new(StatusCode::GONE, "cursor_too_old", message).field("cursor");
                e.detail.oldest = Some(oldest.to_string());
                e
            }
            ShardReadError::Ahead { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "cursor_ahead", message).field("cursor")
            }
            ShardReadError::Shards { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "bad_cursor", message).field("cursor")
            }
            ShardReadError::Unfiltered { filter } => {
                let field = match filter {
                    Filter::Broker(_) => "broker",
                    Filter::Instrument(_) => "instrument",
                    _ => "firm",
                };
                ApiError::new(StatusCode::BAD_REQUEST, "unfiltered_only", message).field(field)
            }
        }
    }
}

/// Apply one batch of events, all-or-nothing, once durable.
#[utoipa::path(
    post,
    path = "/v1/feed/events",
    params(EventsQuery),
    request_body = EventBatch,
    responses(
        (status = 200, description = "Applied and durable", body = Applied),
        (status = 400, description = "A bad batch (`index`, `field`): nothing applied; or a shard the server does not have", body = ErrorBody),
        (status = 401, description = "No or unknown token (with tokens configured)", body = ErrorBody),
        (status = 403, description = "Not a core's token, or a read replica (`replica_read_only`: post to its primary)", body = ErrorBody),
        (status = 408, description = "The body did not arrive within the server's body timeout (`body_timeout`): nothing applied", body = ErrorBody),
        (status = 413, description = "Body over 32 MiB", body = ErrorBody),
        (status = 500, description = "The store could not write: nothing acknowledged", body = ErrorBody),
        (status = 503, description = "Shutting down", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn post_events(
    State(app): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, QueryRejection>,
    body: Body,
) -> Result<Response, ApiError> {
    // Before the body is read: a stranger's 32 MiB is not worth reading.
    if !app.tokens.is_empty() && auth::grant(&app.tokens, &headers)? != Grant::Core {
        return Err(auth::forbidden("only a core's token may post events"));
    }
    let Query(q) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    let ingest = app.feed.ingest_for(q.shard.unwrap_or(0))?;
    let body = axum::body::to_bytes(body, BODY_LIMIT).await.map_err(|e| {
        if let Some(late) = tranche_http_door::body_timed_out(&e) {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                late.to_string(),
            );
        }
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "bad_request",
            format!("could not read the body (at most {BODY_LIMIT} bytes): {e}"),
        )
    })?;
    let batch: EventBatch =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(&body))
            .map_err(|error| {
                let path = error.path().clone();
                let mut index = None;
                let mut field = None;
                for segment in path.iter() {
                    match segment {
                        serde_path_to_error::Segment::Seq { index: i } if index.is_none() => {
                            index = Some(*i)
                        }
                        serde_path_to_error::Segment::Map { key } if index.is_some() => {
                            field = Some(key.clone())
                        }
                        _ => {}
                    }
                }
                let message = format!("{path}: {}", error.into_inner());
                match (index, field) {
                    (Some(i), Some(f)) => ApiError::bad_batch(i, &f, message),
                    _ => {
                        let error = ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message);
                        match path.iter().next() {
                            // Not even an object with `events`: no field to name.
                            None => error,
                            Some(_) => error.field(path.to_string()),
                        }
                    }
                }
            })?;
    let mut events = Vec::with_capacity(batch.events.len());
    for (index, event) in batch.events.iter().enumerate() {
        let event = event.to_event().map_err(|e| {
            ApiError::bad_batch(
                index,
                e.field,
                format!("event {index}, field {}: {}", e.field, e.problem),
            )
        })?;
        events.push(event);
    }
    let applied = events.len();
    match ingest.apply(events).await {
        Ok(position) => Ok(Json(Applied {
            applied,
            position: position.to_string(),
        })
        .into_response()),
        Err(Refused::Batch(error)) => Err(ApiError::bad_batch(
            error.index,
            error.field,
            error.to_string(),
        )),
        Err(Refused::Store) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_failed",
            "the store could not write the batch (see the server's log); nothing was acknowledged",
        )),
        Err(Refused::Closed) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the feed's writer has stopped",
        )),
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct EventsQuery {
    /// The shard (trading core) the events belong to, from 0 (the default) to the
    /// server's `--shards` minus one; each shard numbers its own `seq` and `rec`.
    shard: Option<usize>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct OrdersQuery {
    /// Read after this cursor (a `next_cursor`); default: from the start.
    cursor: Option<String>,
    /// Only this firm's orders (at most one of firm, broker, instrument).
    firm: Option<u32>,
    /// Only this broker account's orders.
    broker: Option<u32>,
    /// Only this instrument's orders.
    instrument: Option<u32>,
    /// Most orders in the answer (default 1,000, cut to 10,000).
    limit: Option<usize>,
    /// Wait until this many orders are ready (default 1, cut to `limit`).
    min_batch: Option<usize>,
    /// Wait at most this long for them (default 1,000, cut to 30,000; 0: answer now).
    wait_ms: Option<u64>,
    /// Once some are ready but fewer than `min_batch`, wait at most this many
    /// microseconds more (default 0: until `min_batch` or `wait_ms`; cut to 65,535).
    linger_us: Option<u64>,
}

/// The orders changed after a cursor, each once at its latest version: the batched
/// long poll.
#[utoipa::path(
    get,
    path = "/v1/feed/orders",
    params(OrdersQuery),
    responses(
        (status = 200, description = "Up to `limit` orders (maybe none, after `wait_ms`)", body = OrdersPage),
        (status = 400, description = "Malformed or altered cursor (`bad_cursor`), a cursor past the store (`cursor_ahead`), several filter keys, a bad parameter, a filter on a read replica (`unfiltered_only`)", body = ErrorBody),
        (status = 401, description = "No or unknown token (with tokens configured)", body = ErrorBody),
        (status = 403, description = "The token may not read this (a core's, or another firm's)", body = ErrorBody),
        (status = 410, description = "The cursor is older than retention: `oldest` is the oldest served", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
async fn get_orders(
    State(app): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<OrdersQuery>, QueryRejection>,
) -> Result<Json<OrdersPage>, ApiError> {
    let Query(q) =
        query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    let filter = match (q.firm, q.broker, q.instrument) {
        (None, None, None) => Filter::All,
        (Some(f), None, None) => Filter::Firm(FirmId(f)),
        (None, Some(b), None) => Filter::Broker(BrokerId(b)),
        (None, None, Some(i)) => Filter::Instrument(InstrumentId(i)),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "at most one of firm, broker and instrument",
            )
            .field("firm"))
        }
    };
    let filter = if app.tokens.is_empty() {
        filter
    } else {
        match (auth::grant(&app.tokens, &headers)?, filter) {
            (Grant::Reader, filter) => filter,
            (Grant::Firm(firm), Filter::All) => Filter::Firm(firm),
            (Grant::Firm(firm), Filter::Firm(asked)) if asked == firm => filter,
            (Grant::Firm(firm), _) => {
                return Err(auth::forbidden(format!(
                    "this token may read firm {firm}'s orders only (no filter or firm={firm})"
                )))
            }
            (Grant::Core, _) => return Err(auth::forbidden("a core's token may not read")),
        }
    };
    let cursor = match &q.cursor {
        None => VectorCursor::START,
        Some(text) => text.parse::<VectorCursor>().map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_cursor", e.to_string()).field("cursor")
        })?,
    };
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_READ_LIMIT);
    if limit == 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "limit must be at least 1",
        )
        .field("limit"));
    }
    let min_batch = q.min_batch.unwrap_or(1).min(limit);
    let wait = Duration::from_millis(q.wait_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
    let linger = tranche_feed_service::linger_of(q.linger_us.unwrap_or(0));

    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + wait;
    let shards = &app.feed.shards;
    let outcome = tokio::select! {
        biased;
        outcome = shards.wait_for(filter, &cursor, min_batch, deadline, linger) => Some(outcome?),
        () = app.shutdown.cancelled() => None,
    };
    let waited = started.elapsed();
    let mut page = Vec::with_capacity(outcome.map_or(0, |o| o.ready));
    let next = shards.read_into(&cursor, filter, limit, &mut page)?;
    let read = started.elapsed() - waited;
    app.feed
        .metrics
        .read_answered(Protocol::Http, &page, outcome);
    let orders: Vec<WireOrder> = page.iter().map(WireOrder::from).collect();
    Ok(Json(OrdersPage {
        next_cursor: next.to_string(),
        count: orders.len(),
        oldest_created_at: page.iter().map(|o| o.created_at).min(),
        server_wait_us: waited.as_micros() as u64,
        server_read_us: read.as_micros() as u64,
        orders,
    }))
}
