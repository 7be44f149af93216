//! `tranche feed emulate-core`, `emulate-clients` and `bench feed` as processes: two
//! cores into one server of two shards and clients (the unfiltered on a replica of
//! it) in processes of their own check a run through the run file; the bench starts
//! the server and a replica as child processes (the pilot's shape) or in its own
//! process, at one rate or several.

use crate::support;

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

/// A `tranche feed serve` with `args` on free loopback ports (HTTP and TCP); its
/// base URL and TCP address.
fn serve(dir: &std::path::Path, args: &[&str]) -> (Killed, String, String) {
    let mut feed = Killed(Some(
        support::tranche()
            .args([
                "feed",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--tcp",
                "127.0.0.1:0",
            ])
            .args(["--durability", "never"])
            .arg("--dir")
            .arg(dir)
            .args(args)
            .env_remove("TRANCHE_FEED_TOKENS")
            .env_remove("TRANCHE_FEED_REPLICA_TOKEN")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tranche feed serve"),
    ));
    let (base, line) = support::server_address(feed.child());
    let tcp = support::tcp_address(&line);
    (feed, base, tcp)
}

#[test]
fn two_cores_into_one_sharded_server_and_clients_on_it_and_its_replica_check_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_primary, base, tcp) = serve(&dir.path().join("primary"), &["--shards", "2"]);
    let (_replica, replica_base, _) = serve(&dir.path().join("replica"), &["--replica-of", &tcp]);
    let run_file = dir.path().join("run.json");

    // Three shards cannot be on two targets; nor on a server of two.
    for (targets, says) in [
        (&[&base, &base][..], "expected one target"),
        (&[&base][..], "the server needs --shards 3 or more"),
    ] {
        let mut command = support::tranche();
        command.args(["feed", "emulate-core", "--shards", "3", "--duration", "1"]);
        for target in targets {
            command.args(["--target", target]);
        }
        let refused = command
            .env_remove("TRANCHE_FEED_CORE_TOKEN")
            .output()
            .unwrap();
        assert_eq!(
            refused.status.code(),
            Some(1),
            "{}",
            support::text(&refused)
        );
        assert!(
            support::text(&refused).contains(says),
            "{}",
            support::text(&refused)
        );
    }

    // The clients start first and wait for the run; the unfiltered one reads the
    // replica.
    let clients = Killed(Some(
        support::tranche()
            .args(["feed", "emulate-clients", "--target", &base])
            .args(["--replica", &replica_base, "--run-file"])
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
        .args(["feed", "emulate-core", "--target", &base, "--shards", "2"])
        .args([
            "--rate",
            "2000",
            "--duration",
            "2",
            "--firms",
            "3",
            "--seed",
            "4",
        ])
        .args(["--json", "--run-file"])
        .arg(&run_file)
        .env_remove("TRANCHE_FEED_CORE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(core.status.code(), Some(0), "{}", support::text(&core));
    let report = json_of(&core);
    assert_eq!(report["shards"], 2, "{report}");
    for shard in 0..2 {
        let events = report["events"][shard].as_u64().unwrap();
        assert!((2_000..=2_001).contains(&events), "{report}");
    }
    assert_eq!(report["kept_up"], true, "{report}");
    let run: Value = serde_json::from_slice(&std::fs::read(&run_file).unwrap()).unwrap();
    assert_eq!(
        (run["shards"].clone(), run["targets"].clone()),
        (2.into(), serde_json::json!([base]))
    );

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
    assert!(stderr.contains("one server of 2 shard(s)"), "{stderr}");
    assert!(stderr.contains("the unfiltered on the replica"), "{stderr}");
}

#[test]
fn bench_feed_runs_the_pilots_shape_with_the_server_and_replica_as_child_processes() {
    let output = support::tranche()
        .args([
            "bench",
            "feed",
            "--pilot",
            "--duration",
            "2",
            "--rate",
            "2000",
        ])
        .args(["--durability", "never", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", support::text(&output));
    let all = json_of(&output);
    let shape = &all["shape"];
    assert_eq!(
        (
            &shape["shards"],
            &shape["filtered"],
            &shape["unfiltered"],
            &shape["firms"]
        ),
        (&2.into(), &100.into(), &2.into(), &100.into()),
        "{shape}"
    );
    assert_eq!(
        (&shape["replica"], &shape["transport"]),
        (&true.into(), &"tcp".into())
    );
    assert_eq!(shape["server"], "child processes");
    let summary = &all["summary"];
    assert_eq!(summary["checked"], true, "{summary}");
    assert_eq!(summary["caught_up"], true, "{summary}");
    assert_eq!(summary["omissions"], 0, "{summary}");
    assert_eq!(summary["reorderings"], 0, "{summary}");
    assert_eq!(summary["clients"], 102, "{summary}");
    assert_eq!(summary["shards"], 2, "{summary}");
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
    // Every client polled, and the summary's polls are the clients' own count.
    assert!(summary["polls"].as_u64().unwrap() >= 102, "{summary}");
    assert_eq!(summary["polls"], all["clients"]["polls"], "{all}");
    assert!(all["orders_held"].as_u64().unwrap() > 1_000, "{all}");
    // Each process measured apart: the server, the replica, this one's load.
    let processes = all["processes"].as_array().unwrap();
    let roles: Vec<&str> = processes
        .iter()
        .map(|p| p["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["server", "replica", "load"], "{all}");
    for process in processes {
        assert!(process["peak_rss_mb"].as_f64().unwrap() > 1.0, "{process}");
        assert!(process["cpu_s"].as_f64().unwrap() >= 0.0, "{process}");
    }
    let total = all["peak_rss_total_mb"].as_f64().unwrap();
    assert!(
        total > processes[0]["peak_rss_mb"].as_f64().unwrap(),
        "{all}"
    );
    // The host's steal over the run, so a noisy host is visible beside the figures.
    assert!(all["stolen_cpu_s"].as_f64().unwrap() >= 0.0, "{all}");
    // The verdict says what it was judged by.
    assert_eq!(all["criteria"]["max_p99_us"], 5_000, "{all}");
    assert_eq!(
        all["meets_criteria"],
        all["misses"].as_array().unwrap().is_empty(),
        "{all}"
    );
}

#[test]
fn bench_feed_at_several_rates_in_one_process_reports_each_and_the_highest_met() {
    let output = support::tranche()
        .args(["bench", "feed", "--in-process", "--rates", "1000,2000"])
        .args([
            "--duration",
            "1",
            "--shards",
            "2",
            "--replica",
            "--transport",
            "http",
        ])
        .args(["--filtered", "3", "--unfiltered", "1", "--firms", "3"])
        .args(["--durability", "never", "--json"])
        .output()
        .unwrap();
    // 0: a rate met the criteria; 3: none did (a debug build may be slow); never 2.
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}",
        support::text(&output)
    );
    let all = json_of(&output);
    let runs = all["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{all}");
    for (run, rate) in runs.iter().zip([1_000.0, 2_000.0]) {
        assert_eq!(run["rate"].as_f64(), Some(rate), "{run}");
        let summary = &run["summary"];
        assert_eq!(summary["checked"], true, "{run}");
        assert_eq!(summary["omissions"], 0, "{run}");
        assert_eq!(summary["reorderings"], 0, "{run}");
        assert_eq!(summary["shards"], 2, "{run}");
        assert_eq!(run["processes"][0]["role"], "all", "{run}");
        assert!(
            run["processes"][0]["peak_rss_mb"].as_f64().unwrap() > 1.0,
            "{run}"
        );
    }
    let met: Vec<f64> = runs
        .iter()
        .filter(|r| r["meets_criteria"] == true)
        .map(|r| r["rate"].as_f64().unwrap())
        .collect();
    assert_eq!(
        all["max_rate"].as_f64(),
        met.iter().copied().reduce(f64::max),
        "{all}"
    );
    assert_eq!(output.status.code() == Some(0), !met.is_empty());
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
        // Words, whatever the wrapping.
        let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains(says),
            "{cmd:?} should say {says:?}: {stdout}"
        );
    }
}
