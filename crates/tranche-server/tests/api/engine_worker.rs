//! Jobs worked by the engine's own worker — not through this server's HTTP API — are
//! in `/metrics` and `/v1/queues`: the backend records every attempt, whoever works it.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use tranche_core::{Engine, JobContext, Registry, TaskOptions, WorkerConfig};
use tranche_types::{Outcome, RunName};

use crate::live::start;

/// The value of one exact series in the text, None when absent.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_worked_beside_the_api_are_in_metrics_and_queues() {
    let s = start().await;
    let job = |kind: &str, attempts: u32| json!({"job": {"kind": kind, "queue": "ew", "max_attempts": attempts}});
    let mut items: Vec<_> = (0..40).map(|_| job("ok", 3)).collect();
    items.extend([job("flaky", 3), job("flaky", 3), job("bad", 1)]);
    s.post_ok(
        "/v1/batches",
        &json!({"run": "engine/1", "items": items}),
        201,
    )
    .await;

    let mut reg = Registry::new();
    reg.register("ok", TaskOptions::default(), |_: JobContext, _: ()| async {
        Outcome::Complete(())
    });
    reg.register(
        "flaky",
        TaskOptions::default(),
        |ctx: JobContext, _: ()| async move {
            if ctx.attempt() == 1 {
                Outcome::retry_after("not yet", Duration::from_millis(1))
            } else {
                Outcome::Complete(())
            }
        },
    );
    reg.register(
        "bad",
        TaskOptions::default(),
        |_: JobContext, _: ()| async { Outcome::<()>::discard("bad input") },
    );
    let config = WorkerConfig {
        reserve_wait: Duration::from_millis(100),
        ..WorkerConfig::default()
    }
    .queues(["ew"], 16);
    let worker = Engine::new(s.backend.clone(), reg).worker(config).unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let stop = stop.clone();
        async move { worker.run(stop).await }
    });
    let p = s
        .backend
        .clone()
        .wait_finished(
            &RunName::new("engine/1").unwrap(),
            Duration::from_millis(20),
            Some(Duration::from_secs(60)),
            |_| {},
        )
        .await
        .unwrap();
    stop.cancel();
    running.await.unwrap().unwrap();
    assert_eq!((p.succeeded, p.failed), (42, 1));

    // 40 + 1 attempts, and two for each flaky job.
    let text = s.get("/metrics").await.text().await.unwrap();
    for (series, want) in [
        ("tranche_jobs_started_total{queue=\"ew\"}", 45.0),
        (
            "tranche_jobs_finished_total{queue=\"ew\",outcome=\"succeeded\"}",
            42.0,
        ),
        (
            "tranche_jobs_finished_total{queue=\"ew\",outcome=\"failed\"}",
            1.0,
        ),
        ("tranche_job_retries_total{queue=\"ew\"}", 2.0),
        ("tranche_lease_expiries_total{queue=\"ew\"}", 0.0),
        ("tranche_job_queue_wait_seconds_count{queue=\"ew\"}", 45.0),
        (
            "tranche_job_queue_wait_seconds_bucket{queue=\"ew\",le=\"+Inf\"}",
            45.0,
        ),
        ("tranche_job_run_seconds_count{queue=\"ew\"}", 45.0),
        (
            "tranche_job_run_seconds_bucket{queue=\"ew\",le=\"+Inf\"}",
            45.0,
        ),
    ] {
        assert_eq!(value(&text, series), Some(want), "{series} in:\n{text}");
    }
    assert!(
        value(&text, "tranche_job_run_seconds_sum{queue=\"ew\"}").is_some_and(|s| s >= 0.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "tranche_http_jobs_polled_total{queue=\"ew\"}"),
        None,
        "none of them went through the HTTP API"
    );

    let queues = s.get_ok("/v1/queues").await;
    let ew = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "ew")
        .unwrap_or_else(|| panic!("no queue ew in {queues}"));
    assert_eq!(
        ew,
        &json!({"queue": "ew", "available": 0, "running": 0, "started": 45,
                "succeeded": 42, "failed": 1, "retried": 2, "expired": 0}),
        "a drained queue is still listed, with its statistics"
    );
}
