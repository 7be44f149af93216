//! The database's disk full, for real: a small tmpfs mounted for the test (root is
//! needed to mount; without it the test fails when `CI` or `TRANCHE_REQUIRE_TOOLS=1` is
//! set and is skipped with the reason otherwise).

use std::sync::Arc;
use std::time::Duration;

use tranche_backend::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_test_support::{fill_but, SmallDisk};
use tranche_types::{
    BackendError, Completion, CompletionAck, EnqueueItem, EnqueueRequest, JobSpec, ManualClock,
    ReserveRequest, Resolution, RunName, Timestamp,
};

fn job(queue: &str, args_len: usize) -> EnqueueItem {
    let args = format!("\"{}\"", "x".repeat(args_len));
    EnqueueItem::Job(JobSpec::new("k", args).queue(queue))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_names_the_database_loses_nothing_and_takes_no_lease() {
    let Some(disk) = SmallDisk::mount("8m") else {
        return;
    };
    let clock = ManualClock::new(Timestamp(1_000_000_000_000));
    let b = SqliteBackend::open(
        disk.path(),
        SqliteOptions {
            clock: Arc::new(clock.clone()),
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    let night = RunName::new("night/1").unwrap();
    b.enqueue(EnqueueRequest {
        run: night.clone(),
        items: vec![job("q", 10)],
        on_done: None,
    })
    .await
    .unwrap();
    let held = b
        .reserve(ReserveRequest {
            queue: "q".into(),
            max: 1,
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(held.len(), 1);

    let filler = disk.path().join("filler");
    fill_but(&filler, 256 * 1024);
    let big = RunName::new("big/1").unwrap();
    let mut stored = 0u64;
    let full = loop {
        assert!(stored < 1000, "the disk never filled");
        let r = b
            .enqueue(EnqueueRequest {
                run: big.clone(),
                items: (0..4).map(|_| job("big", 16 * 1024)).collect(),
                on_done: None,
            })
            .await;
        match r {
            Ok(_) => stored += 4,
            Err(e) => break e,
        }
    };
    let db = disk.path().join(SqliteBackend::FILE_NAME);
    match &full {
        BackendError::Full { path, .. } => assert_eq!(path, &db.display().to_string()),
        other => panic!("expected Full, got {other:?}"),
    }
    let said = full.to_string();
    assert!(said.contains("disk is full"), "{said}");
    assert!(said.contains("free space there"), "{said}");

    // The disk stays full longer than the lease (nobody could have extended it); the
    // writer keeps answering meanwhile.
    clock.advance(Duration::from_secs(60));
    let again = b
        .enqueue(EnqueueRequest {
            run: big.clone(),
            items: (0..4).map(|_| job("big", 16 * 1024)).collect(),
            on_done: None,
        })
        .await;
    assert!(matches!(again, Err(BackendError::Full { .. })), "{again:?}");
    std::fs::remove_file(&filler).unwrap();
    clock.advance(Duration::from_secs(1));

    // The writer works again, and the job is still this worker's: not reaped by the
    // next reserve, its result applied.
    let none = b
        .reserve(ReserveRequest {
            queue: "q".into(),
            max: 1,
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "the held job was taken back: {none:?}");
    let acks = b
        .complete(vec![Completion {
            lease: held[0].lease(),
            resolution: Resolution::Succeeded {
                result: "null".into(),
            },
        }])
        .await
        .unwrap();
    assert_eq!(acks, vec![CompletionAck::Applied]);
    let p = b.run_progress(&night).await.unwrap().unwrap();
    assert_eq!((p.total, p.succeeded, p.running), (1, 1, 0));

    // What committed before the disk filled is all there, counted once; nothing of
    // the refused batches is.
    b.enqueue(EnqueueRequest {
        run: big.clone(),
        items: vec![job("big", 10)],
        on_done: None,
    })
    .await
    .unwrap();
    let p = b.run_progress(&big).await.unwrap().unwrap();
    assert_eq!((p.total, p.available), (stored + 1, stored + 1));
    assert_eq!(b.queue_depth("big", u64::MAX).await.unwrap(), stored + 1);
}
