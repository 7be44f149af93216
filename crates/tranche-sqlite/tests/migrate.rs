//! Databases written by earlier schema versions (2: no `queue_stats`; 3: no
//! `unique_windows` nor `paused_queues`; 6: no `job_traces`; 7: no `limits`; 8: no records nor gates; 9: no `record_ends`) open, get the tables, and
//! carry on; a newer one is refused.

use std::time::Duration;

use tranche_backend::Backend;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    BackendError, Completion, EnqueueItem, EnqueueRequest, Enqueued, JobSpec, ReserveRequest,
    Resolution, RunName,
};

/// The schema version this binary writes: every upgrade ends there.
const CURRENT: i64 = 10;

fn user_version(file: &std::path::Path) -> i64 {
    rusqlite::Connection::open(file)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

/// Make the file in `dir` what an older version wrote: `sql` drops what that version
/// did not have and sets its `user_version`. Returns the file's path.
fn as_written_before(dir: &std::path::Path, sql: &str) -> std::path::PathBuf {
    let file = dir.join(SqliteBackend::FILE_NAME);
    let conn = rusqlite::Connection::open(&file).unwrap();
    conn.execute_batch(sql).unwrap();
    file
}

fn open(dir: &std::path::Path) -> Result<SqliteBackend, tranche_types::BackendError> {
    SqliteBackend::open(dir, SqliteOptions::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_database_gets_queue_stats() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()).unwrap());
    // Make it what version 2 wrote: no statistics table.
    let file = as_written_before(
        dir.path(),
        "DROP TABLE queue_stats; PRAGMA user_version = 2;",
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_the_owners_alone_and_an_older_readable_one_is_narrowed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let file = data.join(SqliteBackend::FILE_NAME);
    let b = open(&data).unwrap();
    b.enqueue(EnqueueRequest {
        run: RunName::new("perm/1").unwrap(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", "{}"))],
        on_done: None,
    })
    .await
    .unwrap();
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&file), 0o600);
    let wal = data.join(format!("{}-wal", SqliteBackend::FILE_NAME));
    assert_eq!(
        mode(&wal),
        0o600,
        "SQLite gives the WAL the database's mode"
    );
    drop(b);
    // As an earlier version left it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(open(&data).unwrap());
    assert_eq!(mode(&file), 0o600);
}

