//! Workflows from the command line (`tranche workflow …`), and workflows surviving
//! `kill -9`: 60 workflows (a fork of two branches, a join, steps
//! passing outputs on) run by workers over Conductor's `/api`; the server is killed
//! mid-way and started again on the same state, and a worker vanishes holding steps.
//! Every workflow completes with its exact output, every step ran, and a step ran twice
//! only if it was in flight at the kill or held by the vanished worker (at least once,
//! never a step lost).

use crate::support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

const WORKFLOWS: usize = 60;

fn serve(data: &Path, listen: &str) -> (support::Server, String) {
    support::tranche_server(data, listen)
}

fn step(reference: &str, input: Value) -> Value {
    json!({"name": "crash_w", "taskReferenceName": reference, "type": "SIMPLE", "inputParameters": input})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_survive_a_killed_server_and_a_vanished_worker() {
    let data = tempfile::tempdir().unwrap();
    let (server, base) = serve(data.path(), "127.0.0.1:0");
    let listen = base.trim_start_matches("http://").to_string();
    let api = format!("{base}/api");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ok = |r: reqwest::Response| {
        assert!(r.status().is_success(), "{}", r.status());
        r
    };
    ok(http
        .post(format!("{api}/metadata/taskdefs"))
        .json(&json!([{"name": "crash_w", "retryCount": 3, "retryDelaySeconds": 0, "responseTimeoutSeconds": 2}]))
        .send()
        .await
        .unwrap());
    let def = json!({"name": "crash", "version": 1, "tasks": [
        step("a", json!({"n": "${workflow.input.n}"})),
        {"name": "fork", "taskReferenceName": "fork", "type": "FORK_JOIN", "forkTasks": [
            [step("b1", json!({"n": "${a.output.n}"}))],
            [step("c1", json!({"n": "${a.output.n}"})), step("c2", json!({"n": "${c1.output.n}"}))]
        ]},
        {"name": "join", "taskReferenceName": "join", "type": "JOIN", "joinOn": ["b1", "c2"]},
        step("d", json!({"b": "${b1.output.n}", "c": "${c2.output.n}"}))
    ], "outputParameters": {"sum": "${d.output.n}"}});
    ok(http
        .put(format!("{api}/metadata/workflow"))
        .json(&json!([def]))
        .send()
        .await
        .unwrap());
    let mut ids = Vec::new();
    for n in 0..WORKFLOWS {
        let r = ok(http
            .post(format!("{api}/workflow/crash"))
            .json(&json!({"n": n}))
            .send()
            .await
            .unwrap());
        ids.push(r.text().await.unwrap());
    }

    // Workers: each step adds one to what it got (d adds its two inputs), and says
    // which (workflow, step) it ran. The first polled batch of one worker is dropped on
    // the floor: a worker that vanished holding steps.
    let runs: Arc<Mutex<HashMap<(String, String), usize>>> = Arc::default();
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    for w in 0..3 {
        let (http, api, runs, done, stop) = (
            http.clone(),
            api.clone(),
            runs.clone(),
            done.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut vanish = w == 0;
            while !stop.load(Ordering::SeqCst) {
                let polled = http
                    .get(format!(
                        "{api}/tasks/poll/batch/crash_w?count=5&timeout=100&workerid=w{w}"
                    ))
                    .send()
                    .await;
                let Ok(polled) = polled else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                let tasks: Vec<Value> = polled.json().await.unwrap_or_default();
                if vanish && !tasks.is_empty() {
                    vanish = false;
                    continue;
                }
                for t in tasks {
                    let wf = t["workflowInstanceId"].as_str().unwrap().to_string();
                    let reference = t["referenceTaskName"].as_str().unwrap().to_string();
                    let input = &t["inputData"];
                    let n = if reference == "d" {
                        input["b"].as_i64().unwrap() + input["c"].as_i64().unwrap()
                    } else {
                        input["n"].as_i64().unwrap() + 1
                    };
                    *runs
                        .lock()
                        .unwrap()
                        .entry((wf.clone(), reference))
                        .or_default() += 1;
                    let body = json!({"taskId": t["taskId"], "workflowInstanceId": wf,
                                      "status": "COMPLETED", "outputData": {"n": n}});
                    // A lost answer (the server was killed) leaves the step to its
                    // lease: it runs again, as at-least-once allows.
                    if let Ok(r) = http.post(format!("{api}/tasks")).json(&body).send().await {
                        if r.status().is_success() {
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
            }
        }));
    }

    // Kill the server once about a third of the steps are done, then start it again
    // on the same state and address.
    let steps = WORKFLOWS * 5;
    tranche_test_support::poll_until("a third of the steps done", Duration::from_secs(60), || {
        done.load(Ordering::SeqCst) >= steps / 3
    })
    .await;
    let mut server = server;
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    let (_server, _) = serve(data.path(), &listen);

    let mut outputs: Vec<Value> = Vec::new();
    tranche_test_support::poll_until_async(
        "every workflow completed",
        Duration::from_secs(90),
        async || {
            outputs.clear();
            for id in &ids {
                let Ok(r) = http
                    .get(format!("{api}/workflow/{id}?includeTasks=false"))
                    .send()
                    .await
                else {
                    return false;
                };
                let w: Value = r.json().await.unwrap_or_default();
                if w["status"] != "COMPLETED" {
                    assert!(
                        matches!(w["status"].as_str(), Some("RUNNING") | None),
                        "workflow {id} ended {}: {}",
                        w["status"],
                        w["reasonForIncompletion"]
                    );
                    return false;
                }
                outputs.push(w["output"].clone());
            }
            true
        },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    for (n, output) in outputs.iter().enumerate() {
        // a = n+1, b1 = n+2, c1 = n+2, c2 = n+3, d = 2n+5.
        assert_eq!(output, &json!({"sum": 2 * n as i64 + 5}), "workflow {n}");
    }
    let runs = runs.lock().unwrap();
    assert_eq!(runs.len(), steps, "every step of every workflow ran");
    let again: usize = runs.values().map(|c| c - 1).sum();
    // In flight at the kill: at most 3 workers × 5 steps; the vanished batch: 5.
    assert!(
        again <= 20,
        "{again} steps ran twice: more than were in flight"
    );
}

fn cli(data: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(data)
        .arg("workflow")
        .args(args)
        .output()
        .expect("run tranche workflow");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_line_applies_starts_shows_lists_terminates_and_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let tasks = file("tasks.json", r#"[{"name": "w", "retryCount": 0}]"#);
    let good = file(
        "wf.json",
        r#"{"name": "cli", "version": 1, "tasks": [{"name": "w", "taskReferenceName": "a", "inputParameters": {"x": "${workflow.input.x}"}}]}"#,
    );
    let bad = file(
        "bad.json",
        r#"{"name": "bad", "version": 1, "tasks": [{"name": "w", "taskReferenceName": "a", "type": "NOPE"}]}"#,
    );
    // Files never applied: a mistake is said with its file, workflow and step path.
    std::fs::create_dir_all(&data).unwrap();
    let (code, _, err) = cli(&data, &["apply", &bad]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.json: bad v1: tasks[0].type") && err.contains("NOPE"),
        "{err}"
    );
    assert_eq!(cli(&data, &["tasks", &tasks]).0, 0);
    let (code, out, err) = cli(&data, &["apply", &good]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("applied workflow cli v1"), "{out}");
    let (code, err) = {
        let (c, _, e) = cli(&data, &["start", "cli", "--input", "[1]"]);
        (c, e)
    };
    assert_ne!(code, 0);
    assert!(err.contains("--input: expected a JSON object"), "{err}");
    let (code, id, err) = cli(
        &data,
        &[
            "start",
            "cli",
            "--input",
            r#"{"x": 1}"#,
            "--correlation-id",
            "file-7",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let id = id.trim().to_string();
    let (_, shown, _) = cli(&data, &["show", &id]);
    assert!(
        shown.contains("status   RUNNING") && shown.contains("SCHEDULED"),
        "{shown}"
    );
    let (_, json, _) = cli(&data, &["show", &id, "--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["tasks"][0]["inputData"], json!({"x": 1}));
    assert_eq!(json["correlationId"], "file-7");
    let (_, listed, _) = cli(&data, &["list", "--status", "running"]);
    assert!(listed.contains(&id), "{listed}");
    assert_eq!(
        cli(&data, &["terminate", &id, "--reason", "ops said so"]).0,
        0
    );
    let (_, shown, _) = cli(&data, &["show", &id]);
    assert!(
        shown.contains("TERMINATED") && shown.contains("ops said so"),
        "{shown}"
    );
    assert!(
        shown.contains("CANCELED"),
        "its step was cancelled: {shown}"
    );
    let (code, _, err) = cli(&data, &["terminate", &id]);
    assert_ne!(code, 0);
    assert!(err.contains("already ended"), "{err}");

    // Rerun from its step with another input: running again, the step scheduled anew
    // with it (the cancelled one replaced).
    let (code, _, err) = cli(&data, &["rerun", &id, "--from", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("no step \"nope\""), "{err}");
    let (code, out, err) = cli(
        &data,
        &["rerun", &id, "--from", "a", "--task-input", r#"{"x": 2}"#],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rerun from a"), "{out}");
    let (_, json, _) = cli(&data, &["show", &id, "--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["status"], "RUNNING");
    assert_eq!(json["tasks"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(json["tasks"][0]["inputData"], json!({"x": 2}));
    assert_eq!(json["tasks"][0]["status"], "SCHEDULED");
}
