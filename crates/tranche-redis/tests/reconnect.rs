//! `tranche_core::Reconnecting` over a real Redis that goes away and comes back: calls
//! made during the outage wait and then succeed, an enqueue refused while the server
//! is down lands exactly once, the outage is reported once when it starts and once
//! when it ends, and one that outlasts the limit is given up on.

use crate::server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tranche_backend::Backend;
use tranche_core::{Outage, Reconnecting};
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, JobSpec, RunName};

type Reports = Arc<Mutex<Vec<String>>>;

async fn reconnecting(url: String, retry_for: Duration) -> (Arc<dyn Backend>, Reports) {
    let redis = RedisBackend::connect(RedisOptions {
        url,
        prefix: server::fresh_prefix(),
        poll_interval: Duration::from_millis(100),
        ..RedisOptions::default()
    })
    .await
    .expect("connect");
    let reports = Reports::default();
    let r = reports.clone();
    let backend = Reconnecting::new(Arc::new(redis), retry_for, move |o: Outage<'_>| {
        let line = match o {
            Outage::Lost { .. } => "lost",
            Outage::Back { .. } => "back",
            Outage::GaveUp { .. } => "gave up",
        };
        r.lock().unwrap().push(line.to_string());
    });
    (Arc::new(backend), reports)
}

fn one_job(run: &RunName) -> EnqueueRequest {
    EnqueueRequest {
        run: run.clone(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", "null"))],
        on_done: None,
    }
}

/// Wait (at most 30 s) until `reports` holds `n` lines.
async fn reported(reports: &Reports, n: usize) -> Vec<String> {
    tranche_test_support::poll_until(&format!("{n} reports"), Duration::from_secs(30), || {
        let seen = reports.lock().unwrap().clone();
        if seen.len() >= n {
            Ok(seen)
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_during_an_outage_wait_for_the_server_and_succeed() {
    if !server::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let redis = server::Server::start(dir.path(), true);
    let (backend, reports) = reconnecting(redis.url(), Duration::from_secs(60)).await;
    let run = RunName::new("night/1").unwrap();
    backend.enqueue(one_job(&run)).await.expect("enqueue");

    redis.kill();
    let read = tokio::spawn({
        let (b, run) = (backend.clone(), run.clone());
        async move { b.run_progress(&run).await }
    });
    assert_eq!(reported(&reports, 1).await, ["lost"]);
    // The connection is known lost now: this enqueue is refused, not cut, so it is
    // tried again although it has no unique key.
    let enqueue = tokio::spawn({
        let (b, run) = (backend.clone(), run.clone());
        async move { b.enqueue(one_job(&run)).await }
    });
    redis.launch();

    let p = read.await.unwrap().expect("the read waited for the server");
    assert!(p.is_some_and(|p| p.total >= 1));
    enqueue
        .await
        .unwrap()
        .expect("the enqueue waited for the server");
    let p = backend.run_progress(&run).await.unwrap().unwrap();
    assert_eq!(p.total, 2, "the refused enqueue landed exactly once");
    assert_eq!(*reports.lock().unwrap(), ["lost", "back"]);
    redis.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_limit_is_given_up_on_then_recovered_from() {
    if !server::available() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let redis = server::Server::start(dir.path(), true);
    let (backend, reports) = reconnecting(redis.url(), Duration::from_secs(1)).await;
    let run = RunName::new("night/2").unwrap();
    backend.enqueue(one_job(&run)).await.expect("enqueue");

    redis.kill();
    let started = Instant::now();
    let err = backend
        .run_progress(&run)
        .await
        .expect_err("the server stays down");
    assert!(
        matches!(err, BackendError::Unavailable { .. }),
        "an outage, not another failure: {err}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1), "tried for 1 s");
    assert_eq!(*reports.lock().unwrap(), ["lost", "gave up"]);

    redis.launch();
    let p = backend.run_progress(&run).await.expect("back").unwrap();
    assert_eq!(p.total, 1);
    assert_eq!(*reports.lock().unwrap(), ["lost", "gave up", "back"]);
    redis.kill();
}
