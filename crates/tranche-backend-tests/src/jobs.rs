//! One job at a time: listing jobs by run, state, queue and kind a page at a time,
//! retrying one job, deleting one ended job.

use std::collections::BTreeSet;

use tranche_backend::Backend;
use tranche_types::{
    BackendError, CancelTarget, EnqueueItem, JobFilter, JobId, JobState, Resolution,
};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    filters_combine(make).await;
    pages_never_skip_or_repeat_across_concurrent_enqueues(make).await;
    a_runs_pages_are_not_held_back_by_older_runs(make).await;
    retry_job_of_a_failed_job_runs_it_again(make).await;
    retry_job_revives_its_chain_and_a_cancelled_job(make).await;
    retry_of_a_job_that_has_not_failed_is_refused(make).await;
    delete_refuses_jobs_not_ended_and_keeps_counters(make).await;
    delete_of_a_failed_step_leaves_nothing_to_revive(make).await;
}

/// Every job `filter` keeps, paging `per_page` at a time until the cursor runs out
/// (a page may be short while more follow).
async fn list_all(b: &dyn Backend, filter: &JobFilter, per_page: usize) -> Vec<JobId> {
    let mut ids = Vec::new();
    let mut after = None;
    for _ in 0..10_000 {
        let page = b
            .list_jobs(filter, after, per_page)
            .await
            .expect("list jobs");
        assert!(page.jobs.len() <= per_page, "at most the page size");
        for j in &page.jobs {
            assert!(filter.matches(j), "{j:?} does not pass {filter:?}");
        }
        ids.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(next) => {
                assert!(after.is_none_or(|a| next > a), "the cursor moves on");
                after = Some(next);
            }
            None => return ids,
        }
    }
    panic!("listing {filter:?} did not end");
}

fn filter() -> JobFilter {
    JobFilter::default()
}

