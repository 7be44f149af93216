use std::collections::BTreeSet;

use serde_json::json;

use crate::live::{lease, start};

/// Every sample line is `name{labels} value` with a float value; returns the metric
/// names (histogram series reduced to their family).
fn parse(text: &str) -> BTreeSet<String> {
    let mut families = BTreeSet::new();
    let mut typed = BTreeSet::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut w = rest.split_whitespace();
                let (name, kind) = (w.next().unwrap(), w.next().unwrap());
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                    "bad TYPE line {line:?}"
                );
                assert!(typed.insert(name.to_string()), "{name} is typed twice");
                families.insert(name.to_string());
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(
                    labels.starts_with('{') && labels.ends_with('}'),
                    "bad labels in {line:?}"
                );
            }
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        families.insert(family.to_string());
    }
    families
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_text_parses_and_has_every_family() {
    let s = start().await;
    let items: Vec<_> = (0..4)
        .map(|_| json!({"job": {"kind": "x", "queue": "mq"}}))
        .collect();
    s.post_ok(
        "/v1/batches",
        &json!({"run": "metrics/1", "items": items}),
        201,
    )
    .await;
    let jobs = s.poll("mq", 3, 0).await;
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [lease(&jobs[0])]}),
        200,
    )
    .await;
    s.post_ok(
        "/v1/workers/fail",
        &json!({"failures": [{"job": jobs[1]["id"], "attempt": 1, "error": "e", "retry_in_ms": 60000}]}),
        200,
    )
    .await;
    // A report for an attempt that does not hold its job counts as a lost lease (an
    // expiry is counted by the backend once it has recovered the job: see expiry.rs).
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [{"job": jobs[2]["id"], "attempt": 9}]}),
        200,
    )
    .await;
    let resp = s.get("/metrics").await;
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = resp.text().await.unwrap();
    let families = parse(&text);
    for f in [
        "tranche_jobs",
        "tranche_queue_depth",
        "tranche_run_jobs",
        "tranche_jobs_submitted_total",
        "tranche_http_jobs_polled_total",
        "tranche_http_jobs_reported_total",
        "tranche_http_leases_lost_total",
        "tranche_jobs_started_total",
        "tranche_jobs_finished_total",
        "tranche_job_retries_total",
        "tranche_lease_expiries_total",
        "tranche_job_queue_wait_seconds",
        "tranche_job_run_seconds",
        "tranche_http_requests_total",
        "tranche_http_request_duration_seconds",
    ] {
        assert!(families.contains(f), "missing {f} in:\n{text}");
    }
    assert!(
        text.contains("tranche_queue_depth{queue=\"mq\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("tranche_jobs{queue=\"mq\",state=\"running\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("tranche_run_jobs{run=\"metrics/1\",state=\"succeeded\"} 1"),
        "{text}"
    );
    for line in [
        "tranche_jobs_started_total{queue=\"mq\"} 3",
        "tranche_jobs_finished_total{queue=\"mq\",outcome=\"succeeded\"} 1",
        "tranche_job_retries_total{queue=\"mq\"} 1",
        "tranche_job_queue_wait_seconds_count{queue=\"mq\"} 3",
        "tranche_job_run_seconds_count{queue=\"mq\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
    }
    assert!(
        text.contains("tranche_job_run_seconds_bucket{queue=\"mq\",le="),
        "{text}"
    );
}
