//! The suite every [`Storage`] implementation passes, against a real store.

use crate::{Storage, StorageError, StoreKey};

/// Every check below in turn, against `store`; panics at the first failure. Leaves an
/// 8 MB object behind under a `tmp-pdf` key.
pub async fn exercise(store: &dyn Storage) {
    round_trip_and_replace(store).await;
    missing_keys(store).await;
    large_objects(store).await;
}

async fn round_trip_and_replace(store: &dyn Storage) {
    let key = StoreKey::partitioned("signed-pdf", "2026-11-20", "C0000042", "pdf").unwrap();
    assert!(!store.exists(&key).await.unwrap());
    store.put(&key, b"%PDF-1.7 first".to_vec()).await.unwrap();
    assert!(store.exists(&key).await.unwrap());
    assert_eq!(store.get(&key).await.unwrap(), b"%PDF-1.7 first");
    store.put(&key, b"%PDF-1.7 second".to_vec()).await.unwrap();
    assert_eq!(
        store.get(&key).await.unwrap(),
        b"%PDF-1.7 second",
        "put replaces"
    );
    store.delete(&key).await.unwrap();
    assert!(!store.exists(&key).await.unwrap());
    store.delete(&key).await.unwrap();
}

async fn missing_keys(store: &dyn Storage) {
    let key = StoreKey::partitioned("tmp-pdf", "2026-11-20", "NOBODY", "pdf").unwrap();
    match store.get(&key).await {
        Err(StorageError::NotFound { key: k }) => assert_eq!(k, key.to_string()),
        other => panic!("expected NotFound, got {other:?}"),
    }
}

async fn large_objects(store: &dyn Storage) {
    let key = StoreKey::partitioned("tmp-pdf", "2026-11-20", "HEAVY", "pdf").unwrap();
    let big: Vec<u8> = (0..8 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    store.put(&key, big.clone()).await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), big);
}
