//! What only the Redis backend has: prefix checks, on-done names and job kinds checked
//! up front, the retention of ended data, and where gates and records are kept.

use crate::server;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tranche_backend::Backend;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{
    BackendError, Commit, Completion, EnqueueItem, EnqueueRequest, JobId, JobSpec, RecordWrite,
    ReserveRequest, Resolution, RunName, Timestamp,
};

fn shared() -> Option<&'static str> {
    static SERVER: OnceLock<Option<(tempfile::TempDir, server::Server, String)>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if !server::available() {
                return None;
            }
            let dir = tempfile::tempdir().expect("temp dir");
            let s = server::Server::start(dir.path(), false);
            let url = s.url();
            Some((dir, s, url))
        })
        .as_ref()
        .map(|(_, _, url)| url.as_str())
}

/// The bucket hash holding job `id`: its id without the last three digits.
fn bucket_key(prefix: &str, id: i64) -> String {
    let high = if id < 1000 {
        String::new()
    } else {
        (id / 1000).to_string()
    };
    format!("{prefix}b:{high}")
}

fn options(url: &str, prefix: &str) -> RedisOptions {
    RedisOptions {
        url: url.to_string(),
        prefix: prefix.to_string(),
        retention: Duration::from_secs(60),
        ..RedisOptions::default()
    }
}

#[tokio::test]
async fn a_password_in_the_url_is_refused_without_being_shown() {
    // Refused before any connection: no server needed.
    for url in [
        "redis://:hunter2-secret@127.0.0.1:6379/0",
        "redis://admin:hunter2-secret@127.0.0.1:6379",
    ] {
        let err = RedisBackend::connect(options(url, "{t}:"))
            .await
            .expect_err("a password in the URL is refused");
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("redis://***@127.0.0.1:6379"), "{shown}");
        assert!(shown.contains("it holds a password"), "{shown}");
    }
}

#[tokio::test]
async fn prefix_needs_one_hash_tag() {
    let Some(url) = shared() else { return };
    for bad in ["tranche:", "{a}{b}:"] {
        let err = RedisBackend::connect(options(url, bad))
            .await
            .expect_err("refused");
        assert!(
            matches!(
                err,
                BackendError::Invalid {
                    field: "prefix",
                    ..
                }
            ),
            "{err}"
        );
    }
}

#[tokio::test]
async fn on_done_run_name_is_checked_up_front() {
    let Some(url) = shared() else { return };
    let b = RedisBackend::connect(options(url, &server::fresh_prefix()))
        .await
        .unwrap();
    let long = RunName::new("r".repeat(198)).unwrap();
    let err = b
        .enqueue(EnqueueRequest {
            run: long.clone(),
            items: vec![EnqueueItem::Job(JobSpec::new("x", "1"))],
            on_done: Some(JobSpec::new("hook", "{}")),
        })
        .await
        .expect_err("the on-done run name would be too long");
    assert!(
        matches!(
            err,
            BackendError::Invalid {
                field: "on_done",
                ..
            }
        ),
        "{err}"
    );
    assert!(b.run_progress(&long).await.unwrap().is_none());
}

