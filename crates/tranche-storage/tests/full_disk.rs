//! A LocalStore on a real full filesystem: a small tmpfs mounted for the test (root is
//! needed to mount; without it the test fails when `CI` or `TRANCHE_REQUIRE_TOOLS=1`
//! is set and is skipped with the reason otherwise).

use std::path::{Path, PathBuf};

use tranche_storage::{LocalStore, Storage, StorageError, StoreKey};
use tranche_test_support::SmallDisk;

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test]
async fn a_write_that_does_not_fit_is_full_names_the_store_and_leaves_nothing_behind() {
    let Some(disk) = SmallDisk::mount("256k") else {
        return;
    };
    let root = disk.path().join("store");
    let store = LocalStore::new(&root);
    let free = store
        .free_space()
        .expect("a local disk tells its free space");
    assert!(free <= 256 * 1024, "{free}");

    let key = StoreKey::partitioned("signed-pdf", "2026-11-20", "C1", "pdf").unwrap();
    let big = vec![7u8; 1024 * 1024];
    match store.put(&key, big).await {
        Err(StorageError::Full {
            location,
            bytes,
            ref source,
            ..
        }) => {
            assert_eq!(location, root.display().to_string());
            assert_eq!(bytes, 1024 * 1024);
            assert_eq!(source.raw_os_error(), Some(28), "{source}");
        }
        other => panic!("expected Full, got {other:?}"),
    }
    let err = store.put(&key, vec![7u8; 1024 * 1024]).await.unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains(&root.display().to_string()), "{shown}");
    assert!(shown.contains("free space there"), "{shown}");
    // The half-written temporary is gone: it would hold the space for good.
    assert_eq!(files(&root), Vec::<PathBuf>::new());
    assert!(!store.exists(&key).await.unwrap());

    // What fits is stored; once space is freed, the big write goes through too.
    let small = StoreKey::partitioned("contract-notes-data", "2026-11-20", "C1", "json").unwrap();
    store.put(&small, b"{}".to_vec()).await.unwrap();
    assert_eq!(store.get(&small).await.unwrap(), b"{}");
    let _ = disk;
}

#[tokio::test]
async fn once_space_is_freed_the_same_write_succeeds() {
    let Some(disk) = SmallDisk::mount("1m") else {
        return;
    };
    let filler = disk.path().join("filler");
    std::fs::write(&filler, vec![0u8; 900 * 1024]).unwrap();
    let store = LocalStore::new(disk.path().join("store"));
    let key = StoreKey::partitioned("signed-pdf", "2026-11-20", "C2", "pdf").unwrap();
    let pdf = vec![1u8; 300 * 1024];
    assert!(matches!(
        store.put(&key, pdf.clone()).await,
        Err(StorageError::Full { .. })
    ));
    std::fs::remove_file(&filler).unwrap();
    // The kernel may hand the space back a moment after the unlink (one CI run saw
    // it short right after): polled with a deadline, then required.
    tranche_test_support::poll_until(
        "more than 300 KiB free once the filler is gone",
        std::time::Duration::from_secs(10),
        || store.free_space().unwrap() > 300 * 1024,
    )
    .await;
    store.put(&key, pdf.clone()).await.unwrap();
    assert_eq!(store.get(&key).await.unwrap(), pdf);
}
