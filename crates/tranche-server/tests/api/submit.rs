use std::time::Duration;

use serde_json::json;
use tranche_server::{QueueLimits, ServerConfig};

use crate::live::{expect, ids, start, start_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_chain_group_and_batch_get_ids() {
    let s = start().await;
    let one = s
        .post_ok(
            "/v1/jobs",
            &json!({"run": "api/submit", "job": {"kind": "note", "args": {"client": "C1"}}}),
            201,
        )
        .await;
    assert_eq!(ids(&one).len(), 1);
    assert_eq!(one["existed"], false);
    let chain = s
        .post_ok(
            "/v1/chains",
            &json!({"run": "api/submit", "steps": [{"kind": "render"}, {"kind": "sign"}, {"kind": "mail"}]}),
            201,
        )
        .await;
    assert_eq!(ids(&chain).len(), 3);
    let group = s
        .post_ok(
            "/v1/groups",
            &json!({"run": "api/submit", "members": [{"kind": "m"}, {"kind": "m"}], "callback": {"kind": "reduce"}}),
            201,
        )
        .await;
    assert_eq!(ids(&group).len(), 3, "members, then the callback");
    let batch = s
        .post_ok(
            "/v1/batches",
            &json!({"run": "api/submit", "items": [
                {"job": {"kind": "x", "unique_key": "k1"}},
                {"job": {"kind": "x", "unique_key": "k1"}},
                {"chain": [{"kind": "a"}, {"kind": "b"}]},
                {"group": {"members": [{"kind": "m"}], "callback": {"kind": "cb"}}}
            ]}),
            201,
        )
        .await;
    let items = batch["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    assert_eq!(items[1]["existed"], true, "the same unique key is one job");
    assert_eq!(items[0]["ids"], items[1]["ids"]);
    let p = s.get_ok("/v1/runs/api%2Fsubmit").await;
    assert_eq!(p["total"], 1 + 3 + 3 + 1 + 2 + 2);
    let job = s.get_ok(&format!("/v1/jobs/{}", ids(&one)[0])).await;
    assert_eq!(
        job["args"],
        json!({"client": "C1"}),
        "args come back as JSON"
    );
    assert_eq!(job["state"], "available");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_ten_thousand_is_one_request_and_more_is_refused() {
    let s = start().await;
    let items: Vec<_> = (0..10_000)
        .map(|i| json!({"job": {"kind": "noop", "queue": "bulk", "args": i}}))
        .collect();
    let out = s
        .post_ok(
            "/v1/batches",
            &json!({"run": "api/bulk", "items": items}),
            201,
        )
        .await;
    assert_eq!(out["items"].as_array().unwrap().len(), 10_000);
    let p = s.get_ok("/v1/runs/api%2Fbulk").await;
    assert_eq!(
        (p["total"].as_u64(), p["available"].as_u64()),
        (Some(10_000), Some(10_000))
    );
    let mut items: Vec<_> = (0..9_999)
        .map(|_| json!({"job": {"kind": "noop"}}))
        .collect();
    items.push(json!({"chain": [{"kind": "a"}, {"kind": "b"}]}));
    let err = expect(
        s.post("/v1/batches", &json!({"run": "api/bulk", "items": items}))
            .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "items");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expected at most 10000 jobs in one request, got 10001"));
    let p = s.get_ok("/v1/runs/api%2Fbulk").await;
    assert_eq!(p["total"], 10_000, "nothing of a refused batch is enqueued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_name_the_field() {
    let s = start_with(ServerConfig {
        body_limit: 64 * 1024,
        ..ServerConfig::default()
    })
    .await;
    let err = expect(
        s.post(
            "/v1/batches",
            &json!({"run": "api/bad", "items": [
                {"job": {"kind": "ok"}},
                {"job": {"kind": "x", "max_attempts": "three"}}
            ]}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["code"], "invalid_json");
    assert_eq!(err["error"]["field"], "items[1].job.max_attempts");
    let err = expect(
        s.post(
            "/v1/jobs",
            &json!({"run": "api/bad", "job": {"kind": "x", "qeue": "typo"}}),
        )
        .await,
        400,
    )
    .await;
    assert!(
        err["error"]["field"].as_str().unwrap().starts_with("job"),
        "{err}"
    );
    assert!(err["error"]["message"].as_str().unwrap().contains("qeue"));
    let err = expect(
        s.post(
            "/v1/jobs",
            &json!({"run": "no spaces", "job": {"kind": "x"}}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "run");
    let err = expect(s.post_raw("/v1/jobs", "{\"run\": ").await, 400).await;
    assert_eq!(err["error"]["code"], "invalid_json");
    let err = expect(
        s.post(
            "/v1/jobs",
            &json!({"run": "api/bad", "job": {"kind": "x", "max_attempts": 0}}),
        )
        .await,
        400,
    )
    .await;
    assert_eq!(
        err["error"]["field"], "max_attempts",
        "the backend's check names its field"
    );
    let big = format!(
        "{{\"run\": \"api/bad\", \"job\": {{\"kind\": \"x\", \"args\": \"{}\"}}}}",
        "a".repeat(100_000)
    );
    let err = expect(s.post_raw("/v1/jobs", big).await, 413).await;
    assert_eq!(err["error"]["code"], "too_large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_answers_429_until_it_drains() {
    let mut limits = QueueLimits::default();
    limits.add("pdf=5").unwrap();
    let s = start_with(ServerConfig {
        queue_limits: limits,
        ..ServerConfig::default()
    })
    .await;
    let five: Vec<_> = (0..5)
        .map(|_| json!({"job": {"kind": "render", "queue": "pdf"}}))
        .collect();
    s.post_ok(
        "/v1/batches",
        &json!({"run": "api/full", "items": five}),
        201,
    )
    .await;
    let resp = s
        .post(
            "/v1/jobs",
            &json!({"run": "api/full", "job": {"kind": "render", "queue": "pdf"}}),
        )
        .await;
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let err = expect(resp, 429).await;
    assert_eq!(err["error"]["code"], "queue_full");
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "api/full", "job": {"kind": "mail", "queue": "mail"}}),
        201,
    )
    .await;
    // Drain the queue; once the depth is read again, submissions are accepted.
    let jobs = s.poll("pdf", 10, 0).await;
    assert_eq!(jobs.len(), 5);
    tranche_test_support::poll_until_async(
        "the drained queue accepts",
        Duration::from_secs(10),
        async || {
            let resp = s
                .post(
                    "/v1/jobs",
                    &json!({"run": "api/full", "job": {"kind": "render", "queue": "pdf"}}),
                )
                .await;
            match resp.status().as_u16() {
                201 => true,
                429 => false,
                other => panic!("expected the drained queue to accept, got {other}"),
            }
        },
    )
    .await;
}

/// Kinds, queues, run names and unique keys are bounded: an over-long one is answered
/// 400 naming where it is, its limit and its length, and leaves no trace in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_names_are_refused_naming_the_field() {
    let s = start().await;
    let huge = "q".repeat(1 << 20);
    let refused = [
        (
            "/v1/jobs",
            json!({"run": "api/long", "job": {"kind": "x", "queue": huge}}),
            "job.queue",
            ["128", "1048576"],
        ),
        (
            "/v1/batches",
            json!({"run": "api/long", "items": [
                {"job": {"kind": "x"}},
                {"chain": [{"kind": "k".repeat(129)}]}
            ]}),
            "items[1].chain[0].kind",
            ["128", "129"],
        ),
        (
            "/v1/jobs",
            json!({"run": "api/long", "job": {"kind": "x", "unique_key": "u".repeat(513)}}),
            "job.unique_key",
            ["512", "513"],
        ),
        (
            "/v1/groups",
            json!({"run": "r".repeat(201), "members": [{"kind": "x"}], "callback": {"kind": "y"}}),
            "run",
            ["200", "201"],
        ),
        (
            "/v1/workers/poll",
            json!({"queue": "q".repeat(129)}),
            "queue",
            ["128", "129"],
        ),
    ];
    for (path, body, field, [limit, got]) in refused {
        let err = expect(s.post(path, &body).await, 400).await;
        assert_eq!(err["error"]["field"], field, "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("at most {limit} bytes")) && message.contains(got),
            "{message}"
        );
        assert!(message.len() < 300, "the name is not echoed: {message}");
    }
    // Exactly at the limits is fine.
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "r".repeat(200), "job": {
            "kind": "k".repeat(128), "queue": "q".repeat(128), "unique_key": "u".repeat(512)
        }}),
        201,
    )
    .await;
    expect(s.get("/v1/runs/api%2Flong").await, 404).await;
    let metrics = s.get("/metrics").await.text().await.unwrap();
    assert!(
        !metrics.contains(&"q".repeat(129)),
        "no over-long queue label"
    );
}
