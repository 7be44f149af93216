use serde_json::json;

use crate::live::{expect, ids, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_retried_and_deleted_one_at_a_time() {
    let s = start().await;
    let items: Vec<_> = (0..6)
        .map(|i| {
            let queue = if i % 2 == 0 { "even" } else { "odd" };
            json!({"job": {"kind": "note", "queue": queue, "args": i, "max_attempts": 1}})
        })
        .collect();
    let batch = s
        .post_ok(
            "/v1/batches",
            &json!({"run": "night/9", "items": items}),
            201,
        )
        .await;
    let all: Vec<i64> = batch["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(ids)
        .collect();
    assert_eq!(all.len(), 6);
    let even = s.poll("even", 3, 0).await;
    s.post_ok(
        "/v1/workers/fail",
        &json!({"failures": [{"job": even[0]["id"], "attempt": 1, "error": "mail to ann@example.com bounced"}]}),
        200,
    )
    .await;

    // Paged two at a time, every job of the run, once each, in id order.
    let mut listed = Vec::new();
    let mut after = String::new();
    loop {
        let page = s
            .get_ok(&format!("/v1/jobs?run=night%2F9&limit=2{after}"))
            .await;
        listed.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_i64().unwrap()),
        );
        match page["next"].as_i64() {
            Some(n) => after = format!("&after={n}"),
            None => break,
        }
    }
    assert_eq!(listed, all);

    let failed = s
        .get_ok("/v1/jobs?run=night%2F9&state=failed&queue=even&kind=note")
        .await;
    let job = &failed["jobs"][0];
    assert_eq!(failed["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(job["id"], even[0]["id"]);
    assert_eq!(job["state"], "failed");
    assert_eq!(
        job["error"], "mail to a***@example.com bounced",
        "personal data masked as in a job's own answer"
    );
    let running = s.get_ok("/v1/jobs?state=running&queue=even").await;
    assert_eq!(running["jobs"].as_array().unwrap().len(), 2);
    assert!(s.get_ok("/v1/jobs?queue=odd&state=failed").await["jobs"]
        .as_array()
        .unwrap()
        .is_empty());

    let bad = expect(s.get("/v1/jobs?state=done").await, 400).await;
    assert_eq!(bad["error"]["code"], "invalid_request");
    let bad = expect(s.get("/v1/jobs?run=no%20spaces").await, 400).await;
    assert_eq!(bad["error"]["field"], "run");

    // Retry: a running job is refused, saying why; the failed one runs again.
    let id = even[1]["id"].as_i64().unwrap();
    let refused = expect(
        s.post(&format!("/v1/jobs/{id}/retry"), &json!(null)).await,
        400,
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("running") && message.contains("failed or cancelled"),
        "{message}"
    );
    let failed_id = even[0]["id"].as_i64().unwrap();
    let retried = s
        .post_ok(&format!("/v1/jobs/{failed_id}/retry"), &json!(null), 200)
        .await;
    assert_eq!(retried["count"], 1);
    let again = s.poll("even", 3, 0).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0]["id"].as_i64(), again[0]["attempt"].as_i64()),
        (Some(failed_id), Some(1))
    );
    expect(s.post("/v1/jobs/999999/retry", &json!(null)).await, 404).await;

    // Delete: refused while running; an ended job goes, and the run's counters with it.
    let refused = expect(s.delete(&format!("/v1/jobs/{failed_id}")).await, 400).await;
    assert!(refused["error"]["message"]
        .as_str()
        .unwrap()
        .contains("ended"));
    s.post_ok(
        "/v1/workers/complete",
        &json!({"results": [{"job": failed_id, "attempt": 1}]}),
        200,
    )
    .await;
    let deleted = expect(s.delete(&format!("/v1/jobs/{failed_id}")).await, 200).await;
    assert_eq!(deleted["count"], 1);
    expect(s.get(&format!("/v1/jobs/{failed_id}")).await, 404).await;
    expect(s.delete(&format!("/v1/jobs/{failed_id}")).await, 404).await;
    let p = s.get_ok("/v1/runs/night%2F9").await;
    assert_eq!(
        (p["total"].as_u64(), p["succeeded"].as_u64()),
        (Some(5), Some(0))
    );
}
