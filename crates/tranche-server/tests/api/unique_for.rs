//! `unique_for_ms`: a unique key across runs for a window, on a manual clock.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tranche_server::ServerConfig;
use tranche_types::{ManualClock, Timestamp};

use crate::live::{expect, ids, start_on};

const HOUR_MS: u64 = 3_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_with_a_window_is_one_job_across_runs_until_the_window_passes() {
    let clock = ManualClock::new(Timestamp(1_800_000_000_000_000));
    let s = start_on(ServerConfig::default(), Arc::new(clock.clone())).await;
    let job = json!({"kind": "refresh", "unique_key": "report-7", "unique_for_ms": HOUR_MS});

    let first = s
        .post_ok("/v1/jobs", &json!({"run": "tick/1", "job": job}), 201)
        .await;
    assert_eq!(first["existed"], false);
    clock.advance(Duration::from_secs(59 * 60));
    let again = s
        .post_ok("/v1/jobs", &json!({"run": "tick/2", "job": job}), 201)
        .await;
    assert_eq!(again["existed"], true, "another run, inside the window");
    assert_eq!(ids(&again), ids(&first));
    let batch = s
        .post_ok(
            "/v1/batches",
            &json!({"run": "tick/2", "items": [
                {"chain": [job, {"kind": "mail"}]},
                {"job": {"kind": "refresh", "unique_key": "report-7"}}
            ]}),
            201,
        )
        .await;
    let items = batch["items"].as_array().unwrap();
    assert_eq!(items[0]["existed"], true, "a chain is known by its head");
    assert_eq!(ids(&items[0]), ids(&first));
    assert_eq!(
        items[1]["existed"], false,
        "a run-scoped key is another namespace"
    );

    clock.advance(Duration::from_secs(60));
    let after = s
        .post_ok("/v1/jobs", &json!({"run": "tick/3", "job": job}), 201)
        .await;
    assert_eq!(after["existed"], false, "past the window, a new job");
    assert_ne!(ids(&after), ids(&first));
    let record = s.get_ok(&format!("/v1/jobs/{}", ids(&after)[0])).await;
    assert_eq!(record["unique_key"], "report-7");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_windows_are_refused_naming_the_field() {
    let clock = ManualClock::new(Timestamp(1_800_000_000_000_000));
    let s = start_on(ServerConfig::default(), Arc::new(clock)).await;
    let s = &s;
    let refused = |body| async move { expect(s.post("/v1/batches", &body).await, 400).await };

    let err = refused(json!({"run": "bad/1", "items": [
        {"job": {"kind": "x", "unique_key": "k", "unique_for_ms": 0}}
    ]}))
    .await;
    assert_eq!(err["error"]["field"], "items[0].job.unique_for_ms");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected 1 to 31622400000 (366 days), got 0"),
        "{err}"
    );

    let err = refused(json!({"run": "bad/1", "items": [
        {"job": {"kind": "x", "unique_for_ms": 1000}}
    ]}))
    .await;
    assert_eq!(err["error"]["field"], "unique_for");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected a unique_key with it, got no unique_key"),
        "{err}"
    );

    let err = refused(json!({"run": "bad/1", "items": [
        {"chain": [{"kind": "a"}, {"kind": "b", "unique_key": "k", "unique_for_ms": 1000}]}
    ]}))
    .await;
    assert_eq!(err["error"]["field"], "unique_for");
    assert!(
        s.get("/v1/runs/bad%2F1").await.status().as_u16() == 404,
        "nothing of a refused batch is enqueued"
    );
}
