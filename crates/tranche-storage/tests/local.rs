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

#[tokio::test]
async fn objects_and_their_directories_are_the_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path().join("store"));
    let key = StoreKey::partitioned("contract-notes-data", "2026-11-20", "C1", "json").unwrap();
    store.put(&key, b"{}".to_vec()).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let file = dir.path().join("store").join(key.as_str());
    assert_eq!(mode(&file), 0o600);
    let mut at = file.parent().unwrap();
    while at != dir.path() {
        assert_eq!(mode(at), 0o700, "{}", at.display());
        at = at.parent().unwrap();
    }
}
