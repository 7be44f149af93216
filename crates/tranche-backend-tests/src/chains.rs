//! Chains: the next step becomes runnable atomically with the previous one's success
//! and receives its result; a failure cancels the rest until the run is retried.

use tranche_types::{EnqueueItem, JobState, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    steps_run_in_order_with_results(make).await;
    failed_step_cancels_the_rest_until_retried(make).await;
}

async fn steps_run_in_order_with_results(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let chain = vec![
        job("process", "\"c1\""),
        job("render", "{}").queue("pdf"),
        job("mail", "{}"),
    ];
    let out = enqueue(&*b, "chain/ok", vec![EnqueueItem::Chain(chain)]).await;
    let ids = out[0].ids.clone();
    assert_eq!(ids.len(), 3);
    assert_eq!(counts(&progress(&*b, "chain/ok").await), (2, 1, 0, 0, 0, 0));
    let p = take(&*b, "default", 10).await;
    assert_eq!(p.len(), 1, "only the head is runnable");
    assert_eq!((p[0].id, p[0].input.as_deref()), (ids[0], None));
    assert!(take(&*b, "pdf", 10).await.is_empty());
    resolve(&*b, p[0].lease(), ok("{\"pages\":2}")).await;
    let r = take(&*b, "pdf", 10).await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].id, ids[1]);
    assert_eq!(
        r[0].input.as_deref(),
        Some("{\"pages\":2}"),
        "receives the previous result"
    );
    resolve(&*b, r[0].lease(), ok("\"signed.pdf\"")).await;
    let m = take(&*b, "default", 10).await;
    assert_eq!(
        (m[0].id, m[0].input.as_deref()),
        (ids[2], Some("\"signed.pdf\""))
    );
    resolve(&*b, m[0].lease(), ok("null")).await;
    let p = progress(&*b, "chain/ok").await;
    assert_eq!(counts(&p), (0, 0, 0, 3, 0, 0));
    assert!(p.is_finished());
}

async fn failed_step_cancels_the_rest_until_retried(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "chain/fail",
        vec![EnqueueItem::Chain(vec![
            job("a", "1"),
            job("b", "2"),
            job("c", "3"),
        ])],
    )
    .await;
    let ids = out[0].ids.clone();
    let a = take(&*b, "default", 10).await.remove(0);
    resolve(&*b, a.lease(), ok("\"a-out\"")).await;
    let bj = take(&*b, "default", 10).await.remove(0);
    resolve(
        &*b,
        bj.lease(),
        Resolution::Failed {
            error: "template error at line 3".into(),
        },
    )
    .await;
    let p = progress(&*b, "chain/fail").await;
    assert_eq!(counts(&p), (0, 0, 0, 1, 1, 1));
    assert!(p.is_finished(), "every job ended");
    let c = b.job(ids[2]).await.unwrap().unwrap();
    assert_eq!(c.state, JobState::Cancelled);
    assert!(c
        .error
        .unwrap()
        .contains(&format!("upstream job {} failed", ids[1])));

    assert_eq!(
        b.retry_run(&run("chain/fail")).await.unwrap(),
        2,
        "the failed step and the one after it"
    );
    let p = progress(&*b, "chain/fail").await;
    assert_eq!(counts(&p), (1, 1, 0, 1, 0, 0));
    assert!(p.finished_at.is_none(), "a retried run is open again");
    let again = take(&*b, "default", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].id, again[0].attempt),
        (ids[1], 1),
        "fresh attempts"
    );
    assert_eq!(
        again[0].input.as_deref(),
        Some("\"a-out\""),
        "input kept from the first run"
    );
    resolve(&*b, again[0].lease(), ok("\"b-out\"")).await;
    let c = take(&*b, "default", 10).await.remove(0);
    assert_eq!((c.id, c.input.as_deref()), (ids[2], Some("\"b-out\"")));
    resolve(&*b, c.lease(), ok("null")).await;
    let p = progress(&*b, "chain/fail").await;
    assert_eq!(counts(&p), (0, 0, 0, 3, 0, 0));
    assert_eq!(p.finishes, 2, "finished, retried, finished again");
}
