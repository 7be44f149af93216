//! Effects: recorded once under a key, visible to every later attempt.

use tranche_types::EnqueueItem;

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    effect_is_recorded_once(make).await;
}

async fn effect_is_recorded_once(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let ids = enqueue(&*b, "eff/a", vec![EnqueueItem::Job(job("mail", "1"))]).await;
    let key = "mailed/eff/a/client-1";
    assert!(b.effect(key).await.unwrap().is_none());
    assert!(b
        .record_effect(tranche_types::EffectRecord {
            key,
            job: Some(ids[0].ids[0]),
            value: "<msg-1@broker>"
        })
        .await
        .unwrap());
    assert!(
        !b.record_effect(tranche_types::EffectRecord {
            key,
            job: Some(ids[0].ids[0]),
            value: "<msg-2@broker>"
        })
        .await
        .unwrap(),
        "recorded once"
    );
    let e = b.effect(key).await.unwrap().unwrap();
    assert_eq!(
        (e.value.as_str(), e.job),
        ("<msg-1@broker>", Some(ids[0].ids[0])),
        "the first record stands"
    );
}
