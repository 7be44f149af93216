//! What a feed server serves: its shards and their writers, or a replica's copy of a
//! primary; and `GET /v1/feed/status`.

use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::{Json, Router};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_feed::{ReplicaLag, Shards, Store, StoreError, Writer};

use crate::metrics::FeedMetrics;
use crate::wire::{ReplicaStatus, ShardStatus, StatusBody};
use crate::{ApiError, AppState, FeedTokens, Ingest};

/// The primary a replica follows, for its status.
#[derive(Clone, Debug)]
pub struct ReplicaOf {
    /// The primary's address, as given to the replica.
    pub primary: String,
    /// How far behind it the replica is.
    pub lag: ReplicaLag,
}

/// What a feed server serves, over HTTP ([`feed_router`]) and TCP alike.
#[derive(Clone, Debug)]
pub struct FeedService {
    /// The shards readers read, by [`VectorCursor`](tranche_feed::VectorCursor).
    pub shards: Shards,
    /// Shard `k`'s writer task is `ingest[k]`; none on a read replica, which takes no
    /// events (they go to its primary).
    pub ingest: Vec<Ingest>,
    /// The server's figures (`GET /metrics`), which every protocol's reads record.
    pub metrics: FeedMetrics,
    /// On a read replica: its primary and lag.
    pub replica: Option<ReplicaOf>,
}

impl FeedService {
    /// One store and its writer task: what [`crate::router`] serves.
    pub fn single(store: Store, ingest: Ingest) -> FeedService {
        FeedService {
            shards: Shards::single(store),
            metrics: ingest.metrics().clone(),
            ingest: vec![ingest],
            replica: None,
        }
    }

    /// A primary's shards, shard `k` written through `ingest[k]` (one per shard:
    /// [`spawn_writers`]).
    ///
    /// # Panics
    /// If there is not one writer task per shard.
    pub fn primary(shards: Shards, ingest: Vec<Ingest>) -> FeedService {
        assert_eq!(shards.len(), ingest.len(), "one writer task per shard");
        FeedService {
            metrics: ingest[0].metrics().clone(),
            shards,
            ingest,
            replica: None,
        }
    }

    /// A read replica's shards, following `replica`: unfiltered reads only, no
    /// writes. Its lag is exported with the metrics.
    pub fn replica(shards: Shards, replica: ReplicaOf) -> FeedService {
        let metrics = FeedMetrics::new(shards.len());
        metrics.watch_replica(replica.lag.clone());
        FeedService {
            shards,
            ingest: Vec::new(),
            metrics,
            replica: Some(replica),
        }
    }

    /// The writer task of shard `shard`, or why a batch cannot go to it.
    pub(crate) fn ingest_for(&self, shard: usize) -> Result<&Ingest, ApiError> {
        if self.replica.is_some() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "replica_read_only",
                "this server is a read replica: post events to its primary",
            ));
        }
        self.ingest.get(shard).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "expected a shard from 0 to {}, got {shard}",
                    self.ingest.len().saturating_sub(1)
                ),
            )
            .field("shard")
        })
    }
}

/// Starts one writer task per shard ([`crate::spawn_writer_with`]), recording into
/// one [`FeedMetrics`] with a series per shard; returns them shard 0 first, with
/// their tasks.
pub fn spawn_writers(
    writers: Vec<Writer>,
    sync_every: Option<Duration>,
) -> (Vec<Ingest>, Vec<JoinHandle<Result<(), StoreError>>>) {
    let metrics = FeedMetrics::new(writers.len());
    writers
        .into_iter()
        .enumerate()
        .map(|(shard, writer)| crate::spawn_writer_with(writer, sync_every, metrics.clone(), shard))
        .unzip()
}

/// The feed's routes over `feed`, for the holders of `tokens` (none: for everyone,
/// so loopback only). Cancelling `shutdown` makes waiting long polls answer at once.
pub fn feed_router(feed: FeedService, shutdown: CancellationToken, tokens: FeedTokens) -> Router {
    crate::routes(feed, shutdown, tokens)
}

/// The server's shards, and on a replica how far behind its primary it is.
#[utoipa::path(
    get,
    path = "/v1/feed/status",
    responses(
        (status = 200, description = "Shards and marks; a replica's lag", body = StatusBody),
        (status = 401, description = "No or unknown token (with tokens configured)", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn status(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<StatusBody>, ApiError> {
    if !app.tokens.is_empty() {
        app.tokens.grant(&headers)?;
    }
    let feed = &app.feed;
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
        role: if replica.is_some() {
            "replica"
        } else {
            "primary"
        }
        .into(),
        newest_cursor: feed.shards.newest().to_string(),
        shards,
        replica,
    }))
}
