//! Files made before the schema moved to rusqlite_migration: the hand-written migration
//! ran `fixtures/schema_v3.sql` and stamped version 3. Such a file opens with all its
//! work kept and carries on, and a new file gets the very same schema (once the
//! migrations after version 3 have run on both).

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use tranche_backend::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{Completion, JobId, JobState, ReserveRequest, Resolution, RunName};

const HAND_WRITTEN_SCHEMA: &str = include_str!("fixtures/schema_v3.sql");

/// The version this binary writes.
const VERSION: i64 = 10;

/// What the migrations after version 3 add to `sqlite_master`.
fn added_after_v3(name: &str) -> bool {
    name.starts_with("unique_windows")
        || name.starts_with("paused_queues")
        || name == "job_id_floor"
        || name == "job_traces"
        || name == "limits"
        || name.starts_with("limit_starts")
        || name.starts_with("records")
        || name.starts_with("record_ends")
        || name == "gates"
}

fn open(dir: &Path) -> SqliteBackend {
    SqliteBackend::open(dir, SqliteOptions::default()).unwrap()
}

/// What the hand-written migration did to a new file.
fn hand_written_file(dir: &Path) -> Connection {
    std::fs::create_dir_all(dir).unwrap();
    let conn = Connection::open(dir.join(SqliteBackend::FILE_NAME)).unwrap();
    conn.execute_batch(HAND_WRITTEN_SCHEMA).unwrap();
    conn.pragma_update(None, "user_version", 3).unwrap();
    conn
}

/// Every table and index as SQLite keeps it, in name order.
fn schema(file: &Path) -> Vec<(String, String, String, Option<String>)> {
    let conn = Connection::open(file).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    rows
}

fn user_version(file: &Path) -> i64 {
    Connection::open(file)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn a_new_file_gets_the_schema_the_hand_written_migration_made() {
    let dir = tempfile::tempdir().unwrap();
    drop(hand_written_file(&dir.path().join("old")));
    drop(open(&dir.path().join("old")));
    drop(open(&dir.path().join("new")));
    let file = |d: &str| dir.path().join(d).join(SqliteBackend::FILE_NAME);
    assert_eq!(schema(&file("new")), schema(&file("old")));
    assert_eq!(user_version(&file("new")), VERSION);
}

/// Version 1 had neither the change feed nor, in its first builds, the group index.
#[test]
fn a_version_1_file_gets_the_feed_and_the_group_index() {
    let dir = tempfile::tempdir().unwrap();
    drop(hand_written_file(&dir.path().join("new")));
    drop(open(&dir.path().join("new")));
    hand_written_file(&dir.path().join("old"))
        .execute_batch(
            "DROP TABLE queue_stats; DROP TABLE events; DROP INDEX jobs_group;
             PRAGMA user_version = 1;",
        )
        .unwrap();
    drop(open(&dir.path().join("old")));
    let file = |d: &str| dir.path().join(d).join(SqliteBackend::FILE_NAME);
    assert_eq!(schema(&file("old")), schema(&file("new")));
    assert_eq!(user_version(&file("old")), VERSION);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_written_file_opens_with_its_work_kept() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(SqliteBackend::FILE_NAME);
    // A run as the writer of that version left it, its state numbers as stored then
    // (available 1, succeeded 3, failed 4): one job done, one failed, one waiting.
    hand_written_file(dir.path())
        .execute_batch(
            "INSERT INTO runs (id, name, created_at, total, available, succeeded, failed)
                 VALUES (1, 'old/1', 10, 3, 1, 1, 1);
             INSERT INTO jobs (id, run_id, kind, queue, state, attempt, max_attempts,
                               available_at, created_at, started_at, finished_at, args, result, error)
                 VALUES (1, 1, 'k', 'old', 3, 1, 1, 10, 10, 11, 12, 'null', '42', NULL),
                        (2, 1, 'k', 'old', 4, 1, 1, 10, 10, 11, 13, 'null', NULL, 'boom'),
                        (3, 1, 'k', 'old', 1, 0, 1, 10, 10, NULL, NULL, 'null', NULL, NULL);
             INSERT INTO job_errors (job_id, attempt, at, error) VALUES (2, 1, 13, 'boom');
             INSERT INTO effects (key, job_id, value, at) VALUES ('fx', 1, 'sent', 12);
             INSERT INTO finish_hooks (run_id, hook, finish) VALUES (1, 'mail', 1);
             INSERT INTO queue_stats (queue, stat, n) VALUES ('old', 0, 2);
             -- Job 1 succeeded: one range, gap 1 (zig-zagged: 2), length 1.
             INSERT INTO events (id, at, run_id, state, jobs) VALUES (1, 12, 1, 3, x'0201');",
        )
        .unwrap();
    let before = schema(&file);

    let b = open(dir.path());
    let run = RunName::new("old/1").unwrap();
    let p = b.run_progress(&run).await.unwrap().unwrap();
    assert_eq!((p.total, p.available, p.succeeded, p.failed), (3, 1, 1, 1));
    let done = b.job(JobId(1)).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.result.as_deref()),
        (JobState::Succeeded, Some("42"))
    );
    let failed = b.job(JobId(2)).await.unwrap().unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.errors.len(), 1);
    let failures = b.run_failures(&run, None, 10).await.unwrap();
    assert_eq!(
        failures
            .iter()
            .map(|f| (f.id, f.error.as_str()))
            .collect::<Vec<_>>(),
        [(JobId(2), "boom")]
    );
    let events = b.events(0, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        events.iter().map(|e| (e.job, e.state)).collect::<Vec<_>>(),
        [(JobId(1), JobState::Succeeded)]
    );
    assert_eq!(b.effect("fx").await.unwrap().unwrap().value, "sent");
    assert!(!b
        .record_effect(tranche_types::EffectRecord {
            key: "fx",
            job: None,
            value: "again"
        })
        .await
        .unwrap());
    assert!(!b.claim_finish_hook(&run, "mail", 1).await.unwrap());
    assert_eq!(b.queue_stats().await.unwrap()[0].started, 2);

    // And it carries on: the waiting job runs, and the run finishes.
    let jobs = b
        .reserve(ReserveRequest {
            queue: "old".into(),
            max: 10,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [JobId(3)]);
    b.complete(vec![Completion {
        lease: jobs[0].lease(),
        resolution: Resolution::Succeeded {
            result: "null".into(),
        },
    }])
    .await
    .unwrap();
    let p = b.run_progress(&run).await.unwrap().unwrap();
    assert_eq!((p.succeeded, p.finishes), (2, 1));
    drop(b);

    let mut after = schema(&file);
    after.retain(|(_, name, _, _)| !added_after_v3(name));
    assert_eq!(after, before, "only the later migrations' tables are added");
    assert_eq!(user_version(&file), VERSION);
}
