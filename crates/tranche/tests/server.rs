//! `tranche server` as a process: started on a free loopback port, driven over HTTP,
//! its figures covering jobs another process worked on the same database, stopped
//! with SIGTERM.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tranche_sqlite::{SqliteBackend, SqliteOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_binary_serves_submit_poll_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "# test tokens\nops-1\nwork-2 worker\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(dir.path().join("data"))
        .args(["server", "--listen", "127.0.0.1:0", "--tokens"])
        .arg(&tokens)
        .args(["--queue-limit", "10"])
        .env_remove("TRANCHE_TOKENS")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tranche server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    assert!(line.contains("2 token(s)"), "{line}");

    let client = reqwest::Client::new();
    let post = |path: &str, token: &str, body: Value| {
        client
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let r = post(
        "/v1/jobs",
        "ops-1",
        json!({"run": "bin/1", "job": {"kind": "x", "args": [1, 2]}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let r = post(
        "/v1/jobs",
        "work-2",
        json!({"run": "bin/1", "job": {"kind": "x"}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 403, "a worker token may not submit");
    let polled: Value = post(
        "/v1/workers/poll",
        "work-2",
        json!({"queue": "default", "max": 5, "wait_ms": 1000}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let job = &polled["jobs"][0];
    assert_eq!(job["args"], json!([1, 2]));
    let acks: Value = post(
        "/v1/workers/complete",
        "work-2",
        json!({"results": [{"job": job["id"], "attempt": job["attempt"], "result": "done"}]}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(acks["acks"], json!(["applied"]));
    let progress: Value = client
        .get(format!("{base}/v1/runs/bin%2F1"))
        .bearer_auth("ops-1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(progress["succeeded"], 1);

    // Jobs worked by an engine worker in another process (this one) sharing the
    // database file count in the server's figures as well.
    let items: Vec<Value> = (0..20)
        .map(|_| json!({"job": {"kind": "k", "queue": "bw"}}))
        .collect();
    let r = post(
        "/v1/batches",
        "ops-1",
        json!({"run": "bin/engine", "items": items}),
    )
    .await
    .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let backend = SqliteBackend::open(dir.path().join("data"), SqliteOptions::default()).unwrap();
    support::work_beside(Arc::new(backend), "bw", "bin/engine").await;
    let metrics = client
        .get(format!("{base}/metrics"))
        .bearer_auth("ops-1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "tranche_jobs_started_total{queue=\"bw\"} 20",
        "tranche_jobs_finished_total{queue=\"bw\",outcome=\"succeeded\"} 20",
        "tranche_job_run_seconds_count{queue=\"bw\"} 20",
        "tranche_job_queue_wait_seconds_count{queue=\"bw\"} 20",
        "tranche_jobs_finished_total{queue=\"default\",outcome=\"succeeded\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in:\n{metrics}"
        );
    }

    // SIGTERM: a graceful stop with exit code 0.
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "server did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_server_refuses_an_open_address_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(dir.path())
        .args(["server", "--listen", "0.0.0.0:0"])
        .env_remove("TRANCHE_TOKENS")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without tokens"),
        "{err}"
    );
}
