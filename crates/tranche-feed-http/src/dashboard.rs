//! The feed's dashboard: one static page (no build step, nothing loaded from
//! elsewhere) that scrapes `/metrics` every second, as a reader would, and shows per
//! shard the newest `seq` and `rec`, events and batches written per second, batch and
//! group-commit sizes and commit times; per protocol the answers and orders delivered
//! per second, the share of empty answers, rows per answer, lag percentiles, long-poll
//! wake-ups and time-outs; and a replica's lag when the server has one (whether it
//! follows its primary, how far behind in time and events, its start-overs). Rates come
//! from two scrapes about 10 s apart; percentiles from the histograms' buckets. It
//! asks for a reader's token when `/metrics` needs one.

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("dashboard.html");

/// The feed's dashboard (HTML; no token needed: the page holds no data, and asks for a
/// reader's token when `/metrics` needs one).
#[utoipa::path(
    get,
    path = "/",
    responses((status = 200, description = "HTML page", body = String, content_type = "text/html"))
)]
pub(crate) async fn page() -> impl IntoResponse {
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
    /// the server returns as markup: every value goes into the page as text.
    #[test]
    fn the_page_loads_nothing_else_and_builds_no_markup_from_data() {
        for loads in [
            "<script src",
            "<link",
            "@import",
            "<iframe",
            "<img",
            "http://",
            "https://",
        ] {
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

    /// Every metric the page reads is one the server writes.
    #[test]
    fn the_page_reads_only_metrics_the_server_writes() {
        let names = [
            tranche_feed_service::metrics::SEQ,
            tranche_feed_service::metrics::REC,
            tranche_feed_service::metrics::ORDERS,
            tranche_feed_service::metrics::EVENTS_WRITTEN,
            tranche_feed_service::metrics::BATCHES_WRITTEN,
            tranche_feed_service::metrics::BATCHES_REFUSED,
            tranche_feed_service::metrics::BATCH_EVENTS,
            tranche_feed_service::metrics::GROUP_BATCHES,
            tranche_feed_service::metrics::GROUP_SECONDS,
            tranche_feed_service::metrics::READS,
            tranche_feed_service::metrics::READS_EMPTY,
            tranche_feed_service::metrics::READ_ROWS,
            tranche_feed_service::metrics::READ_LAG,
            tranche_feed_service::metrics::WAKEUPS,
            tranche_feed_service::metrics::TIMEOUTS,
            tranche_feed_service::metrics::REPLICA_LAG_SECONDS,
            tranche_feed_service::metrics::REPLICA_LAG_EVENTS,
            tranche_feed_service::metrics::REPLICA_CONNECTED,
            tranche_feed_service::metrics::REPLICA_RESYNCS,
        ];
        let mut rest = PAGE;
        while let Some(at) = rest.find("\"tranche_feed_") {
            let quoted = &rest[at + 1..];
            let name = &quoted[..quoted.find('"').expect("a closing quote")];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|family| names.contains(family))
                .unwrap_or(name);
            assert!(names.contains(&family), "the page reads {name}");
            rest = &quoted[name.len()..];
        }
        for name in names {
            assert!(PAGE.contains(name), "the page does not show {name}");
        }
    }
}
