use serde_json::json;

use crate::live::{expect, ids, lease, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_failures_retry_and_cancel() {
    let s = start().await;
    let items: Vec<_> = (0..5)
        .map(|i| json!({"job": {"kind": "note", "args": i, "max_attempts": 1}}))
        .collect();
    s.post_ok(
        "/v1/batches",
        &json!({"run": "night/1", "items": items}),
        201,
    )
    .await;
    let chain = s
        .post_ok(
            "/v1/chains",
            &json!({"run": "night/2", "steps": [{"kind": "a", "queue": "later"}, {"kind": "b"}]}),
            201,
        )
        .await;
    let runs = s.get_ok("/v1/runs").await;
    let names: Vec<_> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["night/2", "night/1"], "newest first");

    // Three of five fail.
    let jobs = s.poll("default", 5, 0).await;
    assert_eq!(jobs.len(), 5);
    let failures: Vec<_> = jobs[..3]
        .iter()
        .map(|j| json!({"job": j["id"], "attempt": j["attempt"], "error": "bad PAN on line 7"}))
        .collect();
    let acks = s
        .post_ok("/v1/workers/fail", &json!({"failures": failures}), 200)
        .await;
    assert_eq!(acks["acks"], json!(["applied", "applied", "applied"]));
    let results: Vec<_> = jobs[3..].iter().map(lease).collect();
    s.post_ok("/v1/workers/complete", &json!({"results": results}), 200)
        .await;
    let p = s.get_ok("/v1/runs/night%2F1").await;
    assert_eq!(
        (p["succeeded"].as_u64(), p["failed"].as_u64()),
        (Some(2), Some(3))
    );

    let page1 = s.get_ok("/v1/runs/night%2F1/failures?limit=2").await;
    assert_eq!(page1["failures"].as_array().unwrap().len(), 2);
    let next = page1["next"].as_i64().expect("a next page");
    let page2 = s
        .get_ok(&format!("/v1/runs/night%2F1/failures?limit=2&after={next}"))
        .await;
    assert_eq!(page2["failures"].as_array().unwrap().len(), 1);
    assert!(page2["next"].is_null());
    assert_eq!(page2["failures"][0]["error"], "bad PAN on line 7");

    let failed_id = jobs[0]["id"].as_i64().unwrap();
    let job = s.get_ok(&format!("/v1/jobs/{failed_id}")).await;
    assert_eq!(job["state"], "failed");
    assert_eq!(job["errors"][0]["attempt"], 1);
    assert_eq!(job["errors"][0]["error"], "bad PAN on line 7");

    let retried = s
        .post_ok("/v1/runs/night%2F1/retry", &json!(null), 200)
        .await;
    assert_eq!(retried["count"], 3);
    assert_eq!(s.get_ok("/v1/runs/night%2F1").await["available"], 3);

    // Cancel one job, then the rest of the run; then a chain.
    let c = s
        .post_ok(
            &format!("/v1/jobs/{failed_id}/cancel"),
            &json!({"reason": "client closed"}),
            200,
        )
        .await;
    assert_eq!(c["count"], 1);
    assert_eq!(
        s.get_ok(&format!("/v1/jobs/{failed_id}")).await["error"],
        "client closed"
    );
    let c = s
        .post_ok("/v1/runs/night%2F1/cancel", &json!(null), 200)
        .await;
    assert_eq!(c["count"], 2);
    let first = ids(&chain)[0];
    let c = s
        .post_ok(&format!("/v1/chains/{first}/cancel"), &json!(null), 200)
        .await;
    assert_eq!(c["count"], 2, "the step and the one after it");

    expect(s.get("/v1/runs/nope").await, 404).await;
    expect(s.get("/v1/jobs/999999").await, 404).await;
    expect(s.post("/v1/runs/nope/retry", &json!(null)).await, 404).await;
    let err = expect(s.get("/v1/runs/night%2F1/failures?limit=x").await, 400).await;
    assert_eq!(err["error"]["field"], "query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_every_route_and_each_answers() {
    let s = crate::live::start_with_ledger(tranche_server::ServerConfig::default()).await;
    let doc = s.get_ok("/v1/openapi.json").await;
    assert_eq!(doc["openapi"], "3.1.0");
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path.replace("{run}", "night%2F9").replace("{id}", "1");
        for method in item.as_object().unwrap().keys() {
            let url = format!("{}{concrete}", s.base);
            let resp = match method.as_str() {
                "get" => s.client.get(&url).send().await.unwrap(),
                "post" => s.client.post(&url).json(&json!({})).send().await.unwrap(),
                "delete" => s.client.delete(&url).send().await.unwrap(),
                "put" => s.client.put(&url).json(&json!({})).send().await.unwrap(),
                other => panic!("unexpected method {other}"),
            };
            let status = resp.status().as_u16();
            // 404 is fine for a missing run or job, but must come from the handler
            // (a JSON error), not from the router.
            let text = resp.text().await.unwrap();
            assert_ne!(status, 405, "{method} {path} is not served");
            if status == 404 {
                assert!(
                    text.contains("not_found"),
                    "{method} {path} is not routed: {text}"
                );
            }
        }
    }
    let queues = s.get_ok("/v1/queues").await;
    assert!(queues["queues"].as_array().unwrap().is_empty());
    let h = s.get("/healthz").await;
    assert_eq!(h.status().as_u16(), 200);
    let r = s.get("/readyz").await;
    assert_eq!(r.status().as_u16(), 200);
}
