//! Queue depth: what bounded intake and `/metrics` read, without scanning finished jobs.

use tranche_types::{EnqueueItem, QueueDepth};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    depth_counts_available_jobs_up_to_a_cap(make).await;
    depths_per_queue(make).await;
}

async fn depth_counts_available_jobs_up_to_a_cap(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert_eq!(b.queue_depth("pdf", 100).await.unwrap(), 0);
    let items: Vec<_> = (0..30)
        .map(|i| EnqueueItem::Job(job("render", &i.to_string()).queue("pdf")))
        .collect();
    enqueue(&*b, "depth/a", items).await;
    // A chain's later steps are pending, not waiting in their queue yet.
    enqueue(
        &*b,
        "depth/b",
        vec![EnqueueItem::Chain(vec![
            job("render", "x").queue("pdf"),
            job("render", "y").queue("pdf"),
        ])],
    )
    .await;
    assert_eq!(b.queue_depth("pdf", 1000).await.unwrap(), 31);
    assert_eq!(
        b.queue_depth("pdf", 10).await.unwrap(),
        10,
        "counts at most cap"
    );
    assert_eq!(b.queue_depth("mail", 1000).await.unwrap(), 0);
    take(&*b, "pdf", 5).await;
    assert_eq!(
        b.queue_depth("pdf", 1000).await.unwrap(),
        26,
        "running jobs are not waiting"
    );
}

async fn depths_per_queue(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert!(b.queue_depths().await.unwrap().is_empty());
    let mut items: Vec<_> = (0..4)
        .map(|i| EnqueueItem::Job(job("a", &i.to_string()).queue("q1")))
        .collect();
    items.push(EnqueueItem::Job(job("b", "0").queue("q2")));
    enqueue(&*b, "depth/many", items).await;
    let js = take(&*b, "q1", 3).await;
    resolve(&*b, js[0].lease(), ok("null")).await;
    let got = b.queue_depths().await.unwrap();
    assert_eq!(
        got,
        vec![
            QueueDepth {
                queue: "q1".into(),
                available: 1,
                running: 2
            },
            QueueDepth {
                queue: "q2".into(),
                available: 1,
                running: 0
            },
        ],
        "sorted by queue; finished jobs are not counted"
    );
}