#[tokio::test]
async fn kinds_with_control_characters_are_refused() {
    // A job's kind shares one packed field with its args (see packed.rs), split at a
    // control character that a kind therefore may not hold.
    let Some(url) = shared() else { return };
    let b = RedisBackend::connect(options(url, &server::fresh_prefix()))
        .await
        .unwrap();
    let run = RunName::new("kinds").unwrap();
    let err = b
        .enqueue(EnqueueRequest {
            run: run.clone(),
            items: vec![EnqueueItem::Job(JobSpec::new("a\u{1f}b", "1"))],
            on_done: None,
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(
            err,
            BackendError::Invalid {
                field: "job kind",
                ..
            }
        ),
        "{err}"
    );
    assert!(b.run_progress(&run).await.unwrap().is_none());
    // Args may hold it: they come last in the packed field.
    let args = "\"a\u{1f}b\"";
    b.enqueue(EnqueueRequest {
        run: run.clone(),
        items: vec![EnqueueItem::Job(JobSpec::new("k", args))],
        on_done: None,
    })
    .await
    .unwrap();
    let got = b
        .reserve(ReserveRequest {
            queue: JobSpec::DEFAULT_QUEUE.into(),
            max: 1,
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!((got[0].kind.as_str(), got[0].args.as_str()), ("k", args));
}

#[tokio::test]
async fn ended_jobs_and_finished_runs_expire() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let b = Arc::new(RedisBackend::connect(options(url, &prefix)).await.unwrap());
    let run = RunName::new("ttl/a").unwrap();
    let out = b
        .enqueue(EnqueueRequest {
            run: run.clone(),
            items: vec![
                EnqueueItem::Job(JobSpec::new("x", "1")),
                EnqueueItem::Job(JobSpec::new("x", "2")),
            ],
            on_done: None,
        })
        .await
        .unwrap();
    let conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ttl = |key: String| {
        let mut conn = conn.clone();
        async move {
            redis::cmd("TTL")
                .arg(key)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap()
        }
    };
    let (a, c) = (out[0].ids[0].0, out[1].ids[0].0);
    // Jobs live in buckets of a thousand consecutive ids.
    let bucket = |id: i64| bucket_key(&prefix, id);
    assert_eq!(bucket(a), bucket(c), "consecutive ids share a bucket");
    assert_eq!(ttl(bucket(a)).await, -1, "live jobs are kept");
    let jobs = b
        .reserve(ReserveRequest {
            queue: "default".into(),
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
    assert_eq!(
        ttl(bucket(a)).await,
        -1,
        "a bucket with a job that has not ended is kept"
    );
    assert!(b.job(jobs[0].id).await.unwrap().is_some());
    assert_eq!(
        ttl(format!("{prefix}r:ttl/a")).await,
        -1,
        "an open run is kept"
    );
    b.cancel(tranche_types::CancelTarget::Run(run.clone()), "done")
        .await
        .unwrap();
    let t = ttl(format!("{prefix}r:ttl/a")).await;
    assert!((1..=60).contains(&t), "a finished run expires: ttl {t}");
    let t = ttl(bucket(c)).await;
    assert!(
        (1..=60).contains(&t),
        "a bucket whose jobs all ended expires: ttl {t}"
    );
    assert_eq!(b.retry_run(&run).await.unwrap(), 0, "nothing failed");
}

#[tokio::test]
async fn a_revived_job_keeps_its_bucket_and_texts_round_trip() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let b = Arc::new(RedisBackend::connect(options(url, &prefix)).await.unwrap());
    let run = RunName::new("ttl/revive").unwrap();
    // A queue name with the record's separator and an args text with every kind of
    // character: the record keeps the queue last and the texts in fields of their own.
    let queue = "odd,queue\u{1e},".to_string();
    let mut spec = JobSpec::new("x", "{\"s\":\"a,b\u{1f}\u{1e}\\n\"}");
    spec.queue = queue.clone();
    spec.max_attempts = 1;
    spec.priority = -3;
    spec.unique_key = Some("k,\u{1e}".into());
    let id = b
        .enqueue(EnqueueRequest {
            run: run.clone(),
            items: vec![EnqueueItem::Job(spec.clone())],
            on_done: None,
        })
        .await
        .unwrap()[0]
        .ids[0];
    let jobs = b
        .reserve(ReserveRequest {
            queue: queue.clone(),
            max: 1,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].args, spec.args);
    b.complete(vec![Completion {
        lease: jobs[0].lease(),
        resolution: Resolution::Failed {
            error: "boom, \u{1e} twice".into(),
        },
    }])
    .await
    .unwrap();
    let record = b.job(id).await.unwrap().expect("the failed job");
    assert_eq!(record.queue, queue);
    assert_eq!(record.args, spec.args);
    assert_eq!(record.unique_key, spec.unique_key);
    assert_eq!(record.error.as_deref(), Some("boom, \u{1e} twice"));
    assert_eq!(record.errors.len(), 1);
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let bucket = bucket_key(&prefix, id.0);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&bucket)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        (1..=60).contains(&ttl),
        "all ended: the bucket expires, ttl {ttl}"
    );
    assert_eq!(b.retry_run(&run).await.unwrap(), 1);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&bucket)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "a revived job's bucket is kept");
    let again = b
        .reserve(ReserveRequest {
            queue,
            max: 1,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].attempt, 1,
        "a revived job starts its attempts afresh"
    );
}

/// A run cancel walks the id ranges of every enqueue into the run, a thousand jobs at a
/// time: jobs past the first range (or the first thousand) are cancelled too.
#[tokio::test]
async fn a_run_enqueued_in_several_calls_is_cancelled_whole() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let b = Arc::new(RedisBackend::connect(options(url, &prefix)).await.unwrap());
    let run = RunName::new("cancel/ranges").unwrap();
    for batch in [1, 1200] {
        b.enqueue(EnqueueRequest {
            run: run.clone(),
            items: (0..batch)
                .map(|i| EnqueueItem::Job(JobSpec::new("x", i.to_string())))
                .collect(),
            on_done: None,
        })
        .await
        .unwrap();
    }
    let n = b
        .cancel(tranche_types::CancelTarget::Run(run.clone()), "stop")
        .await
        .unwrap();
    assert_eq!(n, 1201);
    let p = b.run_progress(&run).await.unwrap().unwrap();
    assert_eq!((p.cancelled, p.available), (1201, 0));
}

