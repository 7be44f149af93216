//! The Python worker SDK (`sdk/python`) against a real `tranche server` process: a
//! Python task in a chain between two Rust tasks, and a Python worker killed mid-job
//! whose job another worker finishes. Needs `python3` (standard library only).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        && (std::env::var_os("CI").is_some() || std::env::var_os("TRANCHE_REQUIRE_TOOLS").is_some())
    {
        panic!("python3 is required (CI or TRANCHE_REQUIRE_TOOLS is set)");
    }
    ok.then_some("python3")
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(data: &Path) -> (Proc, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(data)
        .args(["server", "--listen", "127.0.0.1:0"])
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
    (Proc(child), base)
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

async fn wait_for(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn job(client: &reqwest::Client, base: &str, id: &Value) -> Value {
    client
        .get(format!("{base}/v1/jobs/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
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
    let worker = Engine::new(backend, tasks)
        .worker(WorkerConfig::default().queues(["rust"], 4))
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let rust_worker = {
        let stop = stop.clone();
        tokio::spawn(async move { worker.run(stop).await })
    };
    let py = start_python(python, &base, "chain", dir.path());

    let client = reqwest::Client::new();
    let out: Value = client
        .post(format!("{base}/v1/chains"))
        .json(&json!({"run": "sdk/chain", "steps": [
            {"kind": "rust.parse", "queue": "rust", "args": {"name": "ada"}},
            {"kind": "py.transform", "queue": "py"},
            {"kind": "rust.render", "queue": "rust"}
        ]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = out["ids"][2].clone();
    wait_for("the chain to finish", Duration::from_secs(60), async || {
        job(&client, &base, &last).await["state"] == "succeeded"
    })
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
    Command::new("kill")
        .args(["-TERM", &py.0.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = py.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the Python worker did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    stop.cancel();
    rust_worker.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_python_worker_loses_its_job_to_another() {
    let Some(python) = python() else {
        eprintln!("skipped: python3 not found");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, base) = start_server(&dir.path().join("data"));
    let client = reqwest::Client::new();
    let out: Value = client
        .post(format!("{base}/v1/jobs"))
        .json(&json!({"run": "sdk/kill", "job": {"kind": "py.hang", "queue": "py"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = out["ids"][0].clone();
    let mut hung = start_python(python, &base, "hang", dir.path());
    let marker = dir.path().join(format!("started-{id}"));
    wait_for(
        "the first worker to start the job",
        Duration::from_secs(30),
        async || marker.exists(),
    )
    .await;
    // kill -9: no goodbye, the lease (2 s) must expire.
    hung.0.kill().unwrap();
    hung.0.wait().unwrap();
    let _finisher = start_python(python, &base, "finish", dir.path());
    wait_for(
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
