//! Groups: the callback is released exactly once, when every member has ended, with
//! every member's outcome.

use tranche_types::{EnqueueItem, JobState, MemberOutcome, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    callback_gets_all_outcomes_once(make).await;
    empty_group_releases_callback(make).await;
}

async fn callback_gets_all_outcomes_once(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let members = vec![
        job("map", "1").max_attempts(1),
        job("map", "2"),
        job("map", "3"),
    ];
    let callback = job("reduce", "{}").queue("reduce");
    let out = enqueue(
        &*b,
        "group/mr",
        vec![EnqueueItem::Group { members, callback }],
    )
    .await;
    let ids = out[0].ids.clone();
    assert_eq!(ids.len(), 4, "members then callback");
    assert_eq!(counts(&progress(&*b, "group/mr").await), (1, 3, 0, 0, 0, 0));
    let ms = take(&*b, "default", 10).await;
    assert_eq!(ms.len(), 3);
    resolve(
        &*b,
        ms[0].lease(),
        Resolution::Retry {
            error: "boom".into(),
            at: b.clock().now(),
        },
    )
    .await;
    resolve(&*b, ms[1].lease(), ok("{\"entries\":20}")).await;
    assert!(
        take(&*b, "reduce", 10).await.is_empty(),
        "not before every member ended"
    );
    // A member finishing twice (a stale duplicate) must not release the callback twice.
    resolve(&*b, ms[1].lease(), ok("{\"entries\":20}")).await;
    assert!(take(&*b, "reduce", 10).await.is_empty());
    b.cancel(tranche_types::CancelTarget::Job(ids[2]), "entry cancelled")
        .await
        .unwrap();
    let cb = take(&*b, "reduce", 10).await;
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].id, ids[3]);
    let outcomes: Vec<MemberOutcome> =
        serde_json::from_str(cb[0].input.as_deref().unwrap()).unwrap();
    let states: Vec<_> = outcomes.iter().map(|o| (o.job, o.state)).collect();
    assert_eq!(
        states,
        [
            (ids[0], JobState::Failed),
            (ids[1], JobState::Succeeded),
            (ids[2], JobState::Cancelled)
        ]
    );
    assert_eq!(outcomes[0].error.as_deref(), Some("boom"));
    assert_eq!(outcomes[1].result, Some(serde_json::json!({"entries": 20})));
    assert_eq!(outcomes[2].error.as_deref(), Some("entry cancelled"));
    resolve(&*b, cb[0].lease(), ok("null")).await;
    assert!(progress(&*b, "group/mr").await.is_finished());
}

async fn empty_group_releases_callback(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    enqueue(
        &*b,
        "group/empty",
        vec![EnqueueItem::Group {
            members: vec![],
            callback: job("reduce", "{}"),
        }],
    )
    .await;
    let cb = take(&*b, "default", 10).await;
    assert_eq!(cb.len(), 1);
    assert_eq!(cb[0].input.as_deref(), Some("[]"));
}
