//! Personal data in job text: masked for a plain token, shown to a `pii` token, real for
//! the worker that polls the job; masked without tokens unless the server says so.

use serde_json::{json, Value};
use tranche_server::{ServerConfig, Tokens};

use crate::live::{expect, ids, lease, start_with, Live};

const PAN: &str = "ABCDE1234F";
const EMAIL: &str = "r.sharma@example.com";

/// A client's chain (as the contract-note pipeline makes them): the first step's
/// arguments name the client, its result the address mailed, which the second step gets
/// as input; the second fails for good naming both. Returns the steps' ids.
async fn a_client_chain(s: &mut Live, submitter: Option<&str>, worker: Option<&str>) -> (i64, i64) {
    s.token = submitter.map(String::from);
    let args = json!({"date": "2026-11-20", "client_code": "C1", "client": {
        "name": "R Sharma", "pan": PAN, "email": EMAIL, "line": 7
    }});
    let chain = s
        .post_ok(
            "/v1/chains",
            &json!({"run": "pd/night", "steps": [
                {"kind": "process", "queue": "pd", "args": args, "unique_key": format!("note:{EMAIL}")},
                {"kind": "mail", "queue": "pd", "max_attempts": 1}
            ]}),
            201,
        )
        .await;
    let steps = ids(&chain);

    // The worker gets the real arguments, then the real input.
    s.token = worker.map(String::from);
    let polled = s.poll("pd", 1, 0).await;
    assert_eq!(
        polled[0]["args"], args,
        "a worker works on the real arguments"
    );
    let result = json!({"mailed_to": EMAIL, "pages": 2});
    let mut done = lease(&polled[0]);
    done["result"] = result.clone();
    s.post_ok("/v1/workers/complete", &json!({"results": [done]}), 200)
        .await;
    let polled = s.poll("pd", 1, 5000).await;
    assert_eq!(polled[0]["input"], result, "and on the real input");
    let mut failure = lease(&polled[0]);
    failure["error"] = json!(format!("550 no such mailbox {EMAIL} (PAN {PAN})"));
    failure["discard"] = json!(true);
    s.post_ok("/v1/workers/fail", &json!({"failures": [failure]}), 200)
        .await;
    (steps[0], steps[1])
}

/// Everything a reader sees of the chain: both jobs, the run's failures and the feed.
async fn read_all(s: &Live, (first, second): (i64, i64)) -> [Value; 4] {
    [
        s.get_ok(&format!("/v1/jobs/{first}")).await,
        s.get_ok(&format!("/v1/jobs/{second}")).await,
        s.get_ok("/v1/runs/pd%2Fnight/failures").await,
        s.get_ok("/v1/events?after=0&limit=100").await,
    ]
}

fn assert_masked(seen: &[Value; 4]) {
    let [first, second, failures, events] = seen;
    for v in seen {
        let text = v.to_string();
        assert!(!text.contains(PAN) && !text.contains(EMAIL), "{text}");
    }
    assert_eq!(first["args"]["client"]["pan"], "ABXXXXXX4F");
    assert_eq!(first["args"]["client"]["email"], "r***@example.com");
    assert_eq!(
        first["args"]["client"]["name"], "R Sharma",
        "only PANs and e-mails"
    );
    assert_eq!(first["args"]["client_code"], "C1");
    assert_eq!(first["result"]["mailed_to"], "r***@example.com");
    assert_eq!(first["unique_key"], "note:r***@example.com");
    assert_eq!(second["input"]["mailed_to"], "r***@example.com");
    let error = "550 no such mailbox r***@example.com (PAN ABXXXXXX4F)";
    assert_eq!(second["error"], error);
    assert_eq!(second["errors"][0]["error"], error);
    assert_eq!(failures["failures"][0]["error"], error);
    assert!(
        events["events"].as_array().is_some_and(|e| e.len() >= 6),
        "{events}"
    );
}

