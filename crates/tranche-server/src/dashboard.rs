//! The web dashboard: one static page, no build toolchain. It calls the same `/v1` API
//! as any client (with a bearer token when the server needs one) and follows the
//! change feed (`after=latest`) to refresh runs' O(1) progress as soon as jobs move.
//! First a submission date's ACH payment files (per bank: what stops entries going
//! out, entries by state, each window's times, files by state and totals, the file ID
//! modifiers left): on a payment day that is where an operator looks first, and a
//! server without a ledger moves the panel last. Then runs, queues (pause, resume), a job list (filters and keyset pages of `/v1/jobs`),
//! a job page (attempts, result, retry, cancel, delete as its state allows), the
//! schedules with their next due time and the limits.
//! Values from the API go in as text, never as markup, and personal data is shown as
//! the API masks it for the token.

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

#[cfg(test)]
mod tests {
    use super::PAGE;

    /// The page works offline (it loads nothing from elsewhere) and never parses what
    /// the API returns as markup: every value goes into the page as text.
    #[test]
    fn the_page_loads_nothing_else_and_builds_no_markup_from_data() {
        for loads in ["<script src", "<link", "@import", "<iframe", "<img"] {
            assert!(!PAGE.contains(loads), "the page loads something: {loads}");
        }
        for markup in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
        ] {
            assert!(!PAGE.contains(markup), "the page builds markup: {markup}");
        }
    }
}
