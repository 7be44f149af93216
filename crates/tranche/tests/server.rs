//! `tranche server` as a process: started on a free loopback port, driven over HTTP,
//! its figures covering jobs another process worked on the same database, stopped
//! with SIGTERM.

use crate::support;

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use tranche_sqlite::{SqliteBackend, SqliteOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_binary_serves_submit_poll_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    tranche_test_support::write_secret(&tokens, "# test tokens\nops-1\nwork-2 worker\n");
    let (server, base, line) = spawn_server(
        dir.path(),
        &["--tokens", tokens.to_str().unwrap(), "--queue-limit", "10"],
    );
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
    let progress: Value = support::json_of(
        client
            .get(format!("{base}/v1/runs/bin%2F1"))
            .bearer_auth("ops-1"),
    )
    .await;
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
    support::work_beside(tranche_core::Client::new(backend), "bw", "bin/engine").await;
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
    stop(server).await;
}

/// A `tranche server` process, killed if its test fails before stopping it: left
/// running, it would hold the test's output open and hang whoever reads it.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `tranche server` on a free loopback port with `args`: the process, its base URL and
/// the line it announced itself with.
/// The server and the `tranche ach` commands share the SQLite ledger in --data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_binary_serves_the_ach_ledger_in_its_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base, _) = spawn_server(dir.path(), &[]);
    let client = reqwest::Client::new();
    let entry = json!({
        "entry_id": "H1", "bank": "first", "company_name": "ACME PAYROLL",
        "company_id": "1234567890", "sec_code": "PPD", "transaction_code": "22",
        "rdfi_routing": "026009593", "account_number": "4001234567", "amount_cents": 1000,
        "individual_id": "", "individual_name": "JANE DOE", "entry_description": "PAYROLL",
        "effective_date": "2026-03-03", "submission_date": "2026-03-02",
    });
    let r: Value = support::json_of(
        client
            .post(format!("{base}/v1/ach/entries"))
            .json(&json!({"entries": [entry]})),
    )
    .await;
    assert_eq!(r["results"][0]["outcome"], "new", "{r}");

    let cancel = support::tranche_on(&dir.path().join("data"), &["ach", "cancel", "H1"]);
    assert!(cancel.status.success(), "{}", support::text(&cancel));
    let got: Value = support::json_of(client.get(format!("{base}/v1/ach/entries/H1"))).await;
    assert_eq!(got["state"], "cancelled", "{got}");
    assert_eq!(got["account_number"], "******4567");
    stop(server).await;
}

fn spawn_server(dir: &std::path::Path, args: &[&str]) -> (Server, String, String) {
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_tranche"))
            .arg("--data")
            .arg(dir.join("data"))
            .args(["server", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("TRANCHE_TOKENS")
            .env_remove("TRANCHE_LEDGER")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tranche server"),
    );
    let (base, line) = support::server_address(&mut server.0);
    (server, base, line)
}

/// SIGTERM, then expect a graceful exit with code 0.
async fn stop(mut server: Server) {
    let child = &mut server.0;
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status =
        tranche_test_support::exited(child, "server did not stop", Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
}

/// The command line reaches the server: `--header-timeout` cuts off a client that
/// stops half way through its headers, `--show-personal-data` shows a job's PAN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_flags_set_its_timeouts_and_personal_data() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base, _) = spawn_server(
        dir.path(),
        &[
            "--header-timeout",
            "1",
            "--body-timeout",
            "1",
            "--max-connections",
            "8",
            "--show-personal-data",
        ],
    );
    let addr = base.trim_start_matches("http://").to_string();
    let cut_off = tokio::task::spawn_blocking(move || {
        let mut half = std::net::TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /healthz HTTP/1.1\r\nHost: tran")
            .unwrap();
        half.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut rest = Vec::new();
        match half.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("not cut off after the header timeout: {e}"),
        }
        started.elapsed()
    })
    .await
    .unwrap();
    assert!(cut_off >= Duration::from_millis(900), "{cut_off:?}");

    let client = reqwest::Client::new();
    let submitted: Value = support::json_of(
        client
            .post(format!("{base}/v1/jobs"))
            .json(&json!({"run": "bin/pd", "job": {"kind": "x", "args": {"pan": "ABCDE1234F"}}})),
    )
    .await;
    let job: Value =
        support::json_of(client.get(format!("{base}/v1/jobs/{}", submitted["ids"][0]))).await;
    assert_eq!(job["args"]["pan"], "ABCDE1234F");
    stop(server).await;
}

#[test]
fn the_server_refuses_to_show_personal_data_to_every_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(dir.path())
        .args(["server", "--listen", "127.0.0.1:0", "--show-personal-data"])
        .env("TRANCHE_TOKENS", "ops-1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A server that starts instead of refusing would run until killed.
    let status = tranche_test_support::exited(
        &mut child,
        "the server refuses --show-personal-data with tokens",
        Duration::from_secs(20),
    );
    assert!(!status.success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("TOKEN pii"), "{err}");
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

/// `--ach-rules`: the rules' banks and windows, with their times, in /v1/ach/status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_lists_the_windows_of_its_ach_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ach.toml");
    std::fs::write(&rules, ach_rules()).unwrap();
    let (server, base, _) = spawn_server(dir.path(), &["--ach-rules", rules.to_str().unwrap()]);
    let status: Value = reqwest::get(format!("{base}/v1/ach/status?date=2026-03-02"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bank = &status["banks"][0];
    assert_eq!(bank["bank"], "first", "{status}");
    let windows: Vec<_> = bank["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["window"].clone(), w["begins"].clone()))
        .collect();
    // 08:30 in New York on 2 March 2026 (UTC-5), in microseconds.
    assert_eq!(
        windows,
        [(json!("sd1"), json!(1_772_458_200_000_000_i64))],
        "{status}"
    );
    stop(server).await;
}

/// Invalid `--ach-rules`: every problem printed, exit 2, nothing served.
#[test]
fn the_server_refuses_invalid_ach_rules_naming_every_problem() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ach.toml");
    let bad = ach_rules()
        .replace("\"08:30\"", "\"8h30\"")
        .replace("\"same-day\"", "\"sameday\"");
    std::fs::write(&rules, bad).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(dir.path().join("data"))
        .args(["server", "--listen", "127.0.0.1:0", "--ach-rules"])
        .arg(&rules)
        .env_remove("TRANCHE_TOKENS")
        .env_remove("TRANCHE_LEDGER")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for field in [
        "bank[0].window[0].submission_begin",
        "bank[0].window[0].eligible",
    ] {
        assert!(err.contains(field), "{field} not reported: {err}");
    }
    assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "{out:?}");
}

/// One bank in New York with its morning same-day window.
fn ach_rules() -> String {
    tranche_test_support::ach_rules::Bank::first()
        .with("time_zone = \"America/New_York\"")
        .same_day_morning()
        .to_string()
}