fn assert_shown(seen: &[Value; 4]) {
    let [first, second, failures, _] = seen;
    assert_eq!(first["args"]["client"]["pan"], PAN);
    assert_eq!(first["args"]["client"]["email"], EMAIL);
    assert_eq!(first["result"]["mailed_to"], EMAIL);
    assert_eq!(first["unique_key"], format!("note:{EMAIL}"));
    assert_eq!(second["input"]["mailed_to"], EMAIL);
    let error = format!("550 no such mailbox {EMAIL} (PAN {PAN})");
    assert_eq!(second["error"], error);
    assert_eq!(second["errors"][0]["error"], error);
    assert_eq!(failures["failures"][0]["error"], error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_data_is_masked_unless_the_token_may_see_it() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-1\nauditor-2 pii\nfleet-3 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let chain = a_client_chain(&mut s, Some("ops-1"), Some("fleet-3")).await;

    s.token = Some("ops-1".into());
    assert_masked(&read_all(&s, chain).await);
    s.token = Some("auditor-2".into());
    assert_shown(&read_all(&s, chain).await);
    // A worker token still reads nothing but the worker endpoints.
    s.token = Some("fleet-3".into());
    expect(s.get(&format!("/v1/jobs/{}", chain.0)).await, 403).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_personal_data_is_masked_unless_the_server_shows_it() {
    let mut s = start_with(ServerConfig::default()).await;
    let chain = a_client_chain(&mut s, None, None).await;
    assert_masked(&read_all(&s, chain).await);

    let mut s = start_with(ServerConfig {
        show_personal_data: true,
        ..ServerConfig::default()
    })
    .await;
    let chain = a_client_chain(&mut s, None, None).await;
    assert_shown(&read_all(&s, chain).await);
}

/// A workflow's steps are jobs: what a reader sees of a workflow through Conductor's API
/// is masked as `/v1` shows jobs, while the worker polling its step gets the real input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflows_personal_data_is_masked_for_readers_not_for_its_worker() {
    let mut s = start_with(ServerConfig {
        tokens: Tokens::parse("ops-1\nauditor-2 pii\nfleet-3 worker\n", "tokens").unwrap(),
        ..ServerConfig::default()
    })
    .await;
    s.token = Some("ops-1".into());
    s.post_ok(
        "/api/metadata/taskdefs",
        &json!([{"name": "mail_note", "retryCount": 0}]),
        200,
    )
    .await;
    s.post_ok(
        "/api/metadata/workflow",
        &json!({"name": "pd_flow", "version": 1, "tasks": [
            {"name": "mail_note", "taskReferenceName": "mail", "type": "SIMPLE",
             "inputParameters": {"to": "${workflow.input.email}", "pan": "${workflow.input.pan}"}}
        ]}),
        200,
    )
    .await;
    let started = s
        .post(
            "/api/workflow/pd_flow",
            &json!({"email": EMAIL, "pan": PAN}),
        )
        .await;
    assert_eq!(started.status(), 200);
    let id = started.text().await.unwrap();

    s.token = Some("fleet-3".into());
    let task = s.get_ok("/api/tasks/poll/mail_note?workerid=w1").await;
    assert_eq!(
        task["inputData"],
        json!({"to": EMAIL, "pan": PAN}),
        "the worker works on the real input"
    );
    let task_path = format!("/api/tasks/{}", task["taskId"].as_str().unwrap());

    let path = format!("/api/workflow/{id}?includeTasks=true");
    s.token = Some("ops-1".into());
    for seen in [
        s.get_ok(&path).await,
        s.get_ok(&task_path).await,
        s.get_ok("/api/workflow/search?query=workflowType%20IN%20(pd_flow)")
            .await,
    ] {
        let text = seen.to_string();
        assert!(!text.contains(PAN) && !text.contains(EMAIL), "{text}");
    }
    let w = s.get_ok(&path).await;
    assert_eq!(w["input"]["email"], "r***@example.com");
    assert_eq!(w["tasks"][0]["inputData"]["pan"], "ABXXXXXX4F");

    s.token = Some("auditor-2".into());
    let w = s.get_ok(&path).await;
    assert_eq!(w["input"]["email"], EMAIL);
    assert_eq!(w["tasks"][0]["inputData"]["pan"], PAN);
}
