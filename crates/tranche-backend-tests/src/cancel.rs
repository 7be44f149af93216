//! Cancellation wins: cancelled jobs never start, running ones learn of it through
//! their heartbeat, and their late completions change nothing.

use tranche_types::{CancelTarget, CompletionAck, EnqueueItem, JobState};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    cancel_run_stops_everything(make).await;
    cancel_job_and_chain(make).await;
}

async fn cancel_run_stops_everything(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let mut items: Vec<_> = (0..4)
        .map(|i| EnqueueItem::Job(job("x", &i.to_string())))
        .collect();
    items.push(EnqueueItem::Chain(vec![
        job("a", "1").queue("q2"),
        job("b", "2").queue("q2"),
    ]));
    enqueue(&*b, "cancel/run", items).await;
    let running = take(&*b, "default", 2).await;
    resolve(&*b, running[0].lease(), ok("null")).await;
    let n = b
        .cancel(
            CancelTarget::Run(run("cancel/run")),
            "operator stopped the night",
        )
        .await
        .unwrap();
    assert_eq!(n, 5, "one running, two queued, a chain of two");
    let p = progress(&*b, "cancel/run").await;
    assert_eq!(counts(&p), (0, 0, 0, 1, 0, 5));
    assert!(p.is_finished());
    assert!(
        take(&*b, "default", 10).await.is_empty(),
        "nothing cancelled is started"
    );
    assert!(take(&*b, "q2", 10).await.is_empty());
    let lost = b.heartbeat(vec![running[1].lease()], LEASE).await.unwrap();
    assert_eq!(
        lost,
        vec![running[1].lease()],
        "the running job learns it was cancelled"
    );
    assert_eq!(
        resolve(&*b, running[1].lease(), ok("null")).await,
        CompletionAck::Stale
    );
    let rec = b.job(running[1].id).await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.error.as_deref()),
        (JobState::Cancelled, Some("operator stopped the night"))
    );
    assert_eq!(
        b.retry_run(&run("cancel/run")).await.unwrap(),
        0,
        "a retry does not undo a cancel"
    );
}

async fn cancel_job_and_chain(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "cancel/chain",
        vec![
            EnqueueItem::Chain(vec![job("a", "1"), job("b", "2"), job("c", "3")]),
            EnqueueItem::Chain(vec![job("d", "1").queue("q"), job("e", "2").queue("q")]),
        ],
    )
    .await;
    let (c1, c2) = (out[0].ids.clone(), out[1].ids.clone());
    assert_eq!(
        b.cancel(CancelTarget::Job(c1[0]), "no longer needed")
            .await
            .unwrap(),
        3,
        "a job takes its successors along"
    );
    assert!(take(&*b, "default", 10).await.is_empty());
    let d = take(&*b, "q", 1).await.remove(0);
    resolve(&*b, d.lease(), ok("null")).await;
    assert_eq!(
        b.cancel(CancelTarget::Job(d.id), "x").await.unwrap(),
        0,
        "an ended job stays as it is"
    );
    assert_eq!(
        b.cancel(CancelTarget::Chain(c2[0]), "stop the rest")
            .await
            .unwrap(),
        1
    );
    assert!(take(&*b, "q", 10).await.is_empty());
    assert_eq!(
        b.job(c2[0]).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert_eq!(
        counts(&progress(&*b, "cancel/chain").await),
        (0, 0, 0, 1, 0, 4)
    );
}
