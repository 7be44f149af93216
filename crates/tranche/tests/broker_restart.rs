//! The Redis broker restarts (SIGTERM, then started again on the same port with its
//! append-only file) in the middle of every long-running command: each says it lost
//! the broker, reconnects, says it is back, and finishes its work as if nothing had
//! happened. Each test waits for the command to report the outage before the server
//! comes back, so the restart is known to have hit it.

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::*;
use tranche_core::Client;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{EnqueueItem, EnqueueRequest, JobSpec, RunName};

const LOST: &str = "lost the broker";
const BACK: &str = "is back";

fn redis_dir(tmp: &std::path::Path) -> std::path::PathBuf {
    let dir = tmp.join("redis");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn eml_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "eml"))
        })
        .count()
    })
}

/// Wait until the outbox `dir` holds at least one message, while `cmd` works.
fn first_mail(dir: &std::path::Path, cmd: &mut Watched) {
    tranche_test_support::eventually("a first mail", Duration::from_secs(300), || {
        assert!(
            cmd.child.try_wait().unwrap().is_none(),
            "{} ended before mailing anyone:\n{}",
            cmd.name,
            cmd.stderr()
        );
        eml_count(dir) > 0
    });
}

async fn connect(url: &str, prefix: &str) -> Client {
    Client::new(
        RedisBackend::connect(RedisOptions {
            url: url.to_string(),
            prefix: prefix.to_string(),
            ..RedisOptions::default()
        })
        .await
        .expect("connect to redis"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_runs_its_hook_once_after_a_broker_restart() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RestartableRedis::start(&redis_dir(tmp.path()));
    let prefix = "{wait-restart}:";
    let run = RunName::new("night/1").unwrap();
    connect(&redis.url(), prefix)
        .await
        .enqueue(EnqueueRequest {
            run: run.clone(),
            items: (0..3)
                .map(|_| EnqueueItem::Job(JobSpec::new("k", "null").queue("q")))
                .collect(),
            on_done: None,
        })
        .await
        .unwrap();

    let marker = tmp.path().join("torn-down");
    let mut cmd = tranche();
    cmd.args(["--broker", &redis.url(), "--prefix", prefix])
        .args(["wait", "night/1", "--on-done"])
        .arg(format!(
            "echo \"$TRANCHE_SUCCEEDED\" >> {}",
            marker.display()
        ));
    let mut wait = Watched::spawn(cmd, tmp.path().join("wait.log"), "tranche wait");
    wait.wait_for("waiting for night/1", Duration::from_secs(30));

    redis.stop();
    wait.wait_for(LOST, Duration::from_secs(30));
    redis.start_again();
    wait.wait_for(BACK, Duration::from_secs(30));

    work_beside(connect(&redis.url(), prefix).await, "q", "night/1").await;
    let (status, _, all) = wait.finish(Duration::from_secs(60));
    assert!(status.success(), "{all}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "3\n",
        "the hook ran once, after the run finished: {all}"
    );
    assert_eq!(all.matches(LOST).count(), 1, "said once: {all}");
    assert!(all.contains("reconnecting for up to 60 s"), "{all}");
}

#[test]
fn a_night_on_redis_rides_out_a_broker_restart() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    generate(&input, 120);
    let traders = traders(&input);
    let mut redis = RestartableRedis::start(&redis_dir(tmp.path()));

    let mut cmd = tranche();
    cmd.args(["--broker", &redis.url(), "--prefix", "{notes-restart}:"])
        .args(run_args(&input, &out))
        .args(["--concurrency", "2"]);
    let mut night = Watched::spawn(cmd, tmp.path().join("night.log"), "tranche notes run");
    let outbox = out.join("outbox");
    first_mail(&outbox, &mut night);

    redis.stop();
    let mailed_before = eml_count(&outbox);
    night.wait_for(LOST, Duration::from_secs(60));
    redis.start_again();
    let (status, _, all) = night.finish(Duration::from_secs(600));
    assert!(status.success(), "{all}");
    assert!(
        mailed_before < traders.len(),
        "restarted too late to test anything: {all}"
    );
    assert!(all.contains(BACK), "{all}");
    let rows = report(&out);
    assert_eq!(rows.len(), traders.len());
    let not_mailed: Vec<_> = rows.iter().filter(|(_, r)| r[0] != "mailed").collect();
    assert!(not_mailed.is_empty(), "{not_mailed:?}");
    assert_eq!(eml_count(&outbox), traders.len(), "one message per client");
}

#[test]
fn a_control_node_and_a_worker_ride_out_a_broker_restart() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("control");
    let store = tmp.path().join("store");
    generate(&input, 60);
    let traders = traders(&input);
    let mut redis = RestartableRedis::start(&redis_dir(tmp.path()));
    let fleet = |cmd: &mut Command| {
        cmd.args(["--broker", &redis.url(), "--prefix", "{fleet-restart}:"])
            .env("TRANCHE_STORE", &store)
            .env("TRANCHE_OWNER_PASSWORD", "restart-owner-secret");
    };

    let mut cmd = tranche();
    fleet(&mut cmd);
    cmd.args(["worker", "--concurrency", "2", "--out"])
        .arg(tmp.path().join("worker"));
    let mut worker = Watched::spawn(cmd, tmp.path().join("worker.log"), "tranche worker");
    let mut cmd = tranche();
    fleet(&mut cmd);
    cmd.args(run_args(&input, &out)).arg("--no-work");
    let mut control = Watched::spawn(cmd, tmp.path().join("control.log"), "notes run --no-work");
    let outbox = tmp.path().join("worker/outbox");
    first_mail(&outbox, &mut worker);

    redis.stop();
    let mailed_before = eml_count(&outbox);
    control.wait_for(LOST, Duration::from_secs(60));
    worker.wait_for(LOST, Duration::from_secs(60));
    redis.start_again();
    let (status, _, all) = control.finish(Duration::from_secs(600));
    assert!(status.success(), "{all}");
    assert!(
        mailed_before < traders.len(),
        "restarted too late to test anything: {all}"
    );
    let rows = report(&out);
    let not_mailed: Vec<_> = rows.iter().filter(|(_, r)| r[0] != "mailed").collect();
    assert!(not_mailed.is_empty(), "{not_mailed:?}");
    assert_eq!(rows.len(), traders.len());
    assert_eq!(eml_count(&outbox), traders.len(), "one message per client");

    worker.wait_for(BACK, Duration::from_secs(30));
    let _ = Command::new("kill")
        .args(["-TERM", &worker.child.id().to_string()])
        .status();
    let (status, _, all) = worker.finish(Duration::from_secs(60));
    assert!(status.success(), "the worker stops cleanly: {all}");
}

