//! Commits: a step's completion with the records it writes, the jobs it enqueues and
//! the gates it arrives at, applied together or not at all (the seam workflows stand
//! on, see `docs/workflows.md`).

use std::sync::Arc;

use tranche_types::{
    BackendError, Commit, CommitAck, Completion, EnqueueItem, EnqueueRequest, JobId, JobState,
    RecordWrite, Timestamp,
};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    a_completion_and_its_successors_commit_together(make).await;
    a_stale_completion_applies_nothing(make).await;
    a_conflict_applies_nothing(make).await;
    an_invalid_enqueue_applies_nothing(make).await;
    records_are_versioned(make).await;
    ended_records_read_as_any_and_kept_ones_outlive_prune(make).await;
    concurrent_writers_of_one_version_serialise(make).await;
    a_gate_opens_at_its_last_arrival(make).await;
    a_gate_of_many_counts_each_arrival_once(make).await;
}

fn request(run_name: &str, items: Vec<EnqueueItem>) -> EnqueueRequest {
    EnqueueRequest {
        run: run(run_name),
        items,
        on_done: None,
    }
}

fn write(key: &str, expect: u64, value: &str) -> RecordWrite {
    RecordWrite::new(key, expect, value)
}

fn done(lease: LeaseRef, result: &str) -> Option<Completion> {
    Some(Completion {
        lease,
        resolution: ok(result),
    })
}

async fn record(b: &dyn Backend, key: &str) -> Option<(u64, String)> {
    b.records(&[key.to_string()]).await.expect("records")[0]
        .clone()
        .map(|r| (r.version, r.value))
}

/// Start: a record and the first step in one commit with no completion. Then the
/// step's completion brings the next step and the record's next version.
async fn a_completion_and_its_successors_commit_together(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let started = b
        .commit(Commit {
            records: vec![write("wf/1", 0, "{\"status\":\"RUNNING\"}")],
            enqueue: Some(request("wf/1", vec![EnqueueItem::Job(job("t1", "{}"))])),
            ..Commit::default()
        })
        .await
        .expect("start");
    let CommitAck::Applied(enqueued) = started else {
        panic!("a commit without a completion is never stale: {started:?}")
    };
    assert_eq!(enqueued.len(), 1);
    let t1 = take(&*b, "default", 10).await;
    assert_eq!(t1.len(), 1);
    assert_eq!(t1[0].id, enqueued[0].ids[0]);
    let ack = b
        .commit(Commit {
            completion: done(t1[0].lease(), "{\"v\":1}"),
            records: vec![write("wf/1", 1, "{\"status\":\"RUNNING\",\"at\":\"t2\"}")],
            enqueue: Some(request(
                "wf/1",
                vec![EnqueueItem::Job(job("t2", "{}").unique_key("t2"))],
            )),
            arrive: vec![],
        })
        .await
        .expect("commit");
    let CommitAck::Applied(next) = ack else {
        panic!("expected applied, got {ack:?}")
    };
    let t1_after = b.job(t1[0].id).await.unwrap().unwrap();
    assert_eq!(t1_after.state, JobState::Succeeded);
    assert_eq!(t1_after.result.as_deref(), Some("{\"v\":1}"));
    assert_eq!(
        record(&*b, "wf/1").await,
        Some((2, "{\"status\":\"RUNNING\",\"at\":\"t2\"}".into()))
    );
    let t2 = take(&*b, "default", 10).await;
    assert_eq!(t2.len(), 1);
    assert_eq!(t2[0].id, next[0].ids[0]);
    assert_eq!(t2[0].kind, "t2");
    assert_eq!(counts(&progress(&*b, "wf/1").await), (0, 0, 1, 1, 0, 0));
}

async fn a_stale_completion_applies_nothing(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(&*b, "wf/2", vec![EnqueueItem::Job(job("t1", "{}"))]).await;
    let first = take(&*b, "default", 1).await;
    // The lease expires and the job is reserved again: the first attempt is stale.
    clock.advance(LEASE * 2);
    let second = take(&*b, "default", 1).await;
    assert_eq!(second.len(), 1);
    let ack = b
        .commit(Commit {
            completion: done(first[0].lease(), "{}"),
            records: vec![write("wf/2", 0, "stale")],
            enqueue: Some(request("wf/2", vec![EnqueueItem::Job(job("t2", "{}"))])),
            arrive: vec![],
        })
        .await
        .expect("commit");
    assert_eq!(ack, CommitAck::Stale);
    assert_eq!(record(&*b, "wf/2").await, None, "no record written");
    assert_eq!(
        counts(&progress(&*b, "wf/2").await),
        (0, 0, 1, 0, 0, 0),
        "nothing enqueued, the second attempt still running"
    );
}

