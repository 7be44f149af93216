//! Enqueue: batches in one transaction, unique keys, not-before times, validation.

use std::time::Duration;

use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, JobId, JobSpec, JobState, RunName};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    batch_is_counted(make).await;
    unique_key_returns_existing_job(make).await;
    unique_keys_are_listed_page_by_page(make).await;
    not_before_delays_the_job(make).await;
    invalid_item_rejects_the_whole_batch(make).await;
    over_long_names_are_refused(make).await;
}

async fn batch_is_counted(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let items: Vec<_> = (0..1000)
        .map(|i| EnqueueItem::Job(job("noop", &i.to_string())))
        .collect();
    let out = enqueue(&*b, "enq/batch", items).await;
    assert_eq!(out.len(), 1000);
    let mut ids: Vec<_> = out.iter().map(|e| e.ids[0]).collect();
    ids.dedup();
    assert_eq!(ids.len(), 1000, "every job gets its own id");
    let p = progress(&*b, "enq/batch").await;
    assert_eq!(p.total, 1000);
    assert_eq!(counts(&p), (0, 1000, 0, 0, 0, 0));
    let rec = b.job(out[7].ids[0]).await.unwrap().expect("job exists");
    assert_eq!(
        (rec.kind.as_str(), rec.args.as_str(), rec.state),
        ("noop", "7", JobState::Available)
    );
}

async fn unique_key_returns_existing_job(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let first = enqueue(
        &*b,
        "enq/unique",
        vec![EnqueueItem::Job(job("mail", "1").unique_key("client-42"))],
    )
    .await;
    let again = enqueue(
        &*b,
        "enq/unique",
        vec![
            EnqueueItem::Job(job("mail", "2").unique_key("client-42")),
            EnqueueItem::Job(job("mail", "3").unique_key("client-43")),
        ],
    )
    .await;
    assert!(!first[0].existed);
    assert!(again[0].existed, "same key in the same run is a no-op");
    assert_eq!(again[0].ids, first[0].ids, "and returns the existing job");
    assert!(!again[1].existed);
    assert_eq!(progress(&*b, "enq/unique").await.total, 2);
    // The same key in another run is another job.
    let other = enqueue(
        &*b,
        "enq/unique-2",
        vec![EnqueueItem::Job(job("mail", "1").unique_key("client-42"))],
    )
    .await;
    assert!(!other[0].existed);

    // What exists can be read without enqueueing.
    let keys = ["client-43", "client-44", "client-42"].map(String::from);
    let run = RunName::new("enq/unique").unwrap();
    assert_eq!(
        b.unique_jobs(&run, &keys).await.unwrap(),
        [Some(again[1].ids[0]), None, Some(first[0].ids[0])]
    );
    let nowhere = RunName::new("enq/no-such-run").unwrap();
    assert_eq!(
        b.unique_jobs(&nowhere, &keys).await.unwrap(),
        [None, None, None]
    );
    assert!(b.unique_jobs(&run, &[]).await.unwrap().is_empty());
    assert_eq!(
        progress(&*b, "enq/unique").await.total,
        2,
        "nothing was added"
    );
}

async fn unique_keys_are_listed_page_by_page(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let mut items: Vec<EnqueueItem> = (0..7)
        .map(|i| EnqueueItem::Job(job("mail", "x").unique_key(format!("client:C{i}"))))
        .collect();
    items.push(EnqueueItem::Job(job("mail", "no key")));
    let ids: Vec<_> = enqueue(&*b, "enq/list", items)
        .await
        .iter()
        .map(|e| e.ids[0])
        .collect();
    enqueue(
        &*b,
        "enq/list-other",
        vec![EnqueueItem::Job(job("mail", "x").unique_key("client:Z"))],
    )
    .await;
    let run = RunName::new("enq/list").unwrap();
    let (mut seen, mut cursor, mut pages) = (std::collections::BTreeMap::new(), String::new(), 0);
    loop {
        let (page, next) = b.unique_keys(&run, &cursor, 2).await.unwrap();
        seen.extend(page);
        pages += 1;
        assert!(pages < 100, "the listing ends");
        match next {
            Some(n) => cursor = n,
            None => break,
        }
    }
    let expected: std::collections::BTreeMap<String, JobId> =
        (0..7).map(|i| (format!("client:C{i}"), ids[i])).collect();
    assert_eq!(seen, expected);
    let nowhere = RunName::new("enq/no-such-run").unwrap();
    let (page, next) = b.unique_keys(&nowhere, "", 10).await.unwrap();
    assert!(page.is_empty() && next.is_none());
}

async fn not_before_delays_the_job(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    let at = clock.now().plus(Duration::from_secs(60));
    enqueue(
        &*b,
        "enq/later",
        vec![EnqueueItem::Job(job("noop", "null").not_before(at))],
    )
    .await;
    assert!(
        take(&*b, "default", 10).await.is_empty(),
        "not runnable before its time"
    );
    clock.advance(Duration::from_secs(61));
    assert_eq!(take(&*b, "default", 10).await.len(), 1);
}

async fn invalid_item_rejects_the_whole_batch(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let err = b
        .enqueue(EnqueueRequest {
            run: run("enq/bad"),
            items: vec![
                EnqueueItem::Job(job("noop", "1")),
                EnqueueItem::Job(job("noop", "2").max_attempts(0)),
            ],
            on_done: None,
        })
        .await
        .expect_err("max_attempts 0 is invalid");
    assert!(
        matches!(
            err,
            BackendError::Invalid {
                field: "max_attempts",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("expected at least 1"), "{err}");
    let p = b.run_progress(&run("enq/bad")).await.unwrap();
    assert_eq!(
        p.map_or(0, |p| p.total),
        0,
        "nothing of a failed batch is enqueued"
    );
    assert!(take(&*b, "default", 10).await.is_empty());
}

/// Kinds, queues and unique keys are bounded (they become metric labels and keys): one
/// over its limit fails the batch with the field, the limit and the length got.
async fn over_long_names_are_refused(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let at_limit = job(&"k".repeat(JobSpec::MAX_KIND_LEN), "1")
        .queue("q".repeat(JobSpec::MAX_QUEUE_LEN))
        .unique_key("u".repeat(JobSpec::MAX_UNIQUE_KEY_LEN));
    enqueue(&*b, "enq/long", vec![EnqueueItem::Job(at_limit)]).await;
    let over = [
        (
            "kind",
            job(&"k".repeat(JobSpec::MAX_KIND_LEN + 1), "2"),
            "129 bytes",
        ),
        (
            "queue",
            job("noop", "3").queue("q".repeat(1 << 20)),
            "1048576 bytes",
        ),
        (
            "unique_key",
            job("noop", "4").unique_key("u".repeat(JobSpec::MAX_UNIQUE_KEY_LEN + 1)),
            "513 bytes",
        ),
    ];
    for (field, spec, got) in over {
        let err = b
            .enqueue(EnqueueRequest {
                run: run("enq/long"),
                items: vec![
                    EnqueueItem::Job(job("noop", "5")),
                    EnqueueItem::Chain(vec![job("noop", "6"), spec]),
                ],
                on_done: None,
            })
            .await
            .expect_err("an over-long name is invalid");
        match &err {
            BackendError::Invalid {
                field: f,
                expected,
                got: g,
            } => {
                assert_eq!(*f, field, "{err}");
                assert!(expected.starts_with("at most "), "{err}");
                assert_eq!(g, got, "{err}");
            }
            _ => panic!("expected Invalid, got {err}"),
        }
    }
    let p = progress(&*b, "enq/long").await;
    assert_eq!(p.total, 1, "only the job at the limits was enqueued");
}