async fn filters_combine(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    // Runs a and b; queues q1 and q2; kinds k1 and k2; every combination, twice.
    let mut all_jobs = Vec::new();
    for run_name in ["jobs/a", "jobs/b"] {
        let mut items = Vec::new();
        let mut shape = Vec::new();
        for _ in 0..2 {
            for queue in ["q1", "q2"] {
                for kind in ["k1", "k2"] {
                    items.push(EnqueueItem::Job(job(kind, "null").queue(queue)));
                    shape.push((run_name, queue, kind));
                }
            }
        }
        let out = enqueue(&*b, run_name, items).await;
        for (e, s) in out.iter().zip(shape) {
            all_jobs.push((e.ids[0], s.0, s.1, s.2));
        }
    }
    // The first q1 job of each run fails, the first q2 one succeeds.
    let mut state_of = std::collections::HashMap::new();
    for queue in ["q1", "q2"] {
        let taken = take(&*b, queue, 100).await;
        assert_eq!(taken.len(), 8);
        for (i, j) in taken.iter().enumerate() {
            let by_run = taken[..i].iter().filter(|o| o.run == j.run).count();
            if by_run == 0 {
                let res = if queue == "q1" {
                    Resolution::Failed {
                        error: "bad".into(),
                    }
                } else {
                    ok("null")
                };
                resolve(&*b, j.lease(), res).await;
                let state = if queue == "q1" {
                    JobState::Failed
                } else {
                    JobState::Succeeded
                };
                state_of.insert(j.id, state);
            } else {
                state_of.insert(j.id, JobState::Running);
            }
        }
    }
    let expect = |f: &JobFilter| -> Vec<JobId> {
        all_jobs
            .iter()
            .filter(|(id, r, q, k)| {
                f.run.as_ref().is_none_or(|x| x.as_str() == *r)
                    && f.queue.as_deref().is_none_or(|x| x == *q)
                    && f.kind.as_deref().is_none_or(|x| x == *k)
                    && f.state.is_none_or(|s| state_of[id] == s)
            })
            .map(|(id, ..)| *id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let filters = [
        filter(),
        JobFilter {
            run: Some(run("jobs/a")),
            ..filter()
        },
        JobFilter {
            state: Some(JobState::Failed),
            ..filter()
        },
        JobFilter {
            queue: Some("q2".into()),
            ..filter()
        },
        JobFilter {
            kind: Some("k1".into()),
            ..filter()
        },
        JobFilter {
            run: Some(run("jobs/b")),
            state: Some(JobState::Failed),
            ..filter()
        },
        JobFilter {
            run: Some(run("jobs/a")),
            state: Some(JobState::Running),
            queue: Some("q1".into()),
            ..filter()
        },
        JobFilter {
            run: Some(run("jobs/b")),
            queue: Some("q2".into()),
            kind: Some("k2".into()),
            ..filter()
        },
        JobFilter {
            state: Some(JobState::Succeeded),
            kind: Some("k1".into()),
            ..filter()
        },
        JobFilter {
            run: Some(run("jobs/a")),
            state: Some(JobState::Failed),
            queue: Some("q1".into()),
            kind: Some("k1".into()),
        },
        JobFilter {
            queue: Some("nowhere".into()),
            ..filter()
        },
        JobFilter {
            run: Some(run("jobs/none")),
            ..filter()
        },
    ];
    for f in &filters {
        for per_page in [1, 3, 100] {
            assert_eq!(
                list_all(&*b, f, per_page).await,
                expect(f),
                "{f:?}, {per_page} a page"
            );
        }
    }
    // A summary says what an operator looks for.
    let failed = b
        .list_jobs(
            &JobFilter {
                state: Some(JobState::Failed),
                ..filter()
            },
            None,
            10,
        )
        .await
        .unwrap();
    let first = &failed.jobs[0];
    assert_eq!(
        (
            first.run.as_str(),
            first.queue.as_str(),
            first.attempt,
            first.max_attempts,
            first.error.as_deref()
        ),
        (
            "jobs/a",
            "q1",
            1,
            JobSpec::DEFAULT_MAX_ATTEMPTS,
            Some("bad")
        )
    );
    assert!(first.finished_at.is_some());
}

async fn pages_never_skip_or_repeat_across_concurrent_enqueues(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let items = |n: usize| -> Vec<EnqueueItem> {
        (0..n)
            .map(|i| EnqueueItem::Job(job("page", &i.to_string())))
            .collect()
    };
    let mut existing: BTreeSet<JobId> = enqueue(&*b, "jobs/pages", items(40))
        .await
        .iter()
        .map(|e| e.ids[0])
        .collect();
    // Another writer enqueues all the while, into the run listed and another.
    let writer = {
        let b = b.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for i in 0..20 {
                let run_name = if i % 2 == 0 {
                    "jobs/pages"
                } else {
                    "jobs/other"
                };
                for e in enqueue(&*b, run_name, items(3)).await {
                    ids.push((run_name, e.ids[0]));
                }
                tokio::task::yield_now().await;
            }
            ids
        })
    };
    let f = JobFilter {
        run: Some(run("jobs/pages")),
        ..filter()
    };
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = b.list_jobs(&f, after, 7).await.unwrap();
        listed.extend(page.jobs.iter().map(|j| j.id));
        // Between pages, this process enqueues too.
        existing.extend(
            enqueue(&*b, "jobs/pages", items(2))
                .await
                .iter()
                .map(|e| e.ids[0]),
        );
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let concurrent = writer.await.expect("writer task");
    assert!(
        listed.windows(2).all(|w| w[0] < w[1]),
        "ids increase across pages, none repeated: {listed:?}"
    );
    let listed: BTreeSet<JobId> = listed.into_iter().collect();
    let first_40: Vec<JobId> = existing.iter().take(40).copied().collect();
    assert!(
        first_40.iter().all(|id| listed.contains(id)),
        "every job there throughout is listed"
    );
    for (run_name, id) in concurrent {
        if run_name == "jobs/other" {
            assert!(!listed.contains(&id), "another run's job listed");
        }
    }
    // Listed again once nothing moves, the run is every job it holds.
    let all_ids: BTreeSet<JobId> = list_all(&*b, &f, 5).await.into_iter().collect();
    assert!(listed.is_subset(&all_ids));
    assert_eq!(
        all_ids.len() as u64,
        progress(&*b, "jobs/pages").await.total
    );
}

