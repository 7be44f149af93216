//! The web dashboard: one static page, no build toolchain. It calls the same `/v1` API
//! as any client (with a bearer token when the server needs one) and follows the
//! change feed (`after=latest`) to refresh runs' O(1) progress as soon as jobs move.

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("dashboard.html");

/// The web dashboard (HTML; it asks for a token when the API needs one).
#[utoipa::path(
    get,
    path = "/",
    operation_id = "dashboard",
    tag = "service",
    responses((status = 200, description = "HTML page", body = String, content_type = "text/html"))
)]
pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        PAGE,
    )
}
