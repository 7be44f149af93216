use serde_json::json;
use tranche_server::{ServerConfig, Tokens};

use crate::live::{expect, start_with};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_required_and_worker_tokens_are_limited() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-token-1\nworker-token-2 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let submit = json!({"run": "auth/1", "job": {"kind": "x", "queue": "w"}});

    // No token, a wrong token.
    let resp = s.post("/v1/jobs", &submit).await;
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let err = expect(resp, 401).await;
    assert_eq!(err["error"]["code"], "unauthorized");
    s.token = Some("ops-token-X".into());
    expect(s.post("/v1/jobs", &submit).await, 401).await;
    expect(s.get("/metrics").await, 401).await;

    // Liveness, readiness and the API description are open.
    assert_eq!(s.get("/healthz").await.status().as_u16(), 200);
    assert_eq!(s.get("/readyz").await.status().as_u16(), 200);
    assert_eq!(s.get("/v1/openapi.json").await.status().as_u16(), 200);

    // A worker token polls and reports, but may not submit, steer or read runs.
    s.token = Some("worker-token-2".into());
    let err = expect(s.post("/v1/jobs", &submit).await, 403).await;
    assert_eq!(err["error"]["code"], "forbidden");
    expect(s.get("/v1/runs").await, 403).await;
    expect(s.post("/v1/runs/auth%2F1/cancel", &json!(null)).await, 403).await;
    expect(s.get("/metrics").await, 403).await;
    assert!(s.poll("w", 1, 0).await.is_empty());

    // A full token does everything.
    s.token = Some("ops-token-1".into());
    s.post_ok("/v1/jobs", &submit, 201).await;
    assert_eq!(s.get("/metrics").await.status().as_u16(), 200);
    s.token = Some("worker-token-2".into());
    let jobs = s.poll("w", 1, 0).await;
    assert_eq!(jobs.len(), 1);
}