/// Listing one run reads that run's jobs, not every id before them: with many older
/// jobs of another run, the new run's jobs (and its failures) come in the first page.
async fn a_runs_pages_are_not_held_back_by_older_runs(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let older: Vec<_> = (0..12_000)
        .map(|_| EnqueueItem::Job(job("old", "null").queue("old")))
        .collect();
    enqueue(&*b, "jobs/older", older).await;
    let newer: Vec<_> = (0..3)
        .map(|_| EnqueueItem::Job(job("new", "null").queue("new")))
        .collect();
    let ids: Vec<JobId> = enqueue(&*b, "jobs/newer", newer)
        .await
        .iter()
        .map(|e| e.ids[0])
        .collect();
    let taken = take(&*b, "new", 1).await;
    resolve(
        &*b,
        taken[0].lease(),
        Resolution::Failed {
            error: "bad".into(),
        },
    )
    .await;
    let run = Some(tranche_types::RunName::new("jobs/newer").unwrap());
    let page = b
        .list_jobs(
            &JobFilter {
                run: run.clone(),
                ..filter()
            },
            None,
            10,
        )
        .await
        .expect("list a run");
    let found: Vec<JobId> = page.jobs.iter().map(|j| j.id).collect();
    assert_eq!(found, ids, "the run's jobs in one page");
    assert_eq!(page.next, None, "and nothing after them");
    let failed = b
        .list_jobs(
            &JobFilter {
                run,
                state: Some(JobState::Failed),
                ..filter()
            },
            None,
            10,
        )
        .await
        .expect("list a run's failures");
    let found: Vec<JobId> = failed.jobs.iter().map(|j| j.id).collect();
    assert_eq!(found, vec![taken[0].id], "the run's failure in one page");
    assert_eq!(failed.next, None);
}

async fn retry_job_of_a_failed_job_runs_it_again(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "jobs/retry",
        vec![
            EnqueueItem::Job(job("once", "1").max_attempts(1)),
            EnqueueItem::Job(job("other", "2").max_attempts(1)),
        ],
    )
    .await;
    let (id, other) = (out[0].ids[0], out[1].ids[0]);
    for j in take(&*b, "default", 10).await {
        resolve(
            &*b,
            j.lease(),
            Resolution::Retry {
                error: "smtp down".into(),
                at: b.clock().now(),
            },
        )
        .await;
    }
    assert_eq!(b.job(id).await.unwrap().unwrap().state, JobState::Failed);
    assert!(progress(&*b, "jobs/retry").await.is_finished());

    assert_eq!(b.retry_job(id).await.unwrap(), 1, "the job alone");
    let p = progress(&*b, "jobs/retry").await;
    assert_eq!(counts(&p), (0, 1, 0, 0, 1, 0), "the other job stays failed");
    assert!(!p.is_finished(), "the run is open again");
    let failures = b.run_failures(&run("jobs/retry"), None, 10).await.unwrap();
    assert_eq!(failures.iter().map(|f| f.id).collect::<Vec<_>>(), [other]);

    let again = take(&*b, "default", 10).await;
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id, again[0].attempt), (id, 1), "fresh attempts");
    resolve(&*b, again[0].lease(), ok("\"sent\"")).await;
    let record = b.job(id).await.unwrap().unwrap();
    assert_eq!(
        (record.state, record.result.as_deref()),
        (JobState::Succeeded, Some("\"sent\""))
    );
    assert_eq!(record.errors.len(), 1, "the failed attempt's error is kept");
    assert_eq!(record.errors[0].error, "smtp down");
    let p = progress(&*b, "jobs/retry").await;
    assert_eq!(counts(&p), (0, 0, 0, 1, 1, 0));
    assert!(p.is_finished());
    assert_eq!(p.finishes, 2, "it finished again");
}

