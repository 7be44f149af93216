//! Runs: O(1) progress, listing, paged failures, the finish mark and its hooks.

use tranche_types::{EnqueueItem, EnqueueRequest, JobId, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    progress_listing_and_failures(make).await;
    finish_fires_hooks_once(make).await;
}

async fn progress_listing_and_failures(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert!(b.run_progress(&run("runs/none")).await.unwrap().is_none());
    enqueue(
        &*b,
        "runs/old",
        vec![EnqueueItem::Job(job("x", "0").queue("old"))],
    )
    .await;
    let items: Vec<_> = (0..25)
        .map(|i| EnqueueItem::Job(job("x", &i.to_string())))
        .collect();
    enqueue(&*b, "runs/a", items).await;
    let js = take(&*b, "default", 25).await;
    for (i, j) in js.iter().enumerate() {
        let res = if i % 2 == 0 {
            Resolution::Failed {
                error: format!("bad row {i}"),
            }
        } else {
            ok("null")
        };
        resolve(&*b, j.lease(), res).await;
    }
    let p = progress(&*b, "runs/a").await;
    assert_eq!((p.total, p.succeeded, p.failed), (25, 12, 13));
    let listed = b.list_runs(10).await.unwrap();
    let names: Vec<_> = listed
        .iter()
        .map(|p| p.run.as_ref().unwrap().as_str())
        .collect();
    assert_eq!(names, ["runs/a", "runs/old"], "newest first");
    assert_eq!(listed[0], p);
    let page1 = b.run_failures(&run("runs/a"), None, 10).await.unwrap();
    let page2 = b
        .run_failures(&run("runs/a"), page1.last().map(|f| f.id), 10)
        .await
        .unwrap();
    assert_eq!((page1.len(), page2.len()), (10, 3));
    assert!(page1.windows(2).all(|w| w[0].id < w[1].id));
    assert!(page1[0].error.starts_with("bad row "));
    assert!(b
        .run_failures(&run("runs/a"), Some(JobId(i64::MAX)), 10)
        .await
        .unwrap()
        .is_empty());
}

async fn finish_fires_hooks_once(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    b.enqueue(EnqueueRequest {
        run: run("runs/hook"),
        items: vec![
            EnqueueItem::Job(job("x", "1")),
            EnqueueItem::Job(job("x", "2")),
        ],
        on_done: Some(job("teardown", "{\"fleet\":\"notes\"}").queue("hooks")),
    })
    .await
    .unwrap();
    let js = take(&*b, "default", 10).await;
    resolve(&*b, js[0].lease(), ok("null")).await;
    assert!(
        b.run_progress(&run("runs/hook/done"))
            .await
            .unwrap()
            .is_none(),
        "not before the run finished"
    );
    assert!(!progress(&*b, "runs/hook").await.is_finished());
    resolve(&*b, js[1].lease(), ok("null")).await;
    let p = progress(&*b, "runs/hook").await;
    assert!(p.is_finished() && p.finished_at.is_some());
    assert_eq!(p.finishes, 1);
    let hook = take(&*b, "hooks", 10).await;
    assert_eq!(hook.len(), 1, "the on-done job is enqueued once");
    assert_eq!(
        (hook[0].kind.as_str(), hook[0].run.as_str()),
        ("teardown", "runs/hook/done")
    );
    assert!(b
        .claim_finish_hook(&run("runs/hook"), "cmd", 1)
        .await
        .unwrap());
    assert!(
        !b.claim_finish_hook(&run("runs/hook"), "cmd", 1)
            .await
            .unwrap(),
        "claimed once"
    );
    assert!(b
        .claim_finish_hook(&run("runs/hook"), "other", 1)
        .await
        .unwrap());
}
