//! Pausing a queue over HTTP: remote workers get nothing from it while other queues
//! serve, submissions wait, `/v1/queues` shows it paused, a resume wakes a waiting
//! long-poll; the routes are steering routes (a worker token may not use them).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tranche_server::{ServerConfig, Tokens};
use tranche_types::JobSpec;

use crate::live::{expect, lease, start, start_with};

fn queue<'a>(queues: &'a Value, name: &str) -> &'a Value {
    queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == name)
        .unwrap_or_else(|| panic!("queue {name} listed in {queues}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_queue_holds_its_jobs_until_resumed() {
    let s = start().await;
    let submit =
        |q: &str, n: u32| json!({"run": "pause/1", "job": {"kind": "x", "queue": q, "args": n}});
    s.post_ok("/v1/jobs", &submit("held", 1), 201).await;
    s.post_ok("/v1/jobs", &submit("held", 2), 201).await;
    s.post_ok("/v1/jobs", &submit("free", 3), 201).await;
    let running = s.poll("held", 1, 0).await;
    assert_eq!(running.len(), 1);

    let out = s.post_ok("/v1/queues/held/pause", &Value::Null, 200).await;
    assert_eq!(
        out,
        json!({"queue": "held", "paused": true, "changed": true})
    );
    let again = s.post_ok("/v1/queues/held/pause", &Value::Null, 200).await;
    assert_eq!(again["changed"], false, "a repeat changes nothing");
    // A queue with no jobs yet can be paused, and is listed.
    s.post_ok("/v1/queues/quiet/pause", &Value::Null, 200).await;

    assert!(s.poll("held", 10, 0).await.is_empty(), "paused: nothing");
    assert_eq!(s.poll("free", 10, 0).await.len(), 1, "other queues serve");
    s.post_ok("/v1/jobs", &submit("held", 4), 201).await;
    // The job running at the pause completes normally.
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [lease(&running[0])]}),
        200,
    )
    .await;

    let queues = s.get_ok("/v1/queues").await;
    let held = queue(&queues, "held");
    assert_eq!(
        (
            held["paused"].clone(),
            held["available"].clone(),
            held["succeeded"].clone()
        ),
        (json!(true), json!(2), json!(1))
    );
    assert_eq!(queue(&queues, "quiet")["paused"], true);
    assert!(
        queue(&queues, "free").get("paused").is_none(),
        "absent when not paused"
    );

    // A long-poll waiting on the paused queue is woken by the resume.
    let waiting = {
        let (client, base) = (s.client.clone(), s.base.clone());
        tokio::spawn(async move {
            let resp = client
                .post(format!("{base}/v1/workers/poll"))
                // A poll returns once it has `max` jobs: both waiting ones.
                .json(&json!({"queue": "held", "max": 2, "wait_ms": 30000}))
                .send()
                .await
                .unwrap();
            expect(resp, 200).await
        })
    };
    let mut waiting = waiting;
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut waiting)
            .await
            .is_err(),
        "a long-poll on a paused queue answered while it was paused"
    );
    let resumed = Instant::now();
    let out = s.post_ok("/v1/queues/held/resume", &Value::Null, 200).await;
    assert_eq!(
        out,
        json!({"queue": "held", "paused": false, "changed": true})
    );
    let polled = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the long-poll returned")
        .unwrap();
    assert_eq!(polled["jobs"].as_array().unwrap().len(), 2);
    assert!(resumed.elapsed() < Duration::from_secs(10));
    let again = s.post_ok("/v1/queues/held/resume", &Value::Null, 200).await;
    assert_eq!(again["changed"], false);
    assert!(
        queue(&s.get_ok("/v1/queues").await, "held")
            .get("paused")
            .is_none(),
        "absent once resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_queue_name_is_answered_400_naming_the_queue() {
    let s = start().await;
    let long = "q".repeat(JobSpec::MAX_QUEUE_LEN + 1);
    for action in ["pause", "resume"] {
        let err = s
            .post_ok(&format!("/v1/queues/{long}/{action}"), &Value::Null, 400)
            .await;
        assert_eq!(err["error"]["field"], "queue", "{err}");
        assert!(
            err["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("at most {} bytes", JobSpec::MAX_QUEUE_LEN)),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pausing_needs_a_full_token() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-token-1\nworker-token-2 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    expect(s.post("/v1/queues/q/pause", &Value::Null).await, 401).await;
    s.token = Some("worker-token-2".into());
    expect(s.post("/v1/queues/q/pause", &Value::Null).await, 403).await;
    expect(s.post("/v1/queues/q/resume", &Value::Null).await, 403).await;
    assert!(s.backend.paused_queues().await.unwrap().is_empty());
    s.token = Some("ops-token-1".into());
    s.post_ok("/v1/queues/q/pause", &Value::Null, 200).await;
    assert_eq!(s.backend.paused_queues().await.unwrap(), ["q"]);
}