async fn retry_job_revives_its_chain_and_a_cancelled_job(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "jobs/chain",
        vec![
            EnqueueItem::Chain(vec![job("a", "1"), job("b", "2"), job("c", "3")]),
            EnqueueItem::Job(job("solo", "4").queue("solo")),
        ],
    )
    .await;
    let ids = out[0].ids.clone();
    let solo = out[1].ids[0];
    let head = take(&*b, "default", 10).await;
    resolve(
        &*b,
        head[0].lease(),
        Resolution::Failed {
            error: "bad input".into(),
        },
    )
    .await;
    assert_eq!(
        counts(&progress(&*b, "jobs/chain").await),
        (0, 1, 0, 0, 1, 2)
    );
    let refused = b.retry_job(ids[1]).await.unwrap_err();
    assert!(
        matches!(refused, BackendError::Invalid { .. }),
        "a step cancelled by its failed predecessor: {refused}"
    );
    assert!(refused.to_string().contains("retry that step"), "{refused}");

    assert_eq!(
        b.retry_job(ids[0]).await.unwrap(),
        3,
        "the head and its steps"
    );
    assert_eq!(
        counts(&progress(&*b, "jobs/chain").await),
        (2, 2, 0, 0, 0, 0)
    );
    for (i, id) in ids.iter().enumerate() {
        let r = b.job(*id).await.unwrap().unwrap();
        let want = if i == 0 {
            JobState::Available
        } else {
            JobState::Pending
        };
        assert_eq!(r.state, want, "step {i}");
    }
    let head = take(&*b, "default", 10).await;
    assert_eq!(head.len(), 1, "only the head is runnable");
    resolve(&*b, head[0].lease(), ok("\"ok\"")).await;
    let next = take(&*b, "default", 10).await;
    assert_eq!(
        (next[0].id, next[0].input.as_deref()),
        (ids[1], Some("\"ok\""))
    );

    // A cancelled job runs again too.
    assert_eq!(
        b.cancel(CancelTarget::Job(solo), "not today")
            .await
            .unwrap(),
        1
    );
    assert_eq!(b.retry_job(solo).await.unwrap(), 1);
    let again = take(&*b, "solo", 10).await;
    assert_eq!((again[0].id, again[0].attempt), (solo, 1));
}

async fn retry_of_a_job_that_has_not_failed_is_refused(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "jobs/refuse",
        vec![
            EnqueueItem::Job(job("x", "1")),
            EnqueueItem::Job(job("x", "2")),
            EnqueueItem::Job(job("x", "3")),
        ],
    )
    .await;
    let ids: Vec<JobId> = out.iter().map(|e| e.ids[0]).collect();
    let taken = take(&*b, "default", 2).await;
    resolve(&*b, taken[0].lease(), ok("null")).await;
    let before = progress(&*b, "jobs/refuse").await;
    for (id, state) in [
        (taken[0].id, "succeeded"),
        (taken[1].id, "running"),
        (ids[2], "available"),
    ] {
        let e = b.retry_job(id).await.unwrap_err();
        let BackendError::Invalid { field, got, .. } = &e else {
            panic!("expected a refusal, got {e}");
        };
        assert_eq!(*field, "job");
        assert!(
            got.contains(&id.to_string()) && got.contains(state),
            "the message names the job and its state: {e}"
        );
        assert!(e.to_string().contains("failed or cancelled"), "{e}");
    }
    assert_eq!(progress(&*b, "jobs/refuse").await, before, "nothing moved");
    let e = b.retry_job(JobId(i64::MAX)).await.unwrap_err();
    assert!(matches!(e, BackendError::NotFound { .. }), "{e}");
}

