//! Reserve and leases: batches in queue order, waiting without polling, lease expiry
//! and fencing of late completions, heartbeats, releases.

use std::time::{Duration, Instant};

use tranche_types::{CompletionAck, EnqueueItem, JobState, LeaseRef, ReserveRequest};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    batches_follow_priority_then_fifo(make).await;
    empty_queue_waits_then_returns_nothing(make).await;
    waiting_reserve_wakes_on_enqueue(make).await;
    expired_lease_is_recovered_and_late_completion_refused(make).await;
    heartbeat_keeps_the_lease(make).await;
    release_does_not_count_the_attempt(make).await;
    expired_lease_on_last_attempt_fails(make).await;
}

async fn batches_follow_priority_then_fifo(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let mut items: Vec<_> = (0..5)
        .map(|i| EnqueueItem::Job(job("a", &i.to_string())))
        .collect();
    items.push(EnqueueItem::Job(job("urgent", "9").priority(-1)));
    items.push(EnqueueItem::Job(job("other", "0").queue("other")));
    enqueue(&*b, "res/order", items).await;
    let got = take(&*b, "default", 3).await;
    let args: Vec<_> = got.iter().map(|j| j.args.as_str()).collect();
    assert_eq!(
        args,
        ["9", "0", "1"],
        "lower priority first, then enqueue order"
    );
    assert!(got.iter().all(|j| j.attempt == 1 && j.queue == "default"));
    assert_eq!(got[0].run.as_str(), "res/order");
    let rest = take(&*b, "default", 100).await;
    assert_eq!(rest.len(), 3, "only what is left of the queue");
    assert_eq!(
        take(&*b, "other", 100).await.len(),
        1,
        "queues are separate"
    );
    assert_eq!(
        counts(&progress(&*b, "res/order").await),
        (0, 0, 7, 0, 0, 0)
    );
}

async fn empty_queue_waits_then_returns_nothing(make: &dyn MakeBackend) {
    let b = real(make).await;
    let start = Instant::now();
    let got = b
        .reserve(ReserveRequest {
            queue: "nothing-here".into(),
            max: 10,
            lease: LEASE,
            wait: Duration::from_millis(300),
        })
        .await
        .unwrap();
    assert!(got.is_empty());
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "returned early after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "waited far too long: {waited:?}"
    );
}

async fn waiting_reserve_wakes_on_enqueue(make: &dyn MakeBackend) {
    let b = real(make).await;
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let got = b
                .reserve(ReserveRequest {
                    queue: "wake".into(),
                    max: 10,
                    lease: LEASE,
                    wait: Duration::from_secs(30),
                })
                .await
                .unwrap();
            (got.len(), start.elapsed())
        })
    };
    // The waiter may or may not have started waiting yet; either way it must get the
    // job long before its 30 s are over.
    tokio::task::yield_now().await;
    enqueue(
        &*b,
        "res/wake",
        vec![EnqueueItem::Job(job("noop", "1").queue("wake"))],
    )
    .await;
    let (n, waited) = waiter.await.unwrap();
    assert_eq!(n, 1);
    assert!(waited < Duration::from_secs(10), "woke after {waited:?}");
}

async fn expired_lease_is_recovered_and_late_completion_refused(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(&*b, "res/lease", vec![EnqueueItem::Job(job("noop", "1"))]).await;
    let first = take(&*b, "default", 1).await.remove(0);
    assert!(
        take(&*b, "default", 1).await.is_empty(),
        "a leased job is not handed out twice"
    );
    clock.advance(LEASE + Duration::from_secs(1));
    let second = take(&*b, "default", 1).await.remove(0);
    assert_eq!(second.id, first.id);
    assert_eq!(second.attempt, 2, "the lost attempt counts");
    assert_eq!(
        resolve(&*b, first.lease(), ok("\"late\"")).await,
        CompletionAck::Stale
    );
    assert_eq!(
        resolve(&*b, second.lease(), ok("\"fresh\"")).await,
        CompletionAck::Applied
    );
    let rec = b.job(first.id).await.unwrap().unwrap();
    assert_eq!(rec.state, JobState::Succeeded);
    assert_eq!(
        rec.result.as_deref(),
        Some("\"fresh\""),
        "the late completion changed nothing"
    );
    assert!(
        rec.errors
            .iter()
            .any(|e| e.attempt == 1 && e.error.contains("lease expired")),
        "{:?}",
        rec.errors
    );
}

async fn heartbeat_keeps_the_lease(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "res/heartbeat",
        vec![EnqueueItem::Job(job("noop", "1"))],
    )
    .await;
    let j = take(&*b, "default", 1).await.remove(0);
    clock.advance(Duration::from_secs(6));
    let lost = b.heartbeat(vec![j.lease()], LEASE).await.unwrap();
    assert!(lost.is_empty());
    clock.advance(Duration::from_secs(6));
    assert!(
        take(&*b, "default", 1).await.is_empty(),
        "the extended lease still holds"
    );
    let stranger = LeaseRef {
        job: j.id,
        attempt: 7,
    };
    assert_eq!(
        b.heartbeat(vec![stranger], LEASE).await.unwrap(),
        vec![stranger]
    );
}

async fn release_does_not_count_the_attempt(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    enqueue(&*b, "res/release", vec![EnqueueItem::Job(job("noop", "1"))]).await;
    let j = take(&*b, "default", 1).await.remove(0);
    assert_eq!(b.release(vec![j.lease()]).await.unwrap(), 1);
    assert_eq!(
        b.release(vec![j.lease()]).await.unwrap(),
        0,
        "a lease is released once"
    );
    let again = take(&*b, "default", 1).await.remove(0);
    assert_eq!((again.id, again.attempt), (j.id, 1));
}

async fn expired_lease_on_last_attempt_fails(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "res/last",
        vec![EnqueueItem::Job(job("noop", "1").max_attempts(1))],
    )
    .await;
    let j = take(&*b, "default", 1).await.remove(0);
    clock.advance(LEASE * 2);
    assert!(take(&*b, "default", 1).await.is_empty());
    let rec = b.job(j.id).await.unwrap().unwrap();
    assert_eq!(rec.state, JobState::Failed);
    assert!(rec.error.unwrap_or_default().contains("lease expired"));
    assert_eq!(counts(&progress(&*b, "res/last").await), (0, 0, 0, 0, 1, 0));
}
