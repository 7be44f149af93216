//! Unique jobs within a window, across runs (`JobSpec::unique_for`; the rules are in
//! `tranche_types::unique`). Time moves on a manual clock only.

use std::time::Duration;

use tranche_types::{BackendError, CancelTarget, EnqueueItem, EnqueueRequest, JobId, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    a_duplicate_within_the_window_returns_the_job(make).await;
    a_new_window_starts_with_the_next_job(make).await;
    succeeded_jobs_count_failed_and_cancelled_ones_do_not(make).await;
    windowed_and_run_scoped_keys_do_not_meet(make).await;
    chains_and_groups_are_known_by_their_identity(make).await;
    misplaced_windows_are_refused(make).await;
}

const HOUR: Duration = Duration::from_secs(3600);
const MS: Duration = Duration::from_millis(1);

fn windowed(key: &str, window: Duration) -> EnqueueItem {
    EnqueueItem::Job(job("report", "null").unique_for(key, window))
}

/// One windowed job into `run`: its id, and whether it already existed.
async fn one(b: &dyn Backend, run: &str, key: &str, window: Duration) -> (JobId, bool) {
    let out = enqueue(b, run, vec![windowed(key, window)]).await;
    assert_eq!(out[0].ids.len(), 1, "a single job has one id");
    (out[0].ids[0], out[0].existed)
}

async fn a_duplicate_within_the_window_returns_the_job(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    let (first, existed) = one(&*b, "uq/1", "report-7", HOUR).await;
    assert!(!existed);

    // Another run, later, and a shorter window of its own: the first job's window
    // (an hour from its enqueue) is what counts.
    clock.advance(Duration::from_secs(30 * 60));
    let (again, existed) = one(&*b, "uq/2", "report-7", Duration::from_secs(60)).await;
    assert!(
        existed,
        "the same key within the window, in another run, is a duplicate"
    );
    assert_eq!(again, first, "and returns the existing job");
    assert_eq!(progress(&*b, "uq/2").await.total, 0, "nothing was added");

    // Twice in one request: the second finds the first.
    let out = enqueue(
        &*b,
        "uq/3",
        vec![windowed("report-8", HOUR), windowed("report-8", HOUR)],
    )
    .await;
    assert!(!out[0].existed && out[1].existed);
    assert_eq!(out[1].ids, out[0].ids);

    // Up to the last microsecond of the window, then a new job.
    clock.advance(Duration::from_secs(30 * 60) - MS);
    assert_eq!(one(&*b, "uq/4", "report-7", HOUR).await, (first, true));
    clock.advance(MS);
    let (next, existed) = one(&*b, "uq/4", "report-7", HOUR).await;
    assert!(!existed, "once the window has passed, a new job is created");
    assert_ne!(next, first);
    assert_eq!(progress(&*b, "uq/4").await.total, 1);
}

async fn a_new_window_starts_with_the_next_job(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    // A periodic producer, every ten minutes, with a 25-minute window, always into the
    // same run: one job per window, never a unique-key clash inside the run.
    let mut made = Vec::new();
    for _ in 0..7 {
        let (id, existed) = one(&*b, "uq/periodic", "tick", Duration::from_secs(25 * 60)).await;
        if !existed {
            made.push(id);
        }
        clock.advance(Duration::from_secs(10 * 60));
    }
    // Jobs at 0, 30 and 60 minutes; the ones between are duplicates.
    assert_eq!(made.len(), 3, "one job per window: {made:?}");
    assert_eq!(progress(&*b, "uq/periodic").await.total, 3);
}

async fn succeeded_jobs_count_failed_and_cancelled_ones_do_not(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let (done, _) = one(&*b, "uq/s", "done", HOUR).await;
    let leased = take(&*b, "default", 10).await;
    assert_eq!(leased.len(), 1);
    assert_eq!(
        resolve(&*b, leased[0].lease(), ok("1")).await,
        CompletionAck::Applied
    );
    assert_eq!(
        one(&*b, "uq/s", "done", HOUR).await,
        (done, true),
        "a job that already succeeded in the window still holds its key"
    );

    let (failed, _) = one(&*b, "uq/f", "failed", HOUR).await;
    let leased = take(&*b, "default", 10).await;
    let failure = Resolution::Failed {
        error: "broken".into(),
    };
    assert_eq!(
        resolve(&*b, leased[0].lease(), failure).await,
        CompletionAck::Applied
    );
    let (after_failure, existed) = one(&*b, "uq/f", "failed", HOUR).await;
    assert!(!existed, "a failed job frees its key");
    assert_ne!(after_failure, failed);

    let (cancelled, _) = one(&*b, "uq/c", "cancelled", HOUR).await;
    let n = b
        .cancel(CancelTarget::Job(cancelled), "not wanted")
        .await
        .unwrap();
    assert_eq!(n, 1);
    let (after_cancel, existed) = one(&*b, "uq/c", "cancelled", HOUR).await;
    assert!(!existed, "a cancelled job frees its key");
    assert_ne!(after_cancel, cancelled);
    // The new job holds the key again.
    assert_eq!(
        one(&*b, "uq/c2", "cancelled", HOUR).await,
        (after_cancel, true)
    );
}