async fn delete_refuses_jobs_not_ended_and_keeps_counters(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "jobs/delete",
        vec![
            EnqueueItem::Job(job("x", "1").unique_key("one")),
            EnqueueItem::Job(job("x", "2").max_attempts(1)),
            EnqueueItem::Job(job("x", "3")),
            EnqueueItem::Chain(vec![job("y", "4").queue("later"), job("y", "5")]),
        ],
    )
    .await;
    let (done, failed, running) = (out[0].ids[0], out[1].ids[0], out[2].ids[0]);
    let pending = out[3].ids[1];
    let taken = take(&*b, "default", 3).await;
    resolve(&*b, taken[0].lease(), ok("null")).await;
    resolve(
        &*b,
        taken[1].lease(),
        Resolution::Failed {
            error: "bad".into(),
        },
    )
    .await;
    let before = progress(&*b, "jobs/delete").await;
    assert_eq!(counts(&before), (1, 1, 1, 1, 1, 0));
    for (id, state) in [(running, "running"), (pending, "pending")] {
        let e = b.delete_job(id).await.unwrap_err();
        let BackendError::Invalid { got, .. } = &e else {
            panic!("expected a refusal, got {e}");
        };
        assert!(got.contains(state), "{e}");
        assert!(b.job(id).await.unwrap().is_some(), "still there");
    }
    assert_eq!(progress(&*b, "jobs/delete").await, before, "nothing moved");

    assert!(b.delete_job(done).await.unwrap());
    assert!(b.job(done).await.unwrap().is_none());
    assert!(!b.delete_job(done).await.unwrap(), "a repeat finds nothing");
    assert!(b.delete_job(failed).await.unwrap());
    let p = progress(&*b, "jobs/delete").await;
    assert_eq!(p.total, before.total - 2);
    assert_eq!(counts(&p), (1, 1, 1, 0, 0, 0));
    assert!(b
        .run_failures(&run("jobs/delete"), None, 10)
        .await
        .unwrap()
        .is_empty());
    let listed = list_all(
        &*b,
        &JobFilter {
            run: Some(run("jobs/delete")),
            ..filter()
        },
        10,
    )
    .await;
    assert!(!listed.contains(&done) && !listed.contains(&failed));
    assert_eq!(listed.len() as u64, p.total);
    assert_eq!(b.retry_run(&run("jobs/delete")).await.unwrap(), 0);

    // Its unique key is free again, and no id is ever given twice.
    let newest = out[3].ids[1].max(out[3].ids[0]);
    let again = enqueue(
        &*b,
        "jobs/delete",
        vec![EnqueueItem::Job(job("x", "1").unique_key("one"))],
    )
    .await;
    assert!(!again[0].existed, "the key went with the job");
    assert!(again[0].ids[0] > newest);

    // The run finishes with what is left.
    resolve(&*b, taken[2].lease(), ok("null")).await;
    let head = take(&*b, "later", 1).await;
    resolve(&*b, head[0].lease(), ok("null")).await;
    let rest = take(&*b, "default", 10).await;
    assert_eq!(rest.len(), 2);
    for j in rest {
        resolve(&*b, j.lease(), ok("null")).await;
    }
    let p = progress(&*b, "jobs/delete").await;
    assert_eq!((p.total, p.succeeded), (4, 4));
    assert!(p.is_finished());
    // Deleting the newest job does not free its id either.
    let last = list_all(&*b, &filter(), 100).await;
    let newest = *last.last().unwrap();
    assert!(b.delete_job(newest).await.unwrap());
    let after = enqueue(&*b, "jobs/delete", vec![EnqueueItem::Job(job("x", "6"))]).await;
    assert!(after[0].ids[0] > newest, "a deleted id is never reused");
}

async fn delete_of_a_failed_step_leaves_nothing_to_revive(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    let out = enqueue(
        &*b,
        "jobs/unlink",
        vec![EnqueueItem::Chain(vec![job("a", "1"), job("b", "2")])],
    )
    .await;
    let ids = out[0].ids.clone();
    let head = take(&*b, "default", 1).await;
    resolve(
        &*b,
        head[0].lease(),
        Resolution::Failed {
            error: "bad".into(),
        },
    )
    .await;
    assert!(b.delete_job(ids[0]).await.unwrap());
    let p = progress(&*b, "jobs/unlink").await;
    assert_eq!((p.total, p.cancelled), (1, 1));
    assert!(p.is_finished());
    assert_eq!(
        b.retry_run(&run("jobs/unlink")).await.unwrap(),
        0,
        "the step cancelled by the deleted job is not left pending"
    );
    assert!(progress(&*b, "jobs/unlink").await.is_finished());
    // It can still be deleted, or retried on its own.
    assert_eq!(b.retry_job(ids[1]).await.unwrap(), 1);
    assert_eq!(take(&*b, "default", 1).await[0].id, ids[1]);
}