async fn a_conflict_applies_nothing(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    enqueue(&*b, "wf/3", vec![EnqueueItem::Job(job("t1", "{}"))]).await;
    let t1 = take(&*b, "default", 1).await;
    let commit = |expect| Commit {
        completion: done(t1[0].lease(), "{}"),
        records: vec![write("wf/3", expect, "{}")],
        enqueue: Some(request("wf/3", vec![EnqueueItem::Job(job("t2", "{}"))])),
        arrive: vec![],
    };
    match b.commit(commit(4)).await {
        Err(BackendError::Conflict {
            key,
            expected,
            found,
        }) => assert_eq!((key.as_str(), expected, found), ("wf/3", 4, 0)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let job1 = b.job(t1[0].id).await.unwrap().unwrap();
    assert_eq!(
        job1.state,
        JobState::Running,
        "the completion was not applied"
    );
    assert_eq!(counts(&progress(&*b, "wf/3").await), (0, 0, 1, 0, 0, 0));
    // Decided again on what is there, it applies.
    assert!(matches!(
        b.commit(commit(0)).await.unwrap(),
        CommitAck::Applied(_)
    ));
    assert_eq!(counts(&progress(&*b, "wf/3").await), (0, 1, 0, 1, 0, 0));
}

async fn an_invalid_enqueue_applies_nothing(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    enqueue(&*b, "wf/4", vec![EnqueueItem::Job(job("t1", "{}"))]).await;
    let t1 = take(&*b, "default", 1).await;
    let err = b
        .commit(Commit {
            completion: done(t1[0].lease(), "{}"),
            records: vec![write("wf/4", 0, "{}")],
            enqueue: Some(request(
                "wf/4",
                vec![EnqueueItem::Job(job("t2", "{}").max_attempts(0))],
            )),
            arrive: vec![],
        })
        .await
        .expect_err("an invalid job fails the commit");
    assert!(
        matches!(err, BackendError::Invalid { .. }),
        "expected invalid, got {err:?}"
    );
    assert_eq!(record(&*b, "wf/4").await, None);
    assert_eq!(
        b.job(t1[0].id).await.unwrap().unwrap().state,
        JobState::Running
    );
}

async fn records_are_versioned(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert_eq!(
        b.records(&["a".into(), "b".into()]).await.unwrap(),
        vec![None, None]
    );
    let put = |key: &str, expect, value: &str| Commit {
        records: vec![write(key, expect, value)],
        ..Commit::default()
    };
    b.commit(put("a", 0, "one")).await.unwrap();
    b.commit(put("a", 1, "two")).await.unwrap();
    b.commit(put("b", 0, "b1")).await.unwrap();
    assert!(matches!(
        b.commit(put("a", 0, "again")).await,
        Err(BackendError::Conflict { found: 2, .. })
    ));
    assert_eq!(record(&*b, "a").await, Some((2, "two".into())));
    assert_eq!(record(&*b, "b").await, Some((1, "b1".into())));
    // Two records in one commit: the second's conflict keeps the first unwritten.
    assert!(b
        .commit(Commit {
            records: vec![write("a", 2, "three"), write("b", 7, "x")],
            ..Commit::default()
        })
        .await
        .is_err());
    assert_eq!(record(&*b, "a").await, Some((2, "two".into())));
    let long = "k".repeat(RecordWrite::MAX_KEY_LEN + 1);
    assert!(matches!(
        b.commit(put(&long, 0, "v")).await,
        Err(BackendError::Invalid { .. })
    ));
}

/// A record written ended reads as any other; written again without it, it is kept
/// again; a prune, however late its cut-off, never takes a kept record. How an ended
/// one goes is each backend's (SQLite's prune, Redis's key expiry): their own tests
/// show it.
async fn ended_records_read_as_any_and_kept_ones_outlive_prune(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let put = |w: RecordWrite| Commit {
        records: vec![w],
        ..Commit::default()
    };
    b.commit(put(write("kept", 0, "k"))).await.unwrap();
    b.commit(put(write("ended", 0, "e").ended(true)))
        .await
        .unwrap();
    b.commit(put(write("again", 0, "a1").ended(true)))
        .await
        .unwrap();
    assert_eq!(record(&*b, "ended").await, Some((1, "e".into())));
    b.commit(put(write("again", 1, "a2"))).await.unwrap();
    let far = Timestamp(i64::MAX / 2);
    b.prune(far, 1_000).await.unwrap();
    assert_eq!(record(&*b, "kept").await, Some((1, "k".into())));
    assert_eq!(record(&*b, "again").await, Some((2, "a2".into())));
    // Its version goes on from the one read, ended or not.
    assert!(matches!(
        b.commit(put(write("kept", 0, "x").ended(true))).await,
        Err(BackendError::Conflict { found: 1, .. })
    ));
}

async fn concurrent_writers_of_one_version_serialise(make: &dyn MakeBackend) {
    let b = real(make).await;
    b.commit(Commit {
        records: vec![write("shared", 0, "0")],
        ..Commit::default()
    })
    .await
    .unwrap();
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                b.commit(Commit {
                    records: vec![write("shared", 1, &i.to_string())],
                    ..Commit::default()
                })
                .await
            })
        })
        .collect();
    let mut applied = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => applied += 1,
            Err(BackendError::Conflict { found: 2, .. }) => {}
            Err(e) => panic!("expected applied or a conflict, got {e}"),
        }
    }
    assert_eq!(applied, 1, "one writer of version 1 wins");
    assert_eq!(record(&*b, "shared").await.unwrap().0, 2);
}