/// Version 3 had no `unique_windows`: the file gets it, its run-scoped keys still
/// match, and windowed keys work from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_3_database_gets_unique_windows() {
    let dir = tempfile::tempdir().unwrap();
    async fn enqueue(b: &SqliteBackend, spec: JobSpec) -> Result<Vec<Enqueued>, BackendError> {
        b.enqueue(EnqueueRequest {
            run: RunName::new("old/uq").unwrap(),
            items: vec![EnqueueItem::Job(spec)],
            on_done: None,
        })
        .await
    }
    let b = open(dir.path()).unwrap();
    let scoped = enqueue(&b, JobSpec::new("k", "null").unique_key("client-1"))
        .await
        .unwrap();
    drop(b);
    let file = as_written_before(
        dir.path(),
        "DROP TABLE unique_windows; PRAGMA user_version = 3;",
    );

    let b = open(dir.path()).unwrap();
    let again = enqueue(&b, JobSpec::new("k", "null").unique_key("client-1"))
        .await
        .unwrap();
    assert!(again[0].existed);
    assert_eq!(again[0].ids, scoped[0].ids);
    let hour = Duration::from_secs(3600);
    let first = enqueue(&b, JobSpec::new("k", "null").unique_for("client-1", hour))
        .await
        .unwrap();
    let dup = enqueue(&b, JobSpec::new("k", "null").unique_for("client-1", hour))
        .await
        .unwrap();
    assert!(!first[0].existed && dup[0].existed);
    assert_eq!(dup[0].ids, first[0].ids);
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_3_database_gets_paused_queues_with_its_work_kept() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path()).unwrap();
    b.enqueue(EnqueueRequest {
        run: RunName::new("v3/1").unwrap(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", "null").queue("old"))],
        on_done: None,
    })
    .await
    .unwrap();
    drop(b);
    // Make it what version 3 wrote: no paused queues.
    let file = as_written_before(
        dir.path(),
        "DROP TABLE paused_queues; PRAGMA user_version = 3;",
    );

    let b = open(dir.path()).unwrap();
    assert!(
        b.paused_queues().await.unwrap().is_empty(),
        "none on upgrade"
    );
    assert_eq!(b.queue_depth("old", 10).await.unwrap(), 1, "its work kept");
    assert!(b.pause_queue("old").await.unwrap());
    let reserve = || {
        b.reserve(ReserveRequest {
            queue: "old".into(),
            max: 1,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
    };
    assert!(reserve().await.unwrap().is_empty());
    assert!(b.resume_queue("old").await.unwrap());
    assert_eq!(reserve().await.unwrap().len(), 1);
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}

/// Version 6 had no trace contexts: its jobs open untraced and run on, and traced jobs
/// enqueued after the upgrade keep theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_6_database_gets_job_traces_with_its_work_kept() {
    const TRACE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path()).unwrap();
    let old = b
        .enqueue(EnqueueRequest {
            run: RunName::new("v6/1").unwrap(),
            items: vec![EnqueueItem::Chain(vec![
                JobSpec::new("k", "null").queue("v6"),
                JobSpec::new("k", "null").queue("v6"),
            ])],
            on_done: None,
        })
        .await
        .unwrap();
    drop(b);
    let file = as_written_before(
        dir.path(),
        "DROP TABLE job_traces; PRAGMA user_version = 6;",
    );

    let b = open(dir.path()).unwrap();
    let reserve = || {
        b.reserve(ReserveRequest {
            queue: "v6".into(),
            max: 10,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
    };
    let first = reserve().await.unwrap();
    assert_eq!(first.len(), 1, "its work kept");
    assert_eq!(first[0].trace, None);
    b.complete(vec![Completion {
        lease: first[0].lease(),
        resolution: Resolution::SucceededTraced {
            result: "1".into(),
            trace: TRACE.into(),
        },
    }])
    .await
    .unwrap();
    let second = reserve().await.unwrap();
    assert_eq!(second[0].id, old[0].ids[1]);
    assert_eq!(
        second[0].trace.as_deref(),
        Some(TRACE),
        "traced from now on"
    );
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_7_database_gets_limits_with_its_work_kept() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path()).unwrap();
    b.enqueue(EnqueueRequest {
        run: RunName::new("v7/1").unwrap(),
        items: vec![
            EnqueueItem::Job(JobSpec::new("k", "null").queue("old")),
            EnqueueItem::Job(JobSpec::new("k", "null").queue("old")),
        ],
        on_done: None,
    })
    .await
    .unwrap();
    drop(b);
    // Make it what version 7 wrote: no limits.
    let file = as_written_before(
        dir.path(),
        "DROP TABLE limits; DROP TABLE limit_starts; PRAGMA user_version = 7;",
    );

    let b = open(dir.path()).unwrap();
    assert!(b.limits().await.unwrap().is_empty(), "none on upgrade");
    assert_eq!(b.queue_depth("old", 10).await.unwrap(), 2, "its work kept");
    let cap = tranche_types::Limit {
        scope: tranche_types::LimitScope::Queue("old".into()),
        starts: None,
        running: Some(1),
    };
    assert!(b.put_limit(&cap).await.unwrap());
    let reserve = || {
        b.reserve(ReserveRequest {
            queue: "old".into(),
            max: 10,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
    };
    assert_eq!(reserve().await.unwrap().len(), 1, "the cap holds");
    assert!(reserve().await.unwrap().is_empty());
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}

/// Version 9 added records and gates (workflows' commits): a version 8 file gets them
/// empty, keeps its work, and a commit then writes a record and releases a gate.
#[tokio::test]
async fn a_version_8_database_gets_records_and_gates_with_its_work_kept() {
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path()).unwrap();
    b.enqueue(EnqueueRequest {
        run: RunName::new("v8/1").unwrap(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", "null").queue("old"))],
        on_done: None,
    })
    .await
    .unwrap();
    drop(b);
    // Make it what version 8 wrote: no records, no gates.
    let file = as_written_before(
        dir.path(),
        "DROP TABLE records; DROP TABLE gates; DROP TABLE record_ends; PRAGMA user_version = 8;",
    );

    let b = open(dir.path()).unwrap();
    assert_eq!(b.queue_depth("old", 10).await.unwrap(), 1, "its work kept");
    assert_eq!(b.records(&["wf/x".into()]).await.unwrap(), vec![None]);
    let gate = b
        .enqueue(EnqueueRequest {
            run: RunName::new("v8/2").unwrap(),
            items: vec![EnqueueItem::Gate {
                awaits: 1,
                job: JobSpec::new("join", "null").queue("joins"),
            }],
            on_done: None,
        })
        .await
        .unwrap()[0]
        .ids[0];
    b.commit(tranche_types::Commit {
        records: vec![tranche_types::RecordWrite::new("wf/x", 0, "{}")],
        arrive: vec![gate],
        ..tranche_types::Commit::default()
    })
    .await
    .unwrap();
    assert_eq!(
        b.queue_depth("joins", 10).await.unwrap(),
        1,
        "the gate opened"
    );
    assert_eq!(
        b.records(&["wf/x".into()]).await.unwrap()[0]
            .as_ref()
            .map(|r| r.version),
        Some(1)
    );
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}

/// Version 10 added `record_ends` (records written ended go with the retention): a
/// version 9 file keeps its records, kept, and a record then written ended is pruned.
#[tokio::test]
async fn a_version_9_database_keeps_its_records_and_prunes_ended_ones() {
    use tranche_types::{Commit, RecordWrite, Timestamp};
    let dir = tempfile::tempdir().unwrap();
    let b = open(dir.path()).unwrap();
    let put = |key: &str, ended: bool| Commit {
        records: vec![RecordWrite::new(key, 0, "{}").ended(ended)],
        ..Commit::default()
    };
    b.commit(put("wf/old", false)).await.unwrap();
    drop(b);
    let file = as_written_before(
        dir.path(),
        "DROP TABLE record_ends; PRAGMA user_version = 9;",
    );

    let b = open(dir.path()).unwrap();
    b.commit(put("wf/new", true)).await.unwrap();
    let pruned = b.prune(Timestamp(i64::MAX / 2), 100).await.unwrap();
    assert_eq!(pruned.records, 1);
    let found = b
        .records(&["wf/old".into(), "wf/new".into()])
        .await
        .unwrap();
    assert!(found[0].is_some() && found[1].is_none(), "{found:?}");
    drop(b);
    assert_eq!(user_version(&file), CURRENT);
}
