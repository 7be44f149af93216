//! Per-queue statistics: attempts started, outcomes, retries and lease expiries, and
//! the bucket every wait (runnable → reserved) and run (reserved → result applied)
//! lands in, on the manual clock so each time is known exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use tranche_types::{
    CompletionAck, EnqueueItem, Histogram, JobId, JobSpec, QueueStats, ReservedJob, Resolution,
    LATENCY_BUCKETS_MS,
};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    every_attempt_is_counted_per_queue(make).await;
}

/// A histogram from (bucket index, count) pairs and the sum in milliseconds.
fn histogram(buckets: &[(usize, u64)], sum_ms: f64) -> Histogram {
    let mut h = Histogram::default();
    for &(i, n) in buckets {
        h.buckets[i] = n;
        h.count += n;
    }
    h.sum_ms = sum_ms;
    h
}

fn by_id(jobs: Vec<ReservedJob>) -> BTreeMap<JobId, ReservedJob> {
    jobs.into_iter().map(|j| (j.id, j)).collect()
}

/// Fail the attempt, to be retried at once if it has attempts left.
fn retry(j: &ReservedJob, clock: &ManualClock) -> Completion {
    Completion {
        lease: j.lease(),
        resolution: Resolution::Retry {
            error: "try again".into(),
            at: clock.now(),
        },
    }
}

async fn every_attempt_is_counted_per_queue(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    assert!(b.queue_stats().await.unwrap().is_empty());
    let t0 = clock.now();
    let ms = Duration::from_millis;
    let spec = |kind: &str, queue: &str, attempts: u32| -> JobSpec {
        job(kind, "null").queue(queue).max_attempts(attempts)
    };
    let items = vec![
        EnqueueItem::Job(spec("ok", "sa", 3)),
        EnqueueItem::Job(spec("retried", "sa", 3)),
        EnqueueItem::Job(spec("failed", "sa", 3)),
        EnqueueItem::Job(spec("last-attempt", "sa", 1)),
        EnqueueItem::Job(spec("ok", "sb", 3)),
        EnqueueItem::Job(spec("expires", "sb", 3)),
        EnqueueItem::Job(spec("expires-last", "sb", 1)),
        EnqueueItem::Job(spec("scheduled", "sb", 3).not_before(t0.plus(ms(500)))),
        EnqueueItem::Job(spec("never-reserved", "sc", 3)),
    ];
    let ids: Vec<JobId> = enqueue(&*b, "stats/1", items)
        .await
        .into_iter()
        .map(|e| e.ids[0])
        .collect();
    let [a_ok, a_retry, a_fail, a_last, b_ok, b_exp, b_exp_last, b_sched, _] = ids[..] else {
        panic!("expected 9 jobs, got {ids:?}");
    };

    // Queue sa: three jobs wait 40 ms, the fourth 48 ms; they end together at
    // t0 + 50 ms, 10 ms and 2 ms after being reserved: one batch whose run times
    // leave a bucket and come back to it. One is put back to run again.
    clock.advance(ms(40));
    let mut sa = by_id(take(&*b, "sa", 3).await);
    clock.advance(ms(8));
    sa.extend(by_id(take(&*b, "sa", 10).await));
    assert_eq!(sa.len(), 4);
    clock.advance(ms(2));
    let batch = vec![
        Completion {
            lease: sa[&a_ok].lease(),
            resolution: ok("1"),
        },
        retry(&sa[&a_retry], &clock),
        retry(&sa[&a_last], &clock),
        Completion {
            lease: sa[&a_fail].lease(),
            resolution: Resolution::Failed {
                error: "bad input".into(),
            },
        },
    ];
    assert_eq!(
        b.complete(batch).await.unwrap(),
        vec![CompletionAck::Applied; 4]
    );

    // At t0 + 1 s: the retried job (runnable since t0 + 50 ms) is reserved again;
    // queue sb's jobs have waited 1 s, its scheduled one 500 ms.
    clock.advance(ms(950));
    let again = take(&*b, "sa", 10).await;
    assert_eq!(
        (again.len(), again[0].id, again[0].attempt),
        (1, a_retry, 2)
    );
    let sb = by_id(take(&*b, "sb", 10).await);
    assert_eq!(sb.len(), 4);

    // Three end 5 s later, in one batch of both queues; two are held until their
    // leases expire.
    clock.advance(ms(5000));
    let batch = vec![
        Completion {
            lease: sb[&b_ok].lease(),
            resolution: ok("3"),
        },
        Completion {
            lease: again[0].lease(),
            resolution: ok("2"),
        },
        Completion {
            lease: sb[&b_sched].lease(),
            resolution: Resolution::Failed {
                error: "no such client".into(),
            },
        },
    ];
    assert_eq!(
        b.complete(batch).await.unwrap(),
        vec![CompletionAck::Applied; 3]
    );
    clock.advance(LEASE);
    let recovered = take(&*b, "sb", 10).await;
    assert_eq!(
        (recovered.len(), recovered[0].id, recovered[0].attempt),
        (1, b_exp, 2),
        "the expired job with attempts left runs again; the other failed"
    );
    assert_eq!(
        resolve(&*b, sb[&b_exp].lease(), ok("late")).await,
        CompletionAck::Stale,
        "a late report of an expired attempt counts for nothing"
    );
    assert_eq!(
        b.job(b_exp_last).await.unwrap().unwrap().state,
        tranche_types::JobState::Failed
    );

    // Buckets of LATENCY_BUCKETS_MS (inclusive upper bounds, in ms).
    assert_eq!(
        (
            LATENCY_BUCKETS_MS[0],
            LATENCY_BUCKETS_MS[2],
            LATENCY_BUCKETS_MS[4],
            LATENCY_BUCKETS_MS[6],
            LATENCY_BUCKETS_MS[9],
            LATENCY_BUCKETS_MS[10],
            LATENCY_BUCKETS_MS[12]
        ),
        (0.5, 2.5, 10.0, 50.0, 500.0, 1000.0, 5000.0)
    );
    let want = vec![
        QueueStats {
            queue: "sa".into(),
            started: 5,
            succeeded: 2,
            failed: 2,
            retried: 1,
            expired: 0,
            // 40, 40, 40 and 48 ms, then 950 ms for the retried one's second attempt.
            wait: histogram(&[(6, 4), (10, 1)], 3.0 * 40.0 + 48.0 + 950.0),
            // 10, 10, 2 and 10 ms, then 5 s for the second attempt.
            run: histogram(&[(2, 1), (4, 3), (12, 1)], 32.0 + 5000.0),
        },
        QueueStats {
            queue: "sb".into(),
            started: 5,
            succeeded: 1,
            // One reported failed, one out of attempts when its lease expired.
            failed: 2,
            retried: 0,
            expired: 2,
            // Three jobs waited 1 s (bounds are inclusive), the scheduled one 500 ms
            // from its not_before, the recovered one not at all.
            wait: histogram(&[(0, 1), (9, 1), (10, 3)], 3.0 * 1000.0 + 500.0),
            // Expired attempts have no run time.
            run: histogram(&[(12, 2)], 2.0 * 5000.0),
        },
    ];
    assert_eq!(
        b.queue_stats().await.unwrap(),
        want,
        "sorted by queue; a queue never reserved from has none"
    );
}