#[test]
fn bench_engine_rides_out_broker_restarts_while_enqueueing_and_working() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RestartableRedis::start(&redis_dir(tmp.path()));
    let mut cmd = tranche();
    // Small enqueue calls, one at a time, and few jobs in flight: each phase lasts a
    // few seconds, so each says its progress (once a second) before it ends, however
    // fast the host (with the defaults a quick host processed all before a first line).
    cmd.args([
        "--broker",
        &redis.url(),
        "bench",
        "engine",
        "--jobs",
        "60000",
    ])
    .args(["--enqueue-batch", "100", "--enqueuers", "1", "--json"])
    .args(["--concurrency", "16", "--batch", "16"]);
    let mut bench = Watched::spawn(cmd, tmp.path().join("bench.log"), "tranche bench engine");

    for (phase, n) in [("enqueued:", 1), ("processed:", 2)] {
        bench.wait_for(phase, Duration::from_secs(300));
        redis.stop();
        bench.wait_for_nth(LOST, n, Duration::from_secs(60));
        redis.start_again();
        bench.wait_for_nth(BACK, n, Duration::from_secs(60));
    }
    let (status, stdout, all) = bench.finish(Duration::from_secs(600));
    assert!(status.success(), "{all}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("a JSON report");
    assert_eq!(report["jobs"], 60000, "{all}");
}

#[test]
fn a_worker_stopped_during_an_outage_does_not_wait_it_out() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RestartableRedis::start(&redis_dir(tmp.path()));
    let mut cmd = tranche();
    cmd.args(["--broker", &redis.url(), "--prefix", "{stop-restart}:"])
        .args(["worker", "--queues", "process", "--out"])
        .arg(tmp.path().join("worker"));
    let mut worker = Watched::spawn(cmd, tmp.path().join("worker.log"), "tranche worker");
    worker.wait_for("tranche worker: queues process", Duration::from_secs(30));
    redis.stop();
    worker.wait_for(LOST, Duration::from_secs(30));

    let _ = Command::new("kill")
        .args(["-TERM", &worker.child.id().to_string()])
        .status();
    // Well under the 60 s a call would otherwise keep trying for.
    let (status, _, all) = worker.finish(Duration::from_secs(20));
    assert!(status.success(), "{all}");
}
