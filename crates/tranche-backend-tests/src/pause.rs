//! Pausing a queue: reserves lease nothing from it while other queues still serve,
//! nothing in flight is lost (running jobs finish and report, enqueues wait, expired
//! leases are recovered), and a resume makes its jobs runnable at once, waking the
//! reserves that wait on it.

use std::time::{Duration, Instant};

use tranche_types::{BackendError, CompletionAck, EnqueueItem, JobSpec, ReserveRequest};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    a_paused_queue_serves_nothing_while_others_do(make).await;
    pause_and_resume_are_idempotent(make).await;
    work_in_flight_at_the_pause_is_kept(make).await;
    resume_wakes_a_waiting_reserve(make).await;
}

async fn a_paused_queue_serves_nothing_while_others_do(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let items: Vec<_> = ["pdf", "pdf", "mail"]
        .iter()
        .enumerate()
        .map(|(i, q)| EnqueueItem::Job(job("x", &i.to_string()).queue(*q)))
        .collect();
    enqueue(&*b, "pause/serve", items).await;
    assert!(b.pause_queue("pdf").await.unwrap(), "it was not paused");
    assert_eq!(b.paused_queues().await.unwrap(), ["pdf"]);
    assert!(
        take(&*b, "pdf", 10).await.is_empty(),
        "a paused queue leases nothing"
    );
    assert_eq!(take(&*b, "mail", 10).await.len(), 1, "other queues serve");

    let added = enqueue(
        &*b,
        "pause/serve",
        vec![EnqueueItem::Job(job("x", "late").queue("pdf"))],
    )
    .await;
    assert_eq!(added.len(), 1, "an enqueue into a paused queue is accepted");
    assert_eq!(b.queue_depth("pdf", 100).await.unwrap(), 3, "and waits");
    let depths = b.queue_depths().await.unwrap();
    assert!(
        depths.iter().any(|d| d.queue == "pdf" && d.available == 3),
        "the paused queue's jobs are still listed: {depths:?}"
    );
    assert!(take(&*b, "pdf", 10).await.is_empty());

    assert!(b.resume_queue("pdf").await.unwrap(), "it was paused");
    assert!(b.paused_queues().await.unwrap().is_empty());
    let got = take(&*b, "pdf", 10).await;
    assert_eq!(got.len(), 3, "every waiting job is runnable again at once");
    assert!(got.iter().all(|j| j.attempt == 1), "no attempt was used");
}

async fn pause_and_resume_are_idempotent(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert!(
        b.pause_queue("empty").await.unwrap(),
        "a queue with no jobs can be paused"
    );
    assert!(
        !b.pause_queue("empty").await.unwrap(),
        "a repeat changes nothing"
    );
    assert!(b.pause_queue("b-queue").await.unwrap());
    assert_eq!(
        b.paused_queues().await.unwrap(),
        ["b-queue", "empty"],
        "listed once each, sorted"
    );
    // Paused before its first job: that work is held from the start.
    enqueue(
        &*b,
        "pause/early",
        vec![EnqueueItem::Job(job("x", "1").queue("empty"))],
    )
    .await;
    assert!(take(&*b, "empty", 1).await.is_empty());

    assert!(b.resume_queue("empty").await.unwrap());
    assert!(
        !b.resume_queue("empty").await.unwrap(),
        "a repeat changes nothing"
    );
    assert!(
        !b.resume_queue("never-paused").await.unwrap(),
        "resuming a queue that is not paused changes nothing"
    );
    assert_eq!(b.paused_queues().await.unwrap(), ["b-queue"]);
    assert_eq!(take(&*b, "empty", 1).await.len(), 1);

    for bad in [String::new(), "q".repeat(JobSpec::MAX_QUEUE_LEN + 1)] {
        for (what, got) in [
            ("pause", b.pause_queue(&bad).await),
            ("resume", b.resume_queue(&bad).await),
        ] {
            match got {
                Err(BackendError::Invalid { field, .. }) => assert_eq!(field, "queue"),
                other => panic!(
                    "{what} of a {}-byte queue name: expected Invalid, got {other:?}",
                    bad.len()
                ),
            }
        }
    }
    assert_eq!(b.paused_queues().await.unwrap(), ["b-queue"]);
}

