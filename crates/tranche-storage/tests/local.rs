use tranche_storage::{conformance, LocalStore, Storage, StoreKey};

#[tokio::test]
async fn local_store_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("store"));
    conformance::exercise(&store).await;
}

#[tokio::test]
async fn keys_are_files_under_the_root_and_no_temporaries_remain() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    let key = StoreKey::partitioned("contract-notes-data", "2026-11-20", "C1", "json").unwrap();
    store.put(&key, b"{}".to_vec()).await.unwrap();
    let path = dir.path().join(key.as_str());
    assert_eq!(store.locate(&key), path.display().to_string());
    assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}
