//! `tranche server` and `tranche bench server` with their state in Redis (`--broker`),
//! against a real redis-server on a free loopback port; tokens from TRANCHE_TOKENS.

use crate::support;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::*;

struct Api {
    base: String,
    client: reqwest::Client,
}

impl Api {
    async fn call(&self, token: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let req = match body {
            Some(b) => self.client.post(url).json(&b),
            None => self.client.get(url),
        };
        let resp = req.bearer_auth(token).send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn ok(&self, token: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(token, path, body).await;
        assert!((200..300).contains(&status), "{path}: {status} {v}");
        v
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_the_api_over_redis() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (redis_server, port) = redis(dir.path());
    let mut child = tranche()
        .args(["--broker", &format!("redis://127.0.0.1:{port}")])
        .args([
            "--prefix",
            "{server-test}:",
            "server",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--queue-limit", "rq=3"])
        .env("TRANCHE_TOKENS", "env-ops, env-work worker")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (base, line) = server_address(&mut child);
    let server = Server(child);
    assert!(
        line.contains("Redis at") && line.contains("2 token(s)"),
        "{line}"
    );
    let api = Api {
        base,
        client: reqwest::Client::new(),
    };
    let (ops, work) = ("env-ops", "env-work");
    let job = |q: &str| json!({"job": {"kind": "k", "queue": q}});

    // Intake: three fit the queue's limit, the fourth is refused; a worker token may
    // not submit.
    let items: Vec<Value> = (0..3).map(|_| job("rq")).collect();
    api.ok(
        ops,
        "/v1/batches",
        Some(json!({"run": "redis/1", "items": items})),
    )
    .await;
    let (status, err) = api
        .call(
            ops,
            "/v1/batches",
            Some(json!({"run": "redis/1", "items": [job("rq")]})),
        )
        .await;
    assert_eq!((status, &err["error"]["code"]), (429, &json!("queue_full")));
    assert_eq!(
        api.call(
            work,
            "/v1/jobs",
            Some(json!({"run": "redis/1", "job": {"kind": "k"}}))
        )
        .await
        .0,
        403
    );

    // A feed reader waiting after the newest event wakes when the jobs are polled.
    let latest = api.ok(ops, "/v1/events?after=latest", None).await["next"].clone();
    let waiter = {
        let (client, url) = (
            api.client.clone(),
            format!("{}/v1/events?after={latest}&wait=20000", api.base),
        );
        tokio::spawn(async move {
            let started = Instant::now();
            let v: Value = support::json_of(client.get(url).bearer_auth(ops)).await;
            (v, started.elapsed())
        })
    };
    let poll = json!({"queue": "rq", "max": 3, "wait_ms": 5000});
    let jobs = api.ok(work, "/v1/workers/poll", Some(poll)).await["jobs"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(jobs.len(), 3);
    let (woke, waited) = waiter.await.unwrap();
    assert!(waited < Duration::from_secs(10), "woke after {waited:?}");
    assert_eq!(woke["events"][0]["state"], "running", "{woke}");

    // An empty queue is waited on for the whole wait.
    let started = Instant::now();
    let empty = api
        .ok(
            work,
            "/v1/workers/poll",
            Some(json!({"queue": "idle", "max": 1, "wait_ms": 700})),
        )
        .await;
    assert_eq!(empty["jobs"], json!([]));
    assert!(started.elapsed() >= Duration::from_millis(700));

    let results: Vec<Value> = jobs
        .iter()
        .map(|j| json!({"job": j["id"], "attempt": j["attempt"]}))
        .collect();
    let acks = api
        .ok(
            work,
            "/v1/workers/complete",
            Some(json!({"results": results})),
        )
        .await;
    assert_eq!(acks["acks"], json!(["applied", "applied", "applied"]));
    assert_eq!(
        api.ok(ops, "/v1/runs/redis%2F1", None).await["succeeded"],
        3
    );

    // The whole feed, in order: each job available, running, succeeded.
    let feed = api.ok(ops, "/v1/events?after=0&limit=100", None).await;
    let events = feed["events"].as_array().unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let mut history: HashMap<i64, Vec<&str>> = HashMap::new();
    for e in events {
        history
            .entry(e["job"].as_i64().unwrap())
            .or_default()
            .push(e["state"].as_str().unwrap());
    }
    assert_eq!(history.len(), 3);
    assert!(history
        .values()
        .all(|h| h == &["available", "running", "succeeded"]));

    // Jobs worked by an engine worker in another process (this one), sharing the
    // Redis but not the server's HTTP API, count in the server's figures as well.
    let items: Vec<Value> = (0..20).map(|_| job("rw")).collect();
    api.ok(
        ops,
        "/v1/batches",
        Some(json!({"run": "redis/engine", "items": items})),
    )
    .await;
    let options = tranche_redis::RedisOptions {
        url: format!("redis://127.0.0.1:{port}"),
        prefix: "{server-test}:".into(),
        ..tranche_redis::RedisOptions::default()
    };
    let backend = tranche_redis::RedisBackend::connect(options).await.unwrap();
    work_beside(tranche_core::Client::new(backend), "rw", "redis/engine").await;
    let queues = api.ok(ops, "/v1/queues", None).await;
    let rw = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "rw")
        .cloned();
    assert_eq!(
        rw,
        Some(
            json!({"queue": "rw", "available": 0, "running": 0, "started": 20,
                    "succeeded": 20, "failed": 0, "retried": 0, "expired": 0})
        ),
        "{queues}"
    );

    let (status, metrics) = api.call(ops, "/metrics", None).await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap().to_string();
    for line in [
        "tranche_jobs_finished_total{queue=\"rq\",outcome=\"succeeded\"} 3",
        "tranche_http_jobs_polled_total{queue=\"rq\"} 3",
        "tranche_jobs_finished_total{queue=\"rw\",outcome=\"succeeded\"} 20",
        "tranche_job_run_seconds_count{queue=\"rw\"} 20",
        "tranche_job_queue_wait_seconds_bucket{queue=\"rw\",le=\"+Inf\"} 20",
        "tranche_submissions_refused_total{queue=\"rq\"} 1",
        "tranche_run_jobs{run=\"redis/1\",state=\"succeeded\"} 3",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in:\n{metrics}"
        );
    }
    assert_eq!(api.call(ops, "/readyz", None).await.0, 200);

    // Redis goes away: the server is alive but not ready.
    drop(redis_server);
    tranche_test_support::poll_until_async(
        "/readyz unready without Redis",
        Duration::from_secs(20),
        async || api.call(ops, "/readyz", None).await.0 == 503,
    )
    .await;
    assert_eq!(api.call(ops, "/healthz", None).await.0, 200);

    let pid = server.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let mut server = server;
    let status = tranche_test_support::exited(
        &mut server.0,
        "the server did not stop",
        Duration::from_secs(20),
    );
    assert!(status.success(), "{status:?}");
}

#[test]
fn bench_server_runs_both_benchmarks_on_redis() {
    if !have("redis-server", &["--version"]) || !have("redis-cli", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_redis, port) = redis(dir.path());
    let out = tranche()
        .args(["--broker", &format!("redis://127.0.0.1:{port}")])
        .args(["--data"])
        .arg(dir.path().join("unused"))
        .args(["bench", "server", "--jobs", "2000", "--batch", "500"])
        .args(["--clients", "2", "--executions", "500", "--workers", "4"])
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["backend"], "redis");
    assert_eq!(
        (
            report["submit_jobs"].as_u64(),
            report["executions"].as_u64()
        ),
        (Some(2000), Some(500))
    );
    assert!(report["executions_per_sec"].as_f64().unwrap() > 0.0);
    assert!(
        !dir.path().join("unused").exists(),
        "nothing written to --data"
    );
    let keys = Command::new("redis-cli")
        .args([
            "-p",
            &port.to_string(),
            "--scan",
            "--pattern",
            "{bench-server-*",
        ])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&keys.stdout).trim().is_empty(),
        "the bench's state is in Redis"
    );
}
