//! `GET /v1/feed/status`, and the router over a [`FeedService`].

use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Json, Router};
use tokio_util::sync::CancellationToken;
use tranche_feed::{Filter, VectorCursor};
use tranche_feed_service::{FeedService, FeedTokens, Grant};

use crate::wire::{FirmStatus, ReplicaStatus, ShardStatus, StatusBody};
use crate::{auth, ApiError, AppState};

/// The feed's routes over `feed`, for the holders of `tokens` (none: for everyone,
/// so loopback only). Cancelling `shutdown` makes waiting long polls answer at once.
pub fn feed_router(feed: FeedService, shutdown: CancellationToken, tokens: FeedTokens) -> Router {
    crate::routes(feed, shutdown, tokens)
}

/// The server's shards, and on a replica how far behind its primary it is; for a
/// member firm's token, that firm's own view only.
#[utoipa::path(
    get,
    path = "/v1/feed/status",
    responses(
        (status = 200, description = "Shards and marks; a replica's lag. A firm's token: its orders held and its own newest cursor, no shards", body = StatusBody),
        (status = 400, description = "A firm's token on a read replica (`unfiltered_only`: firms read from the primary)", body = crate::wire::ErrorBody),
        (status = 401, description = "No or unknown token (with tokens configured)", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn status(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<StatusBody>, ApiError> {
    let grant = if app.tokens.is_empty() {
        None
    } else {
        Some(auth::grant(&app.tokens, &headers)?)
    };
    let feed = &app.feed;
    let role = if feed.replica.is_some() {
        "replica"
    } else {
        "primary"
    };
    if let Some(Grant::Firm(firm)) = grant {
        // The firm's own counters, as its reads would find them; nothing feed-wide.
        let filter = Filter::Firm(firm);
        let newest = feed.shards.newest_of(filter)?;
        let orders = feed
            .shards
            .count_after(&VectorCursor::START, filter, usize::MAX)?;
        return Ok(Json(StatusBody {
            role: role.into(),
            newest_cursor: newest.to_string(),
            shards: Vec::new(),
            replica: None,
            firm: Some(FirmStatus {
                firm: firm.0,
                orders,
            }),
        }));
    }
    let shards = (0..feed.shards.len())
        .filter_map(|k| feed.shards.shard(k).map(|store| (k, store)))
        .map(|(shard, store)| {
            let (seq, rec) = store.marks();
            ShardStatus {
                shard,
                seq,
                rec,
                orders: store.len(),
            }
        })
        .collect();
    let replica = feed.replica.as_ref().map(|replica| {
        let report = replica.lag.report();
        ReplicaStatus {
            primary: replica.primary.clone(),
            connected: report.connected(),
            seqs_behind: report.seqs_behind(),
            seconds_behind: report.seconds_behind(),
            shards: report
                .shards
                .iter()
                .map(|s| crate::wire::ReplicaShardStatus {
                    shard: s.shard,
                    primary_seq: s.primary_seq,
                    applied_seq: s.applied_seq,
                    seqs_behind: s.seqs_behind,
                    seconds_behind: s.seconds_behind,
                    connected: s.connected,
                    resyncs: s.resyncs,
                })
                .collect(),
        }
    });
    Ok(Json(StatusBody {
        role: role.into(),
        newest_cursor: feed.shards.newest().to_string(),
        shards,
        replica,
        firm: None,
    }))
}
