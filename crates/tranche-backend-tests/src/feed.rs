//! The change feed: every state change, in commit order, paged by a cursor that never
//! skips or reorders, with waiting reads.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tranche_backend::Backend;
use tranche_types::{CancelTarget, EnqueueItem, JobEvent, JobId, JobState, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    every_change_is_recorded_in_order(make).await;
    paging_never_skips(make).await;
    steering_changes_are_recorded(make).await;
    waiting_read_times_out_then_wakes(make).await;
    no_gaps_under_concurrent_writes(make).await;
}

async fn all_events(b: &dyn Backend, after: u64) -> Vec<JobEvent> {
    b.events(after, 100_000, Duration::ZERO)
        .await
        .expect("read events")
}

/// Each job's states in the order the feed reports them.
fn histories(events: &[JobEvent]) -> HashMap<JobId, Vec<JobState>> {
    let mut h: HashMap<JobId, Vec<JobState>> = HashMap::new();
    for e in events {
        h.entry(e.job).or_default().push(e.state);
    }
    h
}

fn assert_increasing(events: &[JobEvent]) {
    assert!(
        events.windows(2).all(|w| w[0].seq < w[1].seq),
        "seqs must strictly increase"
    );
}

async fn every_change_is_recorded_in_order(make: &dyn MakeBackend) {
    use JobState::*;
    let (b, clock) = manual(make).await;
    assert!(all_events(&*b, 0).await.is_empty());
    assert_eq!(b.last_event().await.unwrap(), 0, "no event yet");
    let out = enqueue(
        &*b,
        "feed/order",
        vec![
            EnqueueItem::Chain(vec![job("a", "1"), job("b", "2")]),
            EnqueueItem::Job(job("c", "3").max_attempts(1)),
        ],
    )
    .await;
    let (step1, step2, single) = (out[0].ids[0], out[0].ids[1], out[1].ids[0]);
    let js = take(&*b, "default", 10).await;
    assert_eq!(js.len(), 2);
    for j in &js {
        let res = if j.id == step1 {
            ok("\"r\"")
        } else {
            Resolution::Failed {
                error: "boom".into(),
            }
        };
        resolve(&*b, j.lease(), res).await;
    }
    let events = all_events(&*b, 0).await;
    assert_increasing(&events);
    let h = histories(&events);
    assert_eq!(h[&step1], [Available, Running, Succeeded]);
    assert_eq!(h[&step2], [Pending, Available]);
    assert_eq!(h[&single], [Available, Running, Failed]);
    assert_eq!(events.len(), 8, "one event per change: {events:?}");
    assert!(events.iter().all(|e| e.run.as_str() == "feed/order"));
    assert!(
        events.iter().all(|e| e.at == clock.now()),
        "stamped at commit"
    );
    let last = events.last().unwrap().seq;
    assert!(
        all_events(&*b, last).await.is_empty(),
        "nothing after the end"
    );
}

async fn paging_never_skips(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let items: Vec<_> = (0..50)
        .map(|i| EnqueueItem::Job(job("x", &i.to_string())))
        .collect();
    enqueue(&*b, "feed/pages", items).await;
    let js = take(&*b, "default", 20).await;
    for j in js.iter().rev() {
        resolve(&*b, j.lease(), ok("null")).await;
    }
    let whole = all_events(&*b, 0).await;
    assert_eq!(whole.len(), 90);
    for page in [1, 7, 64] {
        let mut paged = Vec::new();
        let mut cursor = 0;
        loop {
            let got = b.events(cursor, page, Duration::ZERO).await.unwrap();
            assert!(got.len() <= page);
            let Some(last) = got.last() else { break };
            cursor = last.seq;
            paged.extend(got);
        }
        assert_eq!(paged, whole, "pages of {page} give the same feed");
    }
}