/// A gate's count of arrivals is the field `g<id>` of its job's bucket: dropped when
/// the gate opens, or with its job (a delete, a prune) when it never does; an arrival
/// at an id that is no gate writes nothing. A record is the hash `P rec:<key>`.
#[tokio::test]
async fn a_gate_count_goes_with_its_job_and_records_are_hashes() {
    let Some(url) = shared() else { return };
    let prefix = server::fresh_prefix();
    let b = Arc::new(RedisBackend::connect(options(url, &prefix)).await.unwrap());
    let run = RunName::new("gates/a").unwrap();
    let gate = || EnqueueItem::Gate {
        awaits: 2,
        job: JobSpec::new("join", "{}").queue("joins"),
    };
    let out = b
        .enqueue(EnqueueRequest {
            run: run.clone(),
            items: vec![gate(), gate(), gate()],
            on_done: None,
        })
        .await
        .unwrap();
    let (opened, deleted, pruned) = (out[0].ids[0], out[1].ids[0], out[2].ids[0]);
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut left = async |id: JobId| -> Option<i64> {
        redis::cmd("HGET")
            .arg(bucket_key(&prefix, id.0))
            .arg(format!("g{}", id.0))
            .query_async(&mut conn)
            .await
            .unwrap()
    };
    assert_eq!(left(opened).await, Some(2));
    let unknown = JobId(7_654_321);
    b.commit(Commit {
        records: vec![RecordWrite::new("wf/gates", 0, "{\"n\":1}")],
        arrive: vec![opened, opened, deleted, unknown],
        ..Commit::default()
    })
    .await
    .unwrap();
    assert_eq!(left(opened).await, None, "an open gate has no count");
    assert_eq!(left(deleted).await, Some(1));
    assert_eq!(left(unknown).await, None);
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let exists: i64 = redis::cmd("EXISTS")
        .arg(bucket_key(&prefix, unknown.0))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "an arrival at no gate writes nothing");
    let record: (String, String) = redis::cmd("HMGET")
        .arg(format!("{prefix}rec:wf/gates"))
        .arg("v")
        .arg("d")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(record, ("1".to_string(), "{\"n\":1}".to_string()));
    let ttl: i64 = redis::cmd("TTL")
        .arg(format!("{prefix}rec:wf/gates"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "a record kept has no expiry");
    // Written ended it expires after the retention (60 s here); written again kept,
    // it is kept again.
    let mut ttl = async |version: u64, ended: bool| -> i64 {
        b.commit(Commit {
            records: vec![RecordWrite::new("wf/gates", version, "{}").ended(ended)],
            ..Commit::default()
        })
        .await
        .unwrap();
        redis::cmd("TTL")
            .arg(format!("{prefix}rec:wf/gates"))
            .query_async(&mut conn)
            .await
            .unwrap()
    };
    let ended = ttl(1, true).await;
    assert!((1..=60).contains(&ended), "{ended}");
    assert_eq!(ttl(2, false).await, -1);

    let joins = b
        .reserve(ReserveRequest {
            queue: "joins".into(),
            max: 10,
            lease: Duration::from_secs(10),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].id, opened);
    b.complete(vec![Completion {
        lease: joins[0].lease(),
        resolution: Resolution::Succeeded {
            result: "null".into(),
        },
    }])
    .await
    .unwrap();
    // The workflow is cancelled: its closed gates never open.
    b.cancel(tranche_types::CancelTarget::Run(run.clone()), "stop")
        .await
        .unwrap();
    let mut left = async |id: JobId| -> Option<i64> {
        redis::cmd("HGET")
            .arg(bucket_key(&prefix, id.0))
            .arg(format!("g{}", id.0))
            .query_async(&mut conn)
            .await
            .unwrap()
    };
    assert_eq!(
        (left(deleted).await, left(pruned).await),
        (Some(1), Some(2))
    );
    assert!(b.delete_job(deleted).await.unwrap());
    assert_eq!(left(deleted).await, None, "deleted with its job");
    let pruned_runs = b.prune(Timestamp(i64::MAX / 2), 10).await.unwrap().runs;
    assert_eq!(pruned_runs, 1);
    assert_eq!(left(pruned).await, None, "pruned with its job");
}
