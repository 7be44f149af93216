//! A database written by the previous schema version (2: no `queue_stats`) opens, gets
//! the table, and counts from then on; a newer one is refused.

use std::time::Duration;

use tranche_core::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobSpec, ReserveRequest, Resolution, RunName,
};

fn open(dir: &std::path::Path) -> Result<SqliteBackend, tranche_types::BackendError> {
    SqliteBackend::open(dir, SqliteOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_database_gets_queue_stats() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()).unwrap());
    // Make it what version 2 wrote: no statistics table.
    let file = dir.path().join(SqliteBackend::FILE_NAME);
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.execute_batch("DROP TABLE queue_stats; PRAGMA user_version = 2;")
        .unwrap();
    drop(conn);

    let b = open(dir.path()).unwrap();
    assert!(b.queue_stats().await.unwrap().is_empty());
    b.enqueue(EnqueueRequest {
        run: RunName::new("old/1").unwrap(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", "null").queue("old"))],
        on_done: None,
    })
    .await
    .unwrap();
    let jobs = b
        .reserve(ReserveRequest {
            queue: "old".into(),
            max: 1,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    b.complete(vec![Completion {
        lease: jobs[0].lease(),
        resolution: Resolution::Succeeded {
            result: "null".into(),
        },
    }])
    .await
    .unwrap();
    let stats = b.queue_stats().await.unwrap();
    assert_eq!(
        (stats.len(), stats[0].started, stats[0].succeeded),
        (1, 1, 1)
    );
    drop(b);

    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.execute_batch("PRAGMA user_version = 99;").unwrap();
    drop(conn);
    let err = open(dir.path()).unwrap_err().to_string();
    assert!(err.contains("newer tranche"), "{err}");
}