async fn steering_changes_are_recorded(make: &dyn MakeBackend) {
    use JobState::*;
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "feed/steer",
        vec![
            EnqueueItem::Chain(vec![job("a", "1").max_attempts(1), job("b", "2")]),
            EnqueueItem::Job(job("c", "3")),
            EnqueueItem::Job(job("d", "4")),
        ],
    )
    .await;
    let (step1, step2, c, d) = (out[0].ids[0], out[0].ids[1], out[1].ids[0], out[2].ids[0]);
    let first = take(&*b, "default", 1).await.remove(0);
    assert_eq!(first.id, step1);
    resolve(
        &*b,
        first.lease(),
        Resolution::Failed {
            error: "bad".into(),
        },
    )
    .await;
    b.cancel(CancelTarget::Job(c), "operator").await.unwrap();
    let before = all_events(&*b, 0).await.last().unwrap().seq;
    assert_eq!(b.retry_run(&run("feed/steer")).await.unwrap(), 2);
    b.cancel(CancelTarget::Run(run("feed/steer")), "stop")
        .await
        .unwrap();
    let h = histories(&all_events(&*b, 0).await);
    assert_eq!(
        h[&step1],
        [Available, Running, Failed, Available, Cancelled]
    );
    assert_eq!(h[&step2], [Pending, Cancelled, Pending, Cancelled]);
    assert_eq!(h[&c], [Available, Cancelled]);
    assert_eq!(h[&d], [Available, Cancelled]);
    let after = all_events(&*b, before).await;
    assert_eq!(after.len(), 5, "retry revived 2, cancel ended 3: {after:?}");
}

async fn waiting_read_times_out_then_wakes(make: &dyn MakeBackend) {
    let b = real(make).await;
    let start = Instant::now();
    let got = b.events(0, 10, Duration::from_millis(300)).await.unwrap();
    assert!(got.is_empty());
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(300),
        "returned early after {waited:?}"
    );
    let waiter = {
        let b = b.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let got = b.events(0, 10, Duration::from_secs(30)).await.unwrap();
            (got.len(), start.elapsed())
        })
    };
    tokio::task::yield_now().await;
    enqueue(&*b, "feed/wake", vec![EnqueueItem::Job(job("x", "1"))]).await;
    let (n, waited) = waiter.await.unwrap();
    assert_eq!(n, 1);
    assert!(waited < Duration::from_secs(10), "woke after {waited:?}");
}

/// Writers enqueue, reserve and complete concurrently while a reader tails the feed;
/// what the tail saw must be exactly the final feed, and every job's history complete.
async fn no_gaps_under_concurrent_writes(make: &dyn MakeBackend) {
    use JobState::*;
    let b = real(make).await;
    const WRITERS: usize = 4;
    const BATCHES: usize = 20;
    const PER_BATCH: usize = 25;
    let total = WRITERS * BATCHES * PER_BATCH;
    // Read here, beside the spawned writers, until every job's three events are in.
    let tail = async {
        let mut seen = Vec::new();
        let mut cursor = 0;
        tranche_test_support::poll_until_async(
            "every job's three events read",
            Duration::from_secs(60),
            async || {
                let got = b
                    .events(cursor, 97, Duration::from_millis(200))
                    .await
                    .unwrap();
                if let Some(last) = got.last() {
                    cursor = last.seq;
                }
                seen.extend(got);
                seen.len() >= total * 3
            },
        )
        .await;
        seen
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let b = b.clone();
        writers.push(tokio::spawn(async move {
            let queue = format!("feed-q{w}");
            for i in 0..BATCHES {
                let items = (0..PER_BATCH)
                    .map(|k| EnqueueItem::Job(job("x", &format!("{i}.{k}")).queue(&queue)))
                    .collect();
                enqueue(&*b, &format!("feed/concurrent-{w}"), items).await;
                let js = take(&*b, &queue, PER_BATCH).await;
                let done = js
                    .iter()
                    .map(|j| tranche_types::Completion {
                        lease: j.lease(),
                        resolution: ok("null"),
                    })
                    .collect();
                b.complete(done).await.unwrap();
            }
        }));
    }
    let (seen, ()) = tokio::join!(tail, async {
        for w in writers {
            w.await.unwrap();
        }
    });
    let whole = all_events(&*b, 0).await;
    assert_eq!(whole.len(), total * 3);
    assert_increasing(&seen);
    assert_eq!(seen, whole, "the tail saw every event, in order");
    let h = histories(&whole);
    assert_eq!(h.len(), total);
    assert!(h.values().all(|s| s == &[Available, Running, Succeeded]));
}