async fn work_in_flight_at_the_pause_is_kept(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    let items: Vec<_> = (0..4)
        .map(|i| EnqueueItem::Job(job("x", &i.to_string()).queue("q")))
        .collect();
    let ids: Vec<_> = enqueue(&*b, "pause/flight", items)
        .await
        .into_iter()
        .flat_map(|e| e.ids)
        .collect();
    let running = take(&*b, "q", 3).await;
    assert_eq!(running.len(), 3);
    assert!(b.pause_queue("q").await.unwrap());

    // A job running at the pause keeps its lease and completes normally.
    assert!(
        b.heartbeat(vec![running[0].lease()], LEASE)
            .await
            .unwrap()
            .is_empty(),
        "a pause takes no lease away"
    );
    assert_eq!(
        resolve(&*b, running[0].lease(), ok("\"done\"")).await,
        CompletionAck::Applied
    );
    // One is handed back: it waits, like the job never taken.
    assert_eq!(b.release(vec![running[1].lease()]).await.unwrap(), 1);
    // One's worker dies: its lease is recovered while paused, and its job waits too.
    clock.advance(LEASE + Duration::from_secs(1));
    assert!(take(&*b, "q", 10).await.is_empty());
    let p = progress(&*b, "pause/flight").await;
    assert_eq!(
        counts(&p),
        (0, 3, 0, 1, 0, 0),
        "one done, three waiting (never taken, released, lease expired)"
    );
    assert_eq!(
        resolve(&*b, running[2].lease(), ok("null")).await,
        CompletionAck::Stale,
        "the expired attempt no longer holds its job"
    );

    assert!(b.resume_queue("q").await.unwrap());
    let mut got: Vec<_> = take(&*b, "q", 10)
        .await
        .into_iter()
        .map(|j| (j.id, j.attempt))
        .collect();
    got.sort();
    let never_taken = *ids
        .iter()
        .find(|id| !running.iter().any(|r| r.id == **id))
        .expect("one job was never taken");
    let mut expected = vec![(never_taken, 1), (running[1].id, 1), (running[2].id, 2)];
    expected.sort();
    assert_eq!(
        got, expected,
        "the released job keeps its attempt, the expired one used one"
    );
}

/// Reserve from `queue`, waiting up to 30 s, on its own task.
fn waiting_reserve(
    b: &Arc<dyn tranche_backend::Backend>,
    queue: &str,
) -> tokio::task::JoinHandle<usize> {
    let (b, queue) = (b.clone(), queue.to_string());
    tokio::spawn(async move {
        b.reserve(ReserveRequest {
            queue,
            max: 10,
            lease: LEASE,
            wait: Duration::from_secs(30),
        })
        .await
        .expect("reserve")
        .len()
    })
}

/// A reserve waiting on a paused queue gets nothing, however long it waits, and gets
/// its jobs within seconds of the resume. With a backend whose idle reserves look
/// again only every 30 s or more, this shows the resume's wake-up (in this process, or
/// through the backend's channel) ended the wait, not a poll: use it so from a
/// backend's tests, as well as through [`all`].
pub async fn resume_wakes_a_waiting_reserve(make: &dyn MakeBackend) {
    let b = real(make).await;
    assert!(b.pause_queue("held").await.unwrap());
    enqueue(
        &*b,
        "pause/wake",
        vec![EnqueueItem::Job(job("x", "1").queue("held"))],
    )
    .await;
    let mut waiter = waiting_reserve(&b, "held");
    // The enqueue woke waiters of the queue; the paused one must have gone back to
    // waiting rather than leasing.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut waiter)
            .await
            .is_err(),
        "a reserve on a paused queue returned while the queue was paused"
    );
    let resumed = Instant::now();
    assert!(b.resume_queue("held").await.unwrap());
    let got = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiting reserve returned after the resume")
        .expect("the waiter task");
    assert_eq!(got, 1, "the waiting reserve got the job");
    let took = resumed.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "the resume woke the waiter after {took:?}"
    );
}

/// The pause lives in the store, not in a process: `first` and `second` are two
/// handles on one store (as two processes of a fleet open it). A pause through one
/// holds for reserves through the other, and a resume through one lets the other
/// serve.
pub async fn holds_across_handles(
    first: Arc<dyn tranche_backend::Backend>,
    second: Arc<dyn tranche_backend::Backend>,
) {
    enqueue(
        &*first,
        "pause/shared",
        vec![EnqueueItem::Job(job("x", "1").queue("fleet"))],
    )
    .await;
    assert!(first.pause_queue("fleet").await.unwrap());
    assert_eq!(second.paused_queues().await.unwrap(), ["fleet"]);
    assert!(
        !second.pause_queue("fleet").await.unwrap(),
        "already paused, by the other handle"
    );
    assert!(
        take(&*second, "fleet", 10).await.is_empty(),
        "the other handle's reserves lease nothing"
    );
    assert!(second.resume_queue("fleet").await.unwrap());
    assert!(first.paused_queues().await.unwrap().is_empty());
    assert_eq!(take(&*first, "fleet", 10).await.len(), 1);
}
