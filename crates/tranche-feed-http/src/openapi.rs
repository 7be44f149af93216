//! The feed's API description, generated from the handlers' `#[utoipa::path]`
//! attributes and the wire types' `ToSchema` derives. A test checks that it names
//! exactly the served routes.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::wire::{
    Applied, ErrorBody, ErrorDetail, EventBatch, EventType, FirmStatus, OrdersPage,
    ReplicaShardStatus, ReplicaStatus, ShardStatus, StatusBody, WireEvent, WireOrder, WireSide,
    WireStatus,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tranche order-state feed",
        version = "1",
        description = "Trading cores post order events; clients long-poll the orders changed after their cursor, \
each once at its latest version. Times are nanoseconds since the Unix epoch (JSON integers beyond 2^53: parse them as big integers). \
Errors are {\"error\": {\"code\", \"message\", \"index\"?, \"field\"?, \"oldest\"?}}. \
Tokens: `core` may only post, `firm=N` reads only firm N (and sees only its own view in /v1/feed/status), `reader` reads all; without configured tokens the server listens on loopback only and needs none. \
A server of several shards (trading cores) takes each core's events with `?shard=k` and merges the shards in every read; its cursors are opaque and hold a position per shard. \
A read replica serves unfiltered reads only and takes no events."
    ),
    servers((url = "/")),
    paths(crate::post_events, crate::get_orders, crate::status::status, document, crate::metrics_route::metrics_text, crate::dashboard::page),
    components(schemas(
        Applied, ErrorBody, ErrorDetail, EventBatch, EventType, OrdersPage, WireEvent,
        WireOrder, WireSide, WireStatus, StatusBody, ShardStatus, ReplicaStatus,
        ReplicaShardStatus, FirmStatus
    )),
    modifiers(&Bearer)
)]
struct FeedApi;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The document, generated once.
pub fn json() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        FeedApi::openapi()
            .to_pretty_json()
            .expect("the document serialises")
    })
}

/// This API's OpenAPI document (no token needed).
#[utoipa::path(
    get,
    path = "/v1/feed/openapi.json",
    responses((status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"))
)]
pub(crate) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], json())
}
