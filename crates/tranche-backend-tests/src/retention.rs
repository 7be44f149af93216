//! Retention: `prune` removes finished runs older than a cut-off with everything of
//! theirs (jobs, attempt errors, failures, groups, unique keys), never a run that can
//! still move, and keeps effects. Time is a manual clock; the backends' own retention
//! (days) never fires during these checks.

use std::time::Duration;

use tranche_backend::Backend;
use tranche_types::{EnqueueItem, JobId, Resolution};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    removes_finished_runs_before_the_cut_off_only(make).await;
    large_runs_go_in_steps_bounded_by_limit(make).await;
    a_run_reopened_by_a_retry_is_kept(make).await;
}

const HOUR: Duration = Duration::from_secs(3600);

/// Reserve every ready job of `queue` and end it: the first `fail` fail, the rest
/// succeed.
async fn work_all(b: &dyn Backend, queue: &str, fail: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    loop {
        let jobs = take(b, queue, 500).await;
        if jobs.is_empty() {
            return ids;
        }
        for j in jobs {
            let res = if ids.len() < fail {
                Resolution::Failed {
                    error: "bad row".into(),
                }
            } else {
                ok("1")
            };
            ids.push(j.id);
            assert_eq!(
                resolve(b, j.lease(), res).await,
                tranche_types::CompletionAck::Applied
            );
        }
    }
}