async fn a_gate_opens_at_its_last_arrival(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "wf/gate",
        vec![
            EnqueueItem::Gate {
                awaits: 2,
                job: job("join", "{}").queue("system").unique_key("join"),
            },
            EnqueueItem::Job(job("a", "{}")),
            EnqueueItem::Job(job("b", "{}")),
            EnqueueItem::Gate {
                awaits: 0,
                job: job("open", "{}").queue("open"),
            },
        ],
    )
    .await;
    let gate = out[0].ids[0];
    assert_eq!(b.job(gate).await.unwrap().unwrap().state, JobState::Pending);
    let open = take(&*b, "open", 10).await;
    assert_eq!(open.len(), 1, "a gate awaiting nothing is open at once");
    assert_eq!(open[0].input.as_deref(), Some("[]"));
    // The same gate enqueued again under its key is the first one.
    let again = enqueue(
        &*b,
        "wf/gate",
        vec![EnqueueItem::Gate {
            awaits: 2,
            job: job("join", "{}").queue("system").unique_key("join"),
        }],
    )
    .await;
    assert_eq!((again[0].ids[0], again[0].existed), (gate, true));
    let branches = take(&*b, "default", 10).await;
    assert_eq!(branches.len(), 2);
    let arrive = |lease| Commit {
        completion: done(lease, "{}"),
        arrive: vec![gate],
        ..Commit::default()
    };
    b.commit(arrive(branches[0].lease())).await.unwrap();
    assert!(
        take(&*b, "system", 10).await.is_empty(),
        "one arrival of two"
    );
    // A stale repeat of the same arrival does not count.
    assert_eq!(
        b.commit(arrive(branches[0].lease())).await.unwrap(),
        CommitAck::Stale
    );
    assert!(take(&*b, "system", 10).await.is_empty());
    b.commit(arrive(branches[1].lease())).await.unwrap();
    let join = take(&*b, "system", 10).await;
    assert_eq!(join.len(), 1);
    assert_eq!(join[0].id, gate);
    assert_eq!(join[0].input.as_deref(), Some("[]"));
    // Arrivals after it opened, or at a job that is no gate, change nothing.
    b.commit(Commit {
        arrive: vec![gate, JobId(987_654)],
        ..Commit::default()
    })
    .await
    .unwrap();
    assert_eq!(b.job(gate).await.unwrap().unwrap().state, JobState::Running);
}

/// A dynamic fork's join: many arrivals, in commits of their own and several in one,
/// each counted once.
async fn a_gate_of_many_counts_each_arrival_once(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    const N: u32 = 2_000;
    let out = enqueue(
        &*b,
        "wf/fan",
        vec![EnqueueItem::Gate {
            awaits: N,
            job: job("join", "{}").queue("system"),
        }],
    )
    .await;
    let gate = out[0].ids[0];
    for i in 0..N / 2 - 1 {
        let arrive = if i == 0 { vec![gate, gate] } else { vec![gate] };
        b.commit(Commit {
            arrive,
            ..Commit::default()
        })
        .await
        .unwrap();
    }
    assert!(take(&*b, "system", 10).await.is_empty(), "{} of {N}", N / 2);
    let tasks: Vec<_> = (0..N / 2 - 1)
        .map(|_| {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                b.commit(Commit {
                    arrive: vec![gate],
                    ..Commit::default()
                })
                .await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert!(
        take(&*b, "system", 10).await.is_empty(),
        "one arrival short"
    );
    b.commit(Commit {
        arrive: vec![gate],
        ..Commit::default()
    })
    .await
    .unwrap();
    assert_eq!(take(&*b, "system", 10).await.len(), 1);
}
