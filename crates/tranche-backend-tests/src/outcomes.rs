//! Outcomes: retry with backoff until attempts run out, snooze, discard, cancel.

use std::time::Duration;

use tranche_types::{EnqueueItem, JobState, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    retry_until_exhausted(make).await;
    snooze_keeps_the_attempt(make).await;
    discard_and_cancel_are_final(make).await;
}

async fn retry_until_exhausted(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "out/retry",
        vec![EnqueueItem::Job(job("flaky", "1").max_attempts(2))],
    )
    .await;
    let j = take(&*b, "default", 1).await.remove(0);
    let at = clock.now().plus(Duration::from_secs(30));
    let r = Resolution::Retry {
        error: "smtp 451 try later".into(),
        at,
    };
    assert_eq!(
        resolve(&*b, j.lease(), r).await,
        tranche_types::CompletionAck::Applied
    );
    assert_eq!(
        counts(&progress(&*b, "out/retry").await),
        (0, 1, 0, 0, 0, 0)
    );
    assert!(
        take(&*b, "default", 1).await.is_empty(),
        "not before the backoff"
    );
    clock.advance(Duration::from_secs(31));
    let j2 = take(&*b, "default", 1).await.remove(0);
    assert_eq!(j2.attempt, 2);
    let r = Resolution::Retry {
        error: "smtp 451 again".into(),
        at: clock.now(),
    };
    resolve(&*b, j2.lease(), r).await;
    let rec = b.job(j.id).await.unwrap().unwrap();
    assert_eq!(rec.state, JobState::Failed, "attempts exhausted");
    assert_eq!(rec.error.as_deref(), Some("smtp 451 again"));
    let errors: Vec<_> = rec
        .errors
        .iter()
        .map(|e| (e.attempt, e.error.as_str()))
        .collect();
    assert_eq!(errors, [(1, "smtp 451 try later"), (2, "smtp 451 again")]);
    assert_eq!(
        counts(&progress(&*b, "out/retry").await),
        (0, 0, 0, 0, 1, 0)
    );
}

async fn snooze_keeps_the_attempt(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "out/snooze",
        vec![EnqueueItem::Job(job("wait", "1").max_attempts(1))],
    )
    .await;
    let j = take(&*b, "default", 1).await.remove(0);
    let r = Resolution::Snooze {
        at: clock.now().plus(Duration::from_secs(5)),
    };
    resolve(&*b, j.lease(), r).await;
    assert!(take(&*b, "default", 1).await.is_empty());
    clock.advance(Duration::from_secs(5));
    let again = take(&*b, "default", 1).await.remove(0);
    assert_eq!(again.attempt, 1, "a snooze is not an attempt");
}

async fn discard_and_cancel_are_final(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let ids = enqueue(
        &*b,
        "out/final",
        vec![
            EnqueueItem::Job(job("a", "1")),
            EnqueueItem::Job(job("b", "2")),
        ],
    )
    .await;
    let js = take(&*b, "default", 2).await;
    resolve(
        &*b,
        js[0].lease(),
        Resolution::Failed {
            error: "bad PAN".into(),
        },
    )
    .await;
    resolve(
        &*b,
        js[1].lease(),
        Resolution::Cancelled {
            reason: "client closed".into(),
        },
    )
    .await;
    let a = b.job(ids[0].ids[0]).await.unwrap().unwrap();
    let c = b.job(ids[1].ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (a.state, a.error.as_deref()),
        (JobState::Failed, Some("bad PAN"))
    );
    assert_eq!(
        (c.state, c.error.as_deref()),
        (JobState::Cancelled, Some("client closed"))
    );
    assert_eq!(
        counts(&progress(&*b, "out/final").await),
        (0, 0, 0, 0, 1, 1)
    );
    assert!(take(&*b, "default", 5).await.is_empty());
}