async fn removes_finished_runs_before_the_cut_off_only(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    let t0 = clock.now();
    // The old run: a job with an attempt error, a failed one, a unique one and a group.
    let old = enqueue(
        &*b,
        "ret/old",
        vec![
            EnqueueItem::Job(job("x", "1").queue("ret-old").max_attempts(3)),
            EnqueueItem::Job(job("x", "2").queue("ret-old").unique_key("k")),
            EnqueueItem::Group {
                members: vec![
                    job("m", "1").queue("ret-old"),
                    job("m", "2").queue("ret-old"),
                ],
                callback: job("cb", "{}").queue("ret-cb"),
            },
        ],
    )
    .await;
    let retried = take(&*b, "ret-old", 1).await;
    assert_eq!(retried.len(), 1);
    let again = Resolution::Retry {
        error: "try again".into(),
        at: t0,
    };
    resolve(&*b, retried[0].lease(), again).await;
    let ended = work_all(&*b, "ret-old", 1).await;
    assert_eq!(ended.len(), 4, "every job of the old run but the callback");
    work_all(&*b, "ret-cb", 0).await;
    let old_progress = progress(&*b, "ret/old").await;
    assert!(old_progress.finished_at.is_some(), "the old run finished");
    assert_eq!(old_progress.failed, 1);
    let old_ids: Vec<JobId> = old.iter().flat_map(|e| e.ids.clone()).collect();
    assert!(b
        .record_effect(tranche_types::EffectRecord {
            key: "ret/mail/1",
            job: Some(old_ids[0]),
            value: "sent"
        })
        .await
        .unwrap());
    // A run that has not finished, as old as the first one.
    let open = enqueue(
        &*b,
        "ret/open",
        vec![EnqueueItem::Job(job("x", "o").queue("ret-open"))],
    )
    .await;
    clock.advance(HOUR);
    enqueue(
        &*b,
        "ret/new",
        vec![EnqueueItem::Job(job("x", "n").queue("ret-new"))],
    )
    .await;
    work_all(&*b, "ret-new", 0).await;

    let cut = t0.plus(HOUR / 2);
    let pruned = b.prune(cut, 100).await.unwrap();
    assert_eq!(
        (pruned.runs, pruned.jobs),
        (1, 5),
        "the old run and its five jobs"
    );
    assert!(b.run_progress(&run("ret/old")).await.unwrap().is_none());
    for id in &old_ids {
        assert!(
            b.job(*id).await.unwrap().is_none(),
            "job {id:?} of the old run is gone"
        );
    }
    assert!(b
        .run_failures(&run("ret/old"), None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        b.unique_jobs(&run("ret/old"), &["k".into()]).await.unwrap(),
        vec![None]
    );
    let names: Vec<String> = b
        .list_runs(10)
        .await
        .unwrap()
        .iter()
        .map(|p| p.run.as_ref().unwrap().as_str().to_string())
        .collect();
    assert_eq!(
        names,
        ["ret/new", "ret/open"],
        "newest first, the old run gone"
    );
    let effect = b
        .effect("ret/mail/1")
        .await
        .unwrap()
        .expect("effects are kept");
    assert_eq!(effect.value, "sent");
    // The unfinished run is untouched: its job is still there and still runs.
    let open_job = b
        .job(open[0].ids[0])
        .await
        .unwrap()
        .expect("open run's job kept");
    assert_eq!(open_job.state, tranche_types::JobState::Available);
    assert_eq!(
        b.prune(cut, 100).await.unwrap().runs,
        0,
        "a repeat finds nothing more"
    );

    // The old run's name and unique keys are free again: a new run with new jobs.
    let reborn = enqueue(
        &*b,
        "ret/old",
        vec![EnqueueItem::Job(
            job("x", "2").queue("ret-old").unique_key("k"),
        )],
    )
    .await;
    assert!(!reborn[0].existed, "the unique key was freed with its run");
    assert_eq!(progress(&*b, "ret/old").await.total, 1);

    // A later cut-off takes the newer finished run, still never an unfinished one.
    let pruned = b.prune(clock.now().plus(HOUR), 100).await.unwrap();
    assert_eq!((pruned.runs, pruned.jobs), (1, 1));
    assert!(b.run_progress(&run("ret/new")).await.unwrap().is_none());
    assert!(b.run_progress(&run("ret/open")).await.unwrap().is_some());
    assert_eq!(
        progress(&*b, "ret/old").await.total,
        1,
        "the new ret/old is unfinished"
    );
    assert_eq!(
        work_all(&*b, "ret-open", 0).await.len(),
        1,
        "the open run's job still runs"
    );
}

/// Runs larger than one step of either backend (SQLite's writer batch, a Redis script
/// call), so a run is removed over several steps.
async fn large_runs_go_in_steps_bounded_by_limit(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    for r in 0..4 {
        let items = (0..600)
            .map(|i| EnqueueItem::Job(job("x", &i.to_string()).queue("ret-big")))
            .collect();
        enqueue(&*b, &format!("ret/big/{r}"), items).await;
    }
    assert_eq!(work_all(&*b, "ret-big", 0).await.len(), 2400);
    clock.advance(HOUR);
    let cut = clock.now();
    let first = b.prune(cut, 2).await.unwrap();
    assert_eq!(
        (first.runs, first.jobs),
        (2, 1200),
        "two runs whole, no more"
    );
    let left = b.list_runs(10).await.unwrap();
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|p| p.total == 600));
    let rest = b.prune(cut, 10).await.unwrap();
    assert_eq!((rest.runs, rest.jobs), (2, 1200));
    assert!(b.list_runs(10).await.unwrap().is_empty());
}

async fn a_run_reopened_by_a_retry_is_kept(make: &dyn MakeBackend) {
    let (b, clock) = manual(make).await;
    enqueue(
        &*b,
        "ret/retry",
        vec![EnqueueItem::Job(job("x", "1").queue("ret-retry"))],
    )
    .await;
    work_all(&*b, "ret-retry", 1).await;
    assert!(progress(&*b, "ret/retry").await.finished_at.is_some());
    assert_eq!(b.retry_run(&run("ret/retry")).await.unwrap(), 1);
    clock.advance(HOUR);
    let pruned = b.prune(clock.now(), 10).await.unwrap();
    assert_eq!(pruned.runs, 0, "a reopened run has a job to run");
    assert_eq!(progress(&*b, "ret/retry").await.available, 1);
}
