use serde_json::json;

use crate::live::{expect, lease, start};

fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_finished_runs_and_keeps_unfinished_ones() {
    let s = start().await;
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "night/1", "job": {"kind": "note"}}),
        201,
    )
    .await;
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "night/2", "job": {"kind": "note", "queue": "later"}}),
        201,
    )
    .await;
    let jobs = s.poll("default", 1, 0).await;
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [lease(&jobs[0])]}),
        200,
    )
    .await;
    // Strictly after night/1 finished, on the server's (system) clock.
    let finished = s.get_ok("/v1/runs/night%2F1").await["finished_at"]
        .as_i64()
        .expect("night/1 finished");
    let mut before = now_micros();
    while before <= finished {
        before = now_micros();
    }

    let dry = s
        .post_ok(
            "/v1/prune",
            &json!({"before": before, "dry_run": true}),
            200,
        )
        .await;
    assert_eq!(
        dry,
        json!({"runs": 1, "jobs": 1, "records": 0, "more": false, "dry_run": true})
    );
    assert_eq!(
        s.get_ok("/v1/runs").await["runs"].as_array().unwrap().len(),
        2
    );

    let done = s
        .post_ok("/v1/prune", &json!({"before": before, "limit": 1}), 200)
        .await;
    assert_eq!(
        done,
        json!({"runs": 1, "jobs": 1, "records": 0, "more": true, "dry_run": false})
    );
    expect(s.get("/v1/runs/night%2F1").await, 404).await;
    s.get_ok("/v1/runs/night%2F2").await;
    let again = s
        .post_ok("/v1/prune", &json!({"before": before}), 200)
        .await;
    assert_eq!(
        (again["runs"].as_u64(), again["more"].as_bool()),
        (Some(0), Some(false))
    );

    let future = s
        .post_ok(
            "/v1/prune",
            &json!({"before": now_micros() + 3_600_000_000}),
            400,
        )
        .await;
    assert_eq!(future["error"]["field"], "before");
    let zero = s
        .post_ok("/v1/prune", &json!({"before": 0, "limit": 0}), 400)
        .await;
    assert_eq!(zero["error"]["field"], "limit");
}
