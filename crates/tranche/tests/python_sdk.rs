//! The Python worker SDK (`sdk/python`) against a real `tranche server` process: a
//! Python task in a chain between two Rust tasks, and a Python worker killed mid-job
//! whose job another worker finishes; then its graceful stop, for a task that outlives
//! its lease and for one that hangs, a result reported while the server is down, and a
//! lone job on an idle worker started at once; and the client's operator methods (jobs,
//! queues, schedules, pruning) against the server.
//! Needs `python3` (standard library only).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tranche_core::{Engine, JobContext, Registry, TaskOptions, WorkerConfig};
use tranche_sqlite::{SqliteBackend, SqliteOptions};

fn sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python")
}

/// python3, or None (the test then skips, unless CI requires the tool).
fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok
        && (std::env::var_os("CI").is_some_and(|v| !v.is_empty())
            || std::env::var("TRANCHE_REQUIRE_TOOLS").is_ok_and(|v| v == "1"))
    {
        panic!("python3 is required (CI or TRANCHE_REQUIRE_TOOLS is set)");
    }
    ok.then_some("python3")
}

/// A child process killed when dropped.
use support::Server as Proc;

fn start_server(data: &Path) -> (Proc, String) {
    start_server_at(data, "127.0.0.1:0")
}

fn start_server_at(data: &Path, listen: &str) -> (Proc, String) {
    support::tranche_server(data, listen)
}

fn start_python(python: &str, base: &str, mode: &str, markers: &Path) -> Proc {
    let child = Command::new(python)
        .arg(sdk().join("tests/worker_app.py"))
        .args([base, mode])
        .arg(markers)
        .env("PYTHONPATH", sdk().join("src"))
        .spawn()
        .expect("start the Python worker");
    Proc(child)
}

/// Wait for the process to exit, at most `limit`.
async fn exit_status(p: &mut Proc, limit: Duration) -> std::process::ExitStatus {
    tranche_test_support::poll_until("the Python worker stops", limit, || p.0.try_wait().unwrap())
        .await
}

fn sigterm(p: &Proc) {
    Command::new("kill")
        .args(["-TERM", &p.0.id().to_string()])
        .status()
        .unwrap();
}

async fn submit(client: &reqwest::Client, base: &str, body: Value) -> Value {
    support::json_of(client.post(format!("{base}/v1/jobs")).json(&body)).await
}

/// One job of `kind` on the queue `py` in `run`; its id.
async fn submit_one(client: &reqwest::Client, base: &str, run: &str, kind: &str) -> Value {
    let out = submit(
        client,
        base,
        json!({"run": run, "job": {"kind": kind, "queue": "py"}}),
    )
    .await;
    out["ids"][0].clone()
}

/// Waits until a Python worker writing its markers into `dir` has started job `id`.
async fn wait_started(dir: &Path, id: &Value) {
    let marker = dir.join(format!("started-{id}"));
    tranche_test_support::poll_until_async(
        "a worker to start the job",
        Duration::from_secs(30),
        async || marker.exists(),
    )
    .await;
}

/// A server, one job submitted to it, and a Python worker in `mode` that has started it.
struct Working {
    dir: tempfile::TempDir,
    _server: Proc,
    base: String,
    client: reqwest::Client,
    id: Value,
    py: Proc,
    python: &'static str,
}

/// None when python3 is missing (the test then skips).
async fn python_working_on(run: &str, kind: &str, mode: &str) -> Option<Working> {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = start_server(&dir.path().join("data"));
    let client = reqwest::Client::new();
    let id = submit_one(&client, &base, run, kind).await;
    let py = start_python(python, &base, mode, dir.path());
    wait_started(dir.path(), &id).await;
    Some(Working {
        dir,
        _server: server,
        base,
        client,
        id,
        py,
        python,
    })
}