async fn windowed_and_run_scoped_keys_do_not_meet(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let scoped = enqueue(
        &*b,
        "uq/ns",
        vec![EnqueueItem::Job(job("report", "null").unique_key("k"))],
    )
    .await;
    let (win, existed) = one(&*b, "uq/ns", "k", HOUR).await;
    assert!(!existed, "a windowed key does not match a run-scoped one");
    let again = enqueue(
        &*b,
        "uq/ns",
        vec![EnqueueItem::Job(job("report", "null").unique_key("k"))],
    )
    .await;
    assert!(again[0].existed, "nor the other way round");
    assert_eq!(again[0].ids, scoped[0].ids);

    let run = crate::run("uq/ns");
    let keys = ["k".to_string()];
    assert_eq!(
        b.unique_jobs(&run, &keys).await.unwrap(),
        [Some(scoped[0].ids[0])],
        "a run's keys are its run-scoped ones"
    );
    let (page, _) = b.unique_keys(&run, "", 10).await.unwrap();
    assert_eq!(
        page,
        [("k".to_string(), scoped[0].ids[0])],
        "windowed keys are not listed"
    );
    let rec = b.job(win).await.unwrap().expect("job exists");
    assert_eq!(
        rec.unique_key.as_deref(),
        Some("k"),
        "the record shows its key"
    );
}

async fn chains_and_groups_are_known_by_their_identity(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let chain = || {
        EnqueueItem::Chain(vec![
            job("fetch", "null").unique_for("chain-1", HOUR),
            job("render", "null"),
        ])
    };
    let first = enqueue(&*b, "uq/chain-a", vec![chain()]).await;
    assert_eq!(first[0].ids.len(), 2);
    let again = enqueue(&*b, "uq/chain-b", vec![chain()]).await;
    assert!(again[0].existed);
    assert_eq!(
        again[0].ids,
        vec![first[0].ids[0]],
        "a chain is known by its head"
    );

    let group = || EnqueueItem::Group {
        members: vec![job("part", "1"), job("part", "2")],
        callback: job("join", "null").unique_for("group-1", HOUR),
    };
    let first = enqueue(&*b, "uq/group-a", vec![group()]).await;
    let again = enqueue(&*b, "uq/group-b", vec![group()]).await;
    assert!(again[0].existed);
    assert_eq!(
        again[0].ids,
        vec![*first[0].ids.last().unwrap()],
        "a group is known by its callback"
    );
    assert_eq!(progress(&*b, "uq/group-b").await.total, 0);
}

async fn misplaced_windows_are_refused(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let refused = |items: Vec<EnqueueItem>| {
        let b = b.clone();
        async move {
            let req = EnqueueRequest {
                run: crate::run("uq/bad"),
                items,
                on_done: None,
            };
            match b.enqueue(req).await {
                Err(BackendError::Invalid { field, .. }) => field,
                other => panic!("expected an invalid unique_for, got {other:?}"),
            }
        }
    };
    let mut keyless = job("report", "null");
    keyless.unique_for = Some(HOUR);
    assert_eq!(
        refused(vec![windowed("fine", HOUR), EnqueueItem::Job(keyless)]).await,
        "unique_for"
    );
    assert_eq!(
        refused(vec![windowed("zero", Duration::ZERO)]).await,
        "unique_for"
    );
    let later_step = EnqueueItem::Chain(vec![
        job("fetch", "null"),
        job("render", "null").unique_for("step-2", HOUR),
    ]);
    assert_eq!(refused(vec![later_step]).await, "unique_for");
    // All or nothing: the good item before the bad one was not enqueued either.
    let (_, existed) = one(&*b, "uq/good", "fine", HOUR).await;
    assert!(!existed, "a refused request leaves no window behind");
}
