//! Locks: a set of entity ids claimed all-or-nothing with a TTL.

use std::time::Duration;

use tranche_types::LockClaim;

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    claims_are_all_or_nothing(make).await;
}

fn keys(ks: &[&str]) -> Vec<String> {
    ks.iter().map(|k| k.to_string()).collect()
}

async fn claims_are_all_or_nothing(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    let ttl = Duration::from_secs(30);
    assert_eq!(
        b.claim_locks(tranche_types::LockRequest {
            owner: "w1",
            keys: &keys(&["e1", "e2"]),
            ttl
        })
        .await
        .unwrap(),
        LockClaim::Claimed
    );
    let clash = b
        .claim_locks(tranche_types::LockRequest {
            owner: "w2",
            keys: &keys(&["e3", "e2"]),
            ttl,
        })
        .await
        .unwrap();
    assert_eq!(
        clash,
        LockClaim::Conflict {
            key: "e2".into(),
            owner: "w1".into()
        }
    );
    assert_eq!(
        b.claim_locks(tranche_types::LockRequest {
            owner: "w3",
            keys: &keys(&["e3"]),
            ttl
        })
        .await
        .unwrap(),
        LockClaim::Claimed,
        "a refused claim leaves nothing claimed"
    );
    assert_eq!(
        b.claim_locks(tranche_types::LockRequest {
            owner: "w1",
            keys: &keys(&["e1"]),
            ttl
        })
        .await
        .unwrap(),
        LockClaim::Claimed,
        "re-claim by the holder"
    );
    assert_eq!(
        b.release_locks("w2", &keys(&["e1"])).await.unwrap(),
        0,
        "only the holder releases"
    );
    assert_eq!(b.release_locks("w1", &keys(&["e1"])).await.unwrap(), 1);
    assert_eq!(
        b.claim_locks(tranche_types::LockRequest {
            owner: "w2",
            keys: &keys(&["e1"]),
            ttl
        })
        .await
        .unwrap(),
        LockClaim::Claimed
    );
    clock.advance(ttl + Duration::from_secs(1));
    assert_eq!(
        b.claim_locks(tranche_types::LockRequest {
            owner: "w2",
            keys: &keys(&["e2", "e3"]),
            ttl
        })
        .await
        .unwrap(),
        LockClaim::Claimed,
        "expired locks are free"
    );
}
