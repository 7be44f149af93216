//! Lease expiries in /metrics: a remote worker that dies holding jobs never reports,
//! yet the backend counts each of its leases when it recovers the job; a lease kept
//! alive by heartbeats, or lost to a cancel, is not.

use std::time::Duration;

use serde_json::{json, Value};

use crate::live::{lease, start, Live};

/// The value of one series (`name{labels}`), 0 when absent.
async fn series(s: &Live, series: &str) -> u64 {
    let text = s.get("/metrics").await.text().await.unwrap();
    let prefix = format!("{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |v| v.parse().unwrap())
}

const EXPIRED: &str = "tranche_lease_expiries_total{queue=\"exq\"}";

fn by_kind<'a>(jobs: &'a [Value], kind: &str) -> &'a Value {
    jobs.iter().find(|j| j["kind"] == kind).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_a_dead_worker_are_counted_as_expired() {
    let s = start().await;
    let job = |kind: &str, attempts: u32| json!({"job": {"kind": kind, "queue": "exq", "max_attempts": attempts}});
    s.post_ok(
        "/v1/batches",
        &json!({"run": "expiry/1", "items": [job("dies", 3), job("dies-last", 1), job("kept", 3), job("cancelled", 3)]}),
        201,
    )
    .await;
    let held = s
        .post_ok(
            "/v1/workers/poll",
            &json!({"queue": "exq", "max": 4, "lease_ms": 1000}),
            200,
        )
        .await["jobs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(held.len(), 4);
    let (dies, dies_last, kept, cancelled) = (
        by_kind(&held, "dies"),
        by_kind(&held, "dies-last"),
        by_kind(&held, "kept"),
        by_kind(&held, "cancelled"),
    );
    s.post_ok(
        &format!("/v1/jobs/{}/cancel", cancelled["id"]),
        &json!(null),
        200,
    )
    .await;

    // The worker holding `dies` and `dies-last` is gone; another keeps heartbeating
    // `kept` (and learns it lost `cancelled`) while polling the queue, until the job
    // of the dead worker comes back to it and both expiries are counted.
    let mut retried = None;
    let mut lost_seen = false;
    tranche_test_support::poll_until_async(
        "both expiries counted",
        Duration::from_secs(30),
        async || {
            if retried.is_some() && series(&s, EXPIRED).await >= 2 {
                return true;
            }
            let beats: Vec<Value> = if lost_seen {
                vec![lease(kept)]
            } else {
                vec![lease(kept), lease(cancelled)]
            };
            let hb = s
                .post_ok(
                    "/v1/workers/heartbeat",
                    &json!({"leases": beats, "lease_ms": 1000}),
                    200,
                )
                .await;
            if !lost_seen {
                assert_eq!(hb["lost"], json!([lease(cancelled)]));
                lost_seen = true;
            } else {
                assert_eq!(hb["lost"], json!([]), "a heartbeated lease holds");
            }
            if retried.is_none() {
                retried = s.poll("exq", 1, 300).await.pop();
            } else {
                // Paces the loop like the worker's next poll would.
                assert!(s.poll("exq-idle", 1, 300).await.is_empty());
            }
            false
        },
    )
    .await;
    let retried = retried.unwrap();
    assert_eq!(
        (&retried["id"], &retried["attempt"]),
        (&dies["id"], &json!(2))
    );
    let acks = s
        .post_ok(
            "/v1/workers/complete",
            &json!({"results": [lease(kept), lease(&retried)]}),
            200,
        )
        .await;
    assert_eq!(acks["acks"], json!(["applied", "applied"]));
    let last = s.get_ok(&format!("/v1/jobs/{}", dies_last["id"])).await;
    assert_eq!(last["state"], "failed");
    assert!(last["error"].as_str().unwrap().contains("lease expired"));

    assert_eq!(
        series(&s, EXPIRED).await,
        2,
        "the two leases of the dead worker, not the kept or the cancelled one"
    );
    for (name, want) in [
        ("tranche_jobs_started_total{queue=\"exq\"}", 5),
        (
            "tranche_jobs_finished_total{queue=\"exq\",outcome=\"succeeded\"}",
            2,
        ),
        (
            "tranche_jobs_finished_total{queue=\"exq\",outcome=\"failed\"}",
            1,
        ),
        ("tranche_job_retries_total{queue=\"exq\"}", 0),
        ("tranche_job_run_seconds_count{queue=\"exq\"}", 2),
    ] {
        assert_eq!(series(&s, name).await, want, "{name}");
    }
}
