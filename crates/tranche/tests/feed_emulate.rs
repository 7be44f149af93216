//! `tranche feed emulate-core`, `emulate-clients` and `bench feed` as processes: a
//! core and clients in processes of their own check a run through the run file, and
//! the bench runs server, core and clients in one.

mod support;

use std::process::{Child, Stdio};

use serde_json::Value;

/// A child process, killed if its test fails before it ends.
struct Killed(Option<Child>);

impl Killed {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("not yet waited for")
    }

    /// Waits for it to end by itself.
    fn output(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            if child.try_wait().ok().flatten().is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn json_of(output: &std::process::Output) -> Value {
    let (stdout, _) = support::streams(output);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", support::text(output)))
}

#[test]
fn a_core_and_clients_in_processes_of_their_own_check_a_run_through_the_run_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut feed = Killed(Some(
        support::tranche()
            .args([
                "feed",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--durability",
                "never",
            ])
            .arg("--dir")
            .arg(dir.path().join("store"))
            .env_remove("TRANCHE_FEED_TOKENS")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tranche feed serve"),
    ));
    let (base, _) = support::server_address(feed.child());
    let run_file = dir.path().join("run.json");

    // One target per shard: two shards cannot share a store.
    let refused = support::tranche()
        .args(["feed", "emulate-core", "--shards", "2", "--target", &base])
        .output()
        .unwrap();
    assert_eq!(
        refused.status.code(),
        Some(1),
        "{}",
        support::text(&refused)
    );
    assert!(
        support::text(&refused).contains("expected one --target per shard, got 1"),
        "{}",
        support::text(&refused)
    );

    // The clients start first and wait for the run.
    let clients = Killed(Some(
        support::tranche()
            .args(["feed", "emulate-clients", "--target", &base, "--run-file"])
            .arg(&run_file)
            .args(["--filtered", "3", "--unfiltered", "1", "--min-batch", "5"])
            .args(["--wait-ms", "100", "--json"])
            .env_remove("TRANCHE_FEED_READ_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let core = support::tranche()
        .args(["feed", "emulate-core", "--target", &base, "--rate", "2000"])
        .args([
            "--duration",
            "2",
            "--firms",
            "3",
            "--seed",
            "4",
            "--json",
            "--run-file",
        ])
        .arg(&run_file)
        .env_remove("TRANCHE_FEED_CORE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(core.status.code(), Some(0), "{}", support::text(&core));
    let report = json_of(&core);
    let events = report["events"][0].as_u64().unwrap();
    assert!((4_000..=4_001).contains(&events), "{report}");
    assert_eq!(report["kept_up"], true, "{report}");

    let clients = clients.output();
    assert_eq!(
        clients.status.code(),
        Some(0),
        "{}",
        support::text(&clients)
    );
    let report = json_of(&clients);
    assert_eq!(report["checked"], true, "{report}");
    assert_eq!(report["caught_up"], true, "{report}");
    for problem in ["omissions", "reorderings", "mismatches", "misfiltered"] {
        assert_eq!(report[problem], 0, "{problem}: {report}");
    }
    assert!(report["rows"].as_u64().unwrap() > 0, "{report}");
    let (_, stderr) = support::streams(&clients);
    assert!(stderr.contains("the core finished (4"), "{stderr}");
}

#[test]
fn bench_feed_runs_server_core_and_clients_in_one_process() {
    let output = support::tranche()
        .args([
            "bench",
            "feed",
            "--duration",
            "2",
            "--rate",
            "2000",
            "--transport",
            "tcp",
        ])
        .args(["--filtered", "3", "--unfiltered", "1", "--firms", "3"])
        .args(["--durability", "never", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", support::text(&output));
    let all = json_of(&output);
    let summary = &all["summary"];
    assert_eq!(summary["checked"], true, "{summary}");
    assert_eq!(summary["omissions"], 0, "{summary}");
    assert_eq!(summary["reorderings"], 0, "{summary}");
    assert_eq!(summary["clients"], 4, "{summary}");
    assert!(
        summary["writes_per_sec"].as_f64().unwrap() > 1_000.0,
        "{summary}"
    );
    assert!(
        summary["delivered_rows_per_sec"].as_f64().unwrap() > 0.0,
        "{summary}"
    );
    assert!(
        summary["latency"]["p99_us"].as_u64().unwrap() > 0,
        "{summary}"
    );
    assert!(all["orders_held"].as_u64().unwrap() > 1_000, "{all}");
}

#[test]
fn help_explains_the_emulators() {
    for (cmd, says) in [
        (&["feed", "emulate-core", "--help"][..], "open loop"),
        (
            &["feed", "emulate-clients", "--help"],
            "no omission, no reordering",
        ),
        (&["bench", "feed", "--help"], "delivered rows/s"),
    ] {
        let out = support::tranche().args(cmd).output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", support::text(&out));
        let (stdout, _) = support::streams(&out);
        assert!(stdout.contains("Usage: tranche"), "{cmd:?}");
        assert!(
            stdout.contains(says),
            "{cmd:?} should say {says:?}: {stdout}"
        );
    }
}