async fn job(client: &reqwest::Client, base: &str, id: &Value) -> Value {
    support::json_of(client.get(format!("{base}/v1/jobs/{id}"))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_step_between_two_rust_steps() {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (_server, base) = start_server(&data);

    // Rust steps run in this process, on the same data directory as the server.
    let backend = Arc::new(
        SqliteBackend::open(
            &data,
            SqliteOptions {
                poll_interval: Duration::from_millis(50),
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    );
    let mut tasks = Registry::new();
    let rust = TaskOptions::default().queue("rust");
    tasks.register(
        "rust.parse",
        rust.clone(),
        |_ctx: JobContext, a: Value| async move {
            let name = a["name"].as_str().unwrap_or_default().to_uppercase();
            Ok::<_, std::convert::Infallible>(json!({"text": name}))
        },
    );
    tasks.register(
        "rust.render",
        rust,
        |ctx: JobContext, _: Value| async move {
            let input: Value = ctx.input()?.unwrap_or_default();
            Ok::<_, serde_json::Error>(format!("<{}>", input["text"].as_str().unwrap_or("?")))
        },
    );
    let worker = Engine::new(tranche_core::Client::from_shared(backend), tasks)
        .worker(WorkerConfig::default().queues(["rust"], 4))
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let rust_worker = {
        let stop = stop.clone();
        tokio::spawn(async move { worker.run(stop).await })
    };
    let py = start_python(python, &base, "chain", dir.path());

    let client = reqwest::Client::new();
    let out: Value = support::json_of(client.post(format!("{base}/v1/chains")).json(&json!({"run": "sdk/chain", "steps": [{"kind": "rust.parse", "queue": "rust", "args": {"name": "ada"}},{"kind": "py.transform", "queue": "py"},{"kind": "rust.render", "queue": "rust"}]}))).await;
    let last = out["ids"][2].clone();
    tranche_test_support::poll_until_async(
        "the chain to finish",
        Duration::from_secs(60),
        async || job(&client, &base, &last).await["state"] == "succeeded",
    )
    .await;
    let rec = job(&client, &base, &last).await;
    assert_eq!(rec["result"], "<ADA via python>");
    let middle = job(&client, &base, &out["ids"][1]).await;
    assert_eq!(
        middle["result"],
        json!({"text": "ADA via python", "attempt": 1})
    );

    // SIGTERM: the Python worker drains and exits cleanly.
    let mut py = py;
    sigterm(&py);
    let status = exit_status(&mut py, Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}");
    stop.cancel();
    rust_worker.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_python_worker_loses_its_job_to_another() {
    let Some(Working {
        dir,
        _server,
        base,
        client,
        id,
        py: mut hung,
        python,
    }) = python_working_on("sdk/kill", "py.hang", "hang").await
    else {
        return;
    };
    // kill -9: no goodbye, the lease (2 s) must expire.
    hung.0.kill().unwrap();
    hung.0.wait().unwrap();
    let _finisher = start_python(python, &base, "finish", dir.path());
    tranche_test_support::poll_until_async(
        "another worker to finish the job",
        Duration::from_secs(60),
        async || job(&client, &base, &id).await["state"] == "succeeded",
    )
    .await;
    let rec = job(&client, &base, &id).await;
    assert_eq!(rec["result"], "finished by finish");
    assert_eq!(rec["attempt"], 2, "the killed attempt counts");
    assert!(rec["errors"][0]["error"]
        .as_str()
        .unwrap()
        .contains("lease expired"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_longer_than_its_lease_is_heartbeated_and_finished_after_sigterm() {
    let Some(Working {
        dir: _dir,
        _server,
        base,
        client,
        id,
        mut py,
        ..
    }) = python_working_on("sdk/slow", "py.slow", "slow").await
    else {
        return;
    };
    // Stopped mid-job, the worker must finish the job (3.5 s, its lease 1 s) and report
    // it. Meanwhile this test polls the queue as another worker would: it would be
    // handed the job the moment a lease lapsed for want of a heartbeat.
    sigterm(&py);
    tranche_test_support::poll_until_async(
        "the Python worker stops",
        Duration::from_secs(30),
        async || {
            if py.0.try_wait().unwrap().is_some() {
                return true;
            }
            let polled: Value = support::json_of(
                client
                    .post(format!("{base}/v1/workers/poll"))
                    .json(&json!({"queue": "py", "max": 1, "wait_ms": 300})),
            )
            .await;
            assert_eq!(polled["jobs"], json!([]), "the lease lapsed mid-task");
            false
        },
    )
    .await;
    let status = exit_status(&mut py, Duration::ZERO).await;
    assert!(status.success(), "{status:?}");
    let rec = job(&client, &base, &id).await;
    assert_eq!(rec["state"], "succeeded", "{rec}");
    assert_eq!(rec["result"], "slow done");
    assert_eq!(rec["attempt"], 1, "{rec}");
    assert_eq!(rec["errors"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_abandons_a_hung_task_after_its_grace() {
    let Some(Working {
        dir: _dir,
        _server,
        base,
        client,
        id,
        mut py,
        ..
    }) = python_working_on("sdk/hung", "py.hang", "hang").await
    else {
        return;
    };
    // The handler sleeps 300 s; the grace is 2 s.
    sigterm(&py);
    let status = exit_status(&mut py, Duration::from_secs(20)).await;
    assert!(status.success(), "{status:?}");
    let rec = job(&client, &base, &id).await;
    assert_eq!(
        (rec["state"].as_str(), rec["attempt"].as_u64()),
        (Some("running"), Some(1)),
        "abandoned, not reported: its lease expires"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_reported_while_the_server_restarts_is_retried_until_it_lands() {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let (mut server, base) = start_server_at(&data, &listen);
    let client = reqwest::Client::new();
    let id = submit_one(&client, &base, "sdk/restart", "py.report").await;
    let mut py = start_python(python, &base, "report", dir.path());
    let marker = |what: &str| dir.path().join(format!("{what}-{id}"));
    tranche_test_support::poll_until_async(
        "the worker to start the job",
        Duration::from_secs(30),
        async || marker("started").exists(),
    )
    .await;

    // The server stops; the handler returns while it is down, so the report meets a
    // refused connection and must be retried (with backoff) until the server is back.
    sigterm(&server);
    assert!(exit_status(&mut server, Duration::from_secs(20))
        .await
        .success());
    std::fs::write(marker("release"), "").unwrap();
    tranche_test_support::poll_until_async(
        "the handler to return",
        Duration::from_secs(30),
        async || marker("returned").exists(),
    )
    .await;
    let (_server, again) = start_server_at(&data, &listen);
    assert_eq!(again, base);
    tranche_test_support::poll_until_async(
        "the result to land",
        Duration::from_secs(60),
        async || job(&client, &base, &id).await["state"] == "succeeded",
    )
    .await;
    let rec = job(&client, &base, &id).await;
    assert_eq!(
        (&rec["result"], &rec["attempt"]),
        (&json!("reported"), &json!(1))
    );
    sigterm(&py);
    assert!(exit_status(&mut py, Duration::from_secs(20))
        .await
        .success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_starts_a_lone_job_at_once() {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = start_server(&dir.path().join("data"));
    let _py = start_python(python, &base, "idle", dir.path());
    let ready = dir.path().join("ready-idle");
    tranche_test_support::poll_until_async(
        "the worker to start",
        Duration::from_secs(30),
        async || ready.exists(),
    )
    .await;
    // The worker has 4 free slots and long-polls for 20 s: a poll for 4 would hold
    // this one job until then.
    let client = reqwest::Client::new();
    let id = submit_one(&client, &base, "sdk/idle", "py.quick").await;
    tranche_test_support::poll_until_async(
        "the job to be done",
        Duration::from_secs(10),
        async || job(&client, &base, &id).await["state"] == "succeeded",
    )
    .await;
}

/// The client's operator methods (jobs listed, read, retried, cancelled and deleted;
/// queues paused and resumed; schedules declared, listed and removed; runs pruned)
/// against a real server, by sdk/python/tests/test_client_api.py.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_lists_retries_cancels_and_deletes_jobs_and_steers_queues_and_schedules() {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = start_server(&dir.path().join("data"));
    let out = tokio::process::Command::new(python)
        .arg(sdk().join("tests/test_client_api.py"))
        .arg("-v")
        .env("PYTHONPATH", sdk().join("src"))
        .env("TRANCHE_URL", &base)
        .output()
        .await
        .expect("run python3");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("Ran 8 tests"), "{log}");
}

/// The client's backoff on 429 and 5xx and its refusal to retry a 4xx, against a stub
/// server that answers them on cue (a real server cannot be made to on demand).
#[test]
fn the_client_retries_429_and_5xx_but_not_client_errors() {
    let Some(python) = python() else {
        return;
    };
    let out = Command::new(python)
        .arg(sdk().join("tests/test_client_retry.py"))
        .arg("-v")
        .env("PYTHONPATH", sdk().join("src"))
        .output()
        .expect("run python3");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("Ran 3 tests"), "{log}");
}
