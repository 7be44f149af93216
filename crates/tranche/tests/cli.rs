//! The `tranche` binary as an operator uses it, against a real data directory.

use crate::support;

use support::{streams as text, tranche_on as tranche};

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tranche_core::Client;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobSpec, ReserveRequest, Resolution, RunName,
};

/// A run with one failed, one succeeded and one queued job.
async fn night(data: &Path) {
    let b = Client::new(SqliteBackend::open(data, SqliteOptions::default()).unwrap());
    let items = (0..3)
        .map(|i| EnqueueItem::Job(JobSpec::new("note", i.to_string())))
        .collect();
    b.enqueue(EnqueueRequest {
        run: RunName::new("night/1").unwrap(),
        items,
        on_done: None,
    })
    .await
    .unwrap();
    let req = ReserveRequest {
        queue: "default".into(),
        max: 2,
        lease: Duration::from_secs(30),
        wait: Duration::ZERO,
    };
    let js = b.worker_protocol().reserve(req).await.unwrap();
    b.worker_protocol()
        .complete(vec![
            Completion {
                lease: js[0].lease(),
                resolution: Resolution::Failed {
                    error: "bad PAN in clients.csv line 7".into(),
                },
            },
            Completion {
                lease: js[1].lease(),
                resolution: Resolution::Succeeded {
                    result: "null".into(),
                },
            },
        ])
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    night(&data).await;

    let out = tranche(&data, &["runs"]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(text(&out).0.contains("night/1"));

    let out = tranche(&data, &["status", "night/1"]);
    let (stdout, _) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a run with failures exits 2: {stdout}"
    );
    assert!(stdout.contains("failed       1"), "{stdout}");
    assert!(stdout.contains("bad PAN in clients.csv line 7"), "{stdout}");
    // The hint names the same state, so it can be pasted as it is.
    assert!(
        stdout.contains(&format!("tranche --data {} retry night/1", data.display())),
        "{stdout}"
    );

    let out = tranche(&data, &["status", "night/1", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
    assert_eq!(v["progress"]["total"], 3);
    assert_eq!(v["failures"][0]["error"], "bad PAN in clients.csv line 7");

    let out = tranche(&data, &["retry", "night/1"]);
    assert!(out.status.success());
    assert_eq!(text(&out).0.trim(), "re-enqueued 1 job(s) of night/1");

    let out = tranche(&data, &["cancel", "night/1", "--reason", "bank holiday"]);
    assert!(out.status.success());
    assert_eq!(text(&out).0.trim(), "cancelled 2 job(s)");

    let marker = dir.path().join("torn-down");
    let hook = format!(
        "echo \"$TRANCHE_RUN $TRANCHE_SUCCEEDED $TRANCHE_CANCELLED\" >> {}",
        marker.display()
    );
    let out = tranche(
        &data,
        &["wait", "night/1", "--on-done", &hook, "--timeout", "30"],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "night/1 1 2\n");
    let out = tranche(
        &data,
        &["wait", "night/1", "--on-done", &hook, "--timeout", "30"],
    );
    assert!(out.status.success());
    assert!(text(&out).1.contains("already ran"), "{:?}", text(&out));
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "night/1 1 2\n",
        "the hook ran once"
    );
}

#[test]
fn errors_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = tranche(&dir.path().join("nowhere"), &["status", "night/1"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: no Tranche data in "), "{stderr}");
    assert!(
        !dir.path().join("nowhere").exists(),
        "inspecting does not create a database"
    );

    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    drop(SqliteBackend::open(&data, SqliteOptions::default()).unwrap());
    let out = tranche(&data, &["retry", "no-such-run"]);
    assert_eq!(
        text(&out).1.trim(),
        format!(
            "error: run no-such-run not found in {} (see `tranche runs`)",
            data.display()
        )
    );
    let out = tranche(&data, &["status", "bad name!"]);
    assert!(
        text(&out).1.contains("invalid run name \"bad name!\""),
        "{:?}",
        text(&out)
    );
}

#[test]
fn bench_engine_processes_every_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = tranche(
        dir.path(),
        &[
            "bench",
            "engine",
            "--jobs",
            "3000",
            "--chain-length",
            "3",
            "--json",
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("bench --json is JSON");
    assert_eq!(v["jobs"], 9000);
    assert_eq!(v["chains"], 3000);
    assert!(v["process_jobs_per_sec"].as_f64().unwrap() > 0.0);
    assert!(v["latency_p99_ms"].as_f64().unwrap() >= v["latency_p50_ms"].as_f64().unwrap());
    assert!(v["peak_rss_mb"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_broker_password_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let url = "redis://:hunter2-secret@127.0.0.1:9/0";
    let out = tranche(dir.path(), &["--broker", url, "wait", "night/1"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        !stdout.contains("hunter2") && !stderr.contains("hunter2"),
        "{stderr}"
    );
    assert!(stderr.contains("redis://***@127.0.0.1:9/0"), "{stderr}");
    assert!(stderr.contains("holds a password"), "{stderr}");
}

#[test]
fn help_explains_every_command() {
    let dir = tempfile::tempdir().unwrap();
    for cmd in [
        &["--help"][..],
        &["runs", "--help"],
        &["status", "--help"],
        &["retry", "--help"],
        &["cancel", "--help"],
        &["wait", "--help"],
        &["bench", "engine", "--help"],
        &["feed", "serve", "--help"],
        &["ach", "--help"],
        &["ach", "engine", "--help"],
        &["ach", "status", "--help"],
        &["ach", "generate", "--help"],
        &["ach", "demo", "--help"],
        &["bench", "ach", "--help"],
    ] {
        let out = tranche(dir.path(), cmd);
        assert!(out.status.success(), "{cmd:?}");
        let help = text(&out).0;
        assert!(help.contains("Usage: tranche"), "{cmd:?}");
        // A command's own options come first; the engine's state and ledger, which
        // every command takes, after them under a heading of their own.
        let own = help.find("Options:").expect("options");
        let global = help.find("Global options:").expect("global options");
        assert!(own < global, "{cmd:?}: {help}");
        assert!(help[global..].contains("--broker <URL>"), "{cmd:?}");
        assert!(!help[..global].contains("--broker <URL>"), "{cmd:?}");
    }
}

/// `tranche server` and `tranche feed serve` take the same flags for slow and idle
/// clients, with the same defaults and the same words (one clap struct, flattened).
#[test]
fn server_and_feed_serve_take_the_same_client_limits() {
    let dir = tempfile::tempdir().unwrap();
    let section = |cmd: &[&str]| {
        let out = tranche(dir.path(), cmd);
        assert!(out.status.success(), "{cmd:?}");
        let help = text(&out).0;
        let start = help
            .find("Slow and idle clients:")
            .unwrap_or_else(|| panic!("{cmd:?}: {help}"));
        let end = help.find("Global options:").expect("global options");
        help[start..end].to_string()
    };
    let server = section(&["server", "--help"]);
    assert_eq!(server, section(&["feed", "serve", "--help"]));
    for flag in [
        "--header-timeout <SECS>",
        "--idle-timeout <SECS>",
        "--body-timeout <SECS>",
        "--max-connections <N>",
    ] {
        assert!(server.contains(flag), "{flag}: {server}");
    }
    assert_eq!(server.matches("[default: 10]").count(), 2, "{server}");
    assert!(server.contains("[default: 1024]"), "{server}");
}

#[test]
fn sigterm_finishes_in_flight_jobs_and_keeps_the_rest_queued() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(&data)
        // One job at a time, so the run is still going when the signal lands.
        .args([
            "bench",
            "engine",
            "--jobs",
            "200000",
            "--concurrency",
            "1",
            "--batch",
            "1",
            "--keep",
        ])
        .env("TRANCHE_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "bench ended before processing"
        );
        if line.contains("processed:") {
            break;
        }
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(
        rest.contains("interrupted:") && rest.contains(" 0 running"),
        "{rest}"
    );
    // The log line is there, and plain: stderr is a pipe (a log file), not a terminal.
    assert!(rest.contains("shutdown requested"), "{rest}");
    assert!(
        !rest.contains('\u{1b}'),
        "colour codes in a log file: {rest}"
    );

    let out = tranche(&data, &["runs", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &runs[0];
    assert_eq!(run["running"], 0, "nothing left leased: {run}");
    assert_eq!(run["total"], 200_000);
    let done = run["succeeded"].as_u64().unwrap();
    assert!(done > 0 && done < 200_000, "{run}");
    assert_eq!(
        run["available"].as_u64().unwrap() + done,
        200_000,
        "the rest is still queued"
    );
}

#[test]
fn notes_generate_then_check_reports_bad_rows_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let day = dir.path().join("day");
    let d = day.to_str().unwrap();
    let out = tranche(
        dir.path(),
        &[
            "notes",
            "generate",
            "--clients",
            "40",
            "--date",
            "2026-11-20",
            "--out",
            d,
        ],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        text(&out).0.starts_with("wrote 40 clients and "),
        "{:?}",
        text(&out)
    );
    let check = |extra: &[&str]| {
        let mut args = vec!["notes", "check", "--date", "2026-11-20"];
        let files = [
            ("--trades", day.join("trades.csv")),
            ("--clients", day.join("clients.csv")),
            ("--broker-file", day.join("broker.toml")),
        ];
        let owned: Vec<String> = files
            .iter()
            .flat_map(|(f, p)| [f.to_string(), p.display().to_string()])
            .collect();
        args.extend(owned.iter().map(String::as_str));
        args.extend(extra);
        tranche(dir.path(), &args)
    };
    let out = check(&[]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        text(&out).0.starts_with("40 clients with "),
        "{:?}",
        text(&out)
    );

    let mut trades = std::fs::read_to_string(day.join("trades.csv")).unwrap();
    let lines = trades.lines().count();
    trades
        .push_str("X1,OX1,10:00:00,10:00:01,C0000001,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,ten,1500\n");
    trades.push_str("X2,OX2,10:00:00,10:00:01,NOBODY,NSE,EQ,INFY,INE009A01021,EQ,CNC,B,10,1500\n");
    std::fs::write(day.join("trades.csv"), trades).unwrap();
    let out = check(&[]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(stdout.contains("39 notes ready, 2 would fail"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "trades.csv:{}: field quantity: expected a positive whole number, got \"ten\"",
            lines + 1
        )),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("trades.csv:{}: field client_code: expected a client in the client master, got \"NOBODY\"", lines + 2)), "{stdout}");
}

#[test]
fn a_demo_of_no_clients_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .args(["notes", "demo", "--clients", "0", "--dir"])
        .arg(&demo)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_a_queue() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let b = Client::new(SqliteBackend::open(&data, SqliteOptions::default()).unwrap());
    b.enqueue(EnqueueRequest {
        run: RunName::new("night/p").unwrap(),
        items: vec![
            EnqueueItem::Job(JobSpec::new("mail", "1").queue("mail")),
            EnqueueItem::Job(JobSpec::new("note", "2")),
        ],
        on_done: None,
    })
    .await
    .unwrap();
    let take = |queue: &str| {
        b.worker_protocol().reserve(ReserveRequest {
            queue: queue.into(),
            max: 10,
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
        })
    };

    let out = tranche(&data, &["pause", "mail"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.starts_with("paused queue mail"), "{stdout}");
    assert!(
        stdout.contains("resume mail"),
        "says how to undo it: {stdout}"
    );
    // This process shares the file: its reserves see the pause the command made.
    assert!(take("mail").await.unwrap().is_empty());
    let out = tranche(&data, &["pause", "mail"]);
    assert_eq!(text(&out).0.trim(), "queue mail was already paused");
    // Paused before it has jobs: listed all the same.
    assert!(tranche(&data, &["pause", "sms"]).status.success());

    let out = tranche(&data, &["queues"]);
    let (stdout, _) = text(&out);
    let row = |q: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(q))
            .unwrap_or_else(|| panic!("queue {q} listed: {stdout}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(row("mail"), ["mail", "1", "0", "paused"]);
    assert_eq!(row("sms"), ["sms", "0", "0", "paused"]);
    assert_eq!(row("default"), ["default", "1", "0"]);

    let out = tranche(&data, &["resume", "mail"]);
    assert!(
        text(&out).0.starts_with("resumed queue mail"),
        "{:?}",
        text(&out)
    );
    assert_eq!(take("mail").await.unwrap().len(), 1);
    let out = tranche(&data, &["resume", "mail"]);
    assert_eq!(text(&out).0.trim(), "queue mail was not paused");
    let out = tranche(&data, &["queues", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        listed,
        serde_json::json!([
            {"queue": "default", "available": 1, "running": 0, "paused": false},
            {"queue": "mail", "available": 0, "running": 1, "paused": false},
            {"queue": "sms", "available": 0, "running": 0, "paused": true},
        ])
    );

    let out = tranche(&data, &["pause", ""]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("queue") && stderr.contains("non-empty"),
        "{stderr}"
    );
    let out = tranche(&dir.path().join("typo"), &["pause", "mail"]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("no Tranche data"), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_job_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    night(&data).await;

    let out = tranche(&data, &["jobs", "--run", "night/1", "--json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("jobs --json is JSON");
    let jobs = v["jobs"].as_array().unwrap();
    let id_in = |state: &str| {
        jobs.iter()
            .find(|j| j["state"] == state)
            .map(|j| j["id"].as_i64().unwrap().to_string())
            .unwrap_or_else(|| panic!("a {state} job in {v}"))
    };
    let (failed, succeeded, queued) = (id_in("failed"), id_in("succeeded"), id_in("available"));
    assert_eq!(jobs.len(), 3);
    assert!(v["next"].is_null());

    let out = tranche(&data, &["jobs", "--state", "failed", "--kind", "note"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(stdout.lines().count(), 2, "a header and one job: {stdout}");
    assert!(stdout.contains("bad PAN in clients.csv line 7"), "{stdout}");

    // Paged: one at a time, with the command for the next page.
    let out = tranche(&data, &["jobs", "--run", "night/1", "--limit", "1"]);
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains(&format!("jobs --run night/1 --after {failed}")),
        "{stdout}"
    );

    let out = tranche(&data, &["job", &failed]);
    let (stdout, _) = text(&out);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("failed") && stdout.contains("attempt  1"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("retry --job {failed}")),
        "the hint to retry it: {stdout}"
    );

    let out = tranche(&data, &["retry", "--job", &succeeded]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed or cancelled") && stderr.contains("succeeded"),
        "{stderr}"
    );
    let out = tranche(&data, &["retry", "--job", &failed]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(text(&out)
        .0
        .starts_with(&format!("re-enqueued job {failed}")));

    let out = tranche(&data, &["delete", "--job", &queued]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("available"), "{stderr}");
    let out = tranche(&data, &["delete", "--job", &succeeded]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = tranche(&data, &["status", "night/1", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["progress"]["total"].as_u64(),
            v["progress"]["succeeded"].as_u64()
        ),
        (Some(2), Some(0))
    );
    let out = tranche(&data, &["job", &succeeded]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("not found"));

    let out = tranche(&data, &["jobs", "--state", "done"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("expected one of pending, available"),
        "{stderr}"
    );
}
