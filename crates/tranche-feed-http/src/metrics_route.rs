//! `GET /metrics`: the server's [`FeedMetrics`](tranche_feed_service::FeedMetrics)
//! as text, for a reader's token.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use tranche_feed::Store;
use tranche_feed_service::Grant;

use crate::{auth, ApiError, AppState};

/// The feed's figures in the Prometheus text format. Open to all when the server has
/// no tokens (it is then on loopback only); otherwise a reader's token is needed, as
/// the figures cover every firm.
#[utoipa::path(
    get,
    path = "/metrics",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
        (status = 401, description = "No or unknown token (with tokens configured)", body = crate::wire::ErrorBody),
        (status = 403, description = "Not a reader's token", body = crate::wire::ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn metrics_text(
    State(app): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if !app.tokens.is_empty() && auth::grant(&app.tokens, &headers)? != Grant::Reader {
        return Err(auth::forbidden(
            "only a reader's token may read the metrics",
        ));
    }
    let stores: Vec<Store> = (0..app.feed.shards.len())
        .filter_map(|k| app.feed.shards.shard(k))
        .collect();
    let text = app.feed.metrics.render(&stores.iter().collect::<Vec<_>>());
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
