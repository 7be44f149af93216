use std::time::{Duration, Instant};

use serde_json::json;

use crate::live::{ids, lease, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_poll_complete_round_trip_through_a_chain_and_a_group() {
    let s = start().await;
    let chain = s
        .post_ok(
            "/v1/chains",
            &json!({"run": "rt/1", "steps": [
                {"kind": "process", "queue": "py", "args": {"client": "C1"}},
                {"kind": "render", "queue": "py"}
            ]}),
            201,
        )
        .await;
    let jobs = s.poll("py", 10, 0).await;
    assert_eq!(jobs.len(), 1, "only the first step is runnable");
    let j = &jobs[0];
    assert_eq!(j["kind"], "process");
    assert_eq!(j["args"], json!({"client": "C1"}));
    assert_eq!(j["attempt"], 1);
    assert_eq!(j["run"], "rt/1");
    let acks = s
        .post_ok(
            "/v1/workers/complete",
            &json!({"results": [{"job": j["id"], "attempt": 1, "result": {"trades": 3}}]}),
            200,
        )
        .await;
    assert_eq!(acks["acks"], json!(["applied"]));
    let next = s.poll("py", 10, 0).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0]["kind"], "render");
    assert_eq!(
        next[0]["input"],
        json!({"trades": 3}),
        "the previous step's result"
    );
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [lease(&next[0])]}),
        200,
    )
    .await;
    let last = ids(&chain)[1];
    let rec = s.get_ok(&format!("/v1/jobs/{last}")).await;
    assert_eq!(rec["state"], "succeeded");
    assert_eq!(rec["result"], json!(null));

    s.post_ok(
        "/v1/groups",
        &json!({"run": "rt/1", "members": [{"kind": "m", "queue": "g"}, {"kind": "m", "queue": "g"}],
                "callback": {"kind": "reduce", "queue": "g"}}),
        201,
    )
    .await;
    let members = s.poll("g", 10, 0).await;
    assert_eq!(members.len(), 2);
    let results: Vec<_> = members
        .iter()
        .enumerate()
        .map(|(i, m)| json!({"job": m["id"], "attempt": 1, "result": i}))
        .collect();
    s.post_ok("/v1/workers/complete", &json!({"results": results}), 200)
        .await;
    let cb = s.poll("g", 10, 0).await;
    assert_eq!(cb.len(), 1);
    let outcomes = cb[0]["input"].as_array().expect("member outcomes");
    assert_eq!(outcomes.len(), 2);
    assert_eq!(outcomes[1]["result"], 1);
    let p = s.get_ok("/v1/runs/rt%2F1").await;
    assert_eq!(
        (p["succeeded"].as_u64(), p["running"].as_u64()),
        (Some(4), Some(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_waits_out_its_time_when_nothing_comes() {
    let s = start().await;
    let started = Instant::now();
    let jobs = s.poll("idle", 10, 700).await;
    let waited = started.elapsed();
    assert!(jobs.is_empty());
    assert!(
        waited >= Duration::from_millis(700),
        "empty answer after only {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_returns_as_soon_as_its_batch_is_ready() {
    let s = start().await;
    let poller = {
        let (base, client) = (s.base.clone(), s.client.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let out: serde_json::Value = client
                .post(format!("{base}/v1/workers/poll"))
                .json(&json!({"queue": "soon", "max": 3, "wait_ms": 20_000}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (out["jobs"].as_array().unwrap().len(), started.elapsed())
        })
    };
    // One job, then two more: the poll holds the first until its batch of three is
    // complete, and returns long before its 20 s.
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "lp/1", "job": {"kind": "x", "queue": "soon"}}),
        201,
    )
    .await;
    let items: Vec<_> = (0..2)
        .map(|_| json!({"job": {"kind": "x", "queue": "soon"}}))
        .collect();
    s.post_ok("/v1/batches", &json!({"run": "lp/1", "items": items}), 201)
        .await;
    let (n, waited) = poller.await.unwrap();
    assert_eq!(n, 3);
    assert!(
        waited < Duration::from_secs(10),
        "returned after {waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stops_heartbeating_loses_its_job_to_another_poller() {
    let s = start().await;
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "lease/1", "job": {"kind": "x", "queue": "l"}}),
        201,
    )
    .await;
    let first = s
        .post_ok(
            "/v1/workers/poll",
            &json!({"queue": "l", "max": 1, "lease_ms": 1000}),
            200,
        )
        .await["jobs"][0]
        .clone();
    assert_eq!(first["attempt"], 1);

    // While the first worker heartbeats, nobody else gets the job.
    let hb = s
        .post_ok(
            "/v1/workers/heartbeat",
            &json!({"leases": [lease(&first)], "lease_ms": 1000}),
            200,
        )
        .await;
    assert_eq!(hb["lost"], json!([]));
    let stolen_early = s.poll("l", 1, 300).await;
    assert!(stolen_early.is_empty(), "the lease still holds");

    // It stops heartbeating: a second poller gets the job once the lease expires.
    let started = Instant::now();
    let second = s.poll("l", 1, 10_000).await;
    assert_eq!(second.len(), 1);
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_eq!(second[0]["id"], first["id"]);
    assert_eq!(second[0]["attempt"], 2);

    // The first worker's late report is refused; its heartbeat says it lost the job.
    let late = s
        .post_ok(
            "/v1/workers/complete",
            &json!({"results": [lease(&first)]}),
            200,
        )
        .await;
    assert_eq!(late["acks"], json!(["stale"]));
    let hb = s
        .post_ok(
            "/v1/workers/heartbeat",
            &json!({"leases": [lease(&first)]}),
            200,
        )
        .await;
    assert_eq!(hb["lost"], json!([lease(&first)]));
    let ok = s
        .post_ok(
            "/v1/workers/complete",
            &json!({"results": [lease(&second[0])]}),
            200,
        )
        .await;
    assert_eq!(ok["acks"], json!(["applied"]));
    let rec = s.get_ok(&format!("/v1/jobs/{}", first["id"])).await;
    assert_eq!(rec["state"], "succeeded");
    assert!(rec["errors"][0]["error"]
        .as_str()
        .unwrap()
        .contains("lease expired"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_with_backoff_or_discard() {
    let s = start().await;
    s.post_ok(
        "/v1/batches",
        &json!({"run": "fail/1", "items": [{"job": {"kind": "x", "queue": "f"}}, {"job": {"kind": "y", "queue": "f"}}]}),
        201,
    )
    .await;
    let jobs = s.poll("f", 2, 0).await;
    let acks = s
        .post_ok(
            "/v1/workers/fail",
            &json!({"failures": [
                {"job": jobs[0]["id"], "attempt": 1, "error": "SMTP 421", "retry_in_ms": 0},
                {"job": jobs[1]["id"], "attempt": 1, "error": "bad address", "discard": true}
            ]}),
            200,
        )
        .await;
    assert_eq!(acks["acks"], json!(["applied", "applied"]));
    let again = s.poll("f", 2, 2000).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0]["id"].clone(), again[0]["attempt"].clone()),
        (jobs[0]["id"].clone(), json!(2))
    );
    let rec = s.get_ok(&format!("/v1/jobs/{}", jobs[1]["id"])).await;
    assert_eq!(rec["state"], "failed");
    assert_eq!(rec["error"], "bad address");
    let err = crate::live::expect(
        s.post("/v1/workers/poll", &json!({"queue": "f", "max": 0}))
            .await,
        400,
    )
    .await;
    assert_eq!(err["error"]["field"], "max");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_longer_than_the_lease_keeps_the_jobs_it_holds() {
    let s = start().await;
    s.post_ok(
        "/v1/jobs",
        &json!({"run": "lp/held", "job": {"kind": "x", "queue": "held", "max_attempts": 1}}),
        201,
    )
    .await;
    // The job is there at once; the poll holds it for 2.5 s waiting for a second one,
    // two and a half of its 1 s leases.
    let started = Instant::now();
    let got = s
        .post_ok(
            "/v1/workers/poll",
            &json!({"queue": "held", "max": 2, "wait_ms": 2500, "lease_ms": 1000}),
            200,
        )
        .await["jobs"]
        .as_array()
        .unwrap()
        .clone();
    assert!(started.elapsed() >= Duration::from_millis(2500));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["attempt"], 1, "the lease lapsed inside the poll");
    let acks = s
        .post_ok(
            "/v1/workers/complete",
            &json!({"results": [lease(&got[0])]}),
            200,
        )
        .await;
    assert_eq!(acks["acks"], json!(["applied"]));
    let rec = s.get_ok(&format!("/v1/jobs/{}", got[0]["id"])).await;
    assert_eq!(rec["state"], "succeeded");
    assert_eq!(rec["errors"], json!([]));
}
