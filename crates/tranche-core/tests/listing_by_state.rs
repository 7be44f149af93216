//! `Client::list_jobs` with a state and no run merges the pages of the runs holding
//! jobs in that state: the same jobs as a walk of the store, in id order, never skipped
//! or repeated, whatever the page size and however the runs' ids interleave.

use std::time::Duration;

use tranche_core::Client;
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobFilter, JobId, JobSpec, JobState, ReserveRequest,
    Resolution, RunName,
};

/// Enqueues `jobs` jobs on queue "q" into each named run in turn (so runs' ids
/// interleave), then fails every job whose id is a multiple of `fail_every`, completes
/// the ones whose id is odd, and leaves the rest running.
async fn store(client: &Client, runs: &[&str], jobs: usize, fail_every: i64) {
    for run in runs {
        let items = (0..jobs)
            .map(|_| EnqueueItem::Job(JobSpec::new("k", "null")))
            .collect();
        client
            .enqueue(EnqueueRequest {
                run: RunName::new(*run).unwrap(),
                items,
                on_done: None,
            })
            .await
            .unwrap();
    }
    let taken = client
        .worker_protocol()
        .reserve(ReserveRequest {
            queue: "default".into(),
            max: runs.len() * jobs,
            lease: Duration::from_secs(600),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    assert_eq!(taken.len(), runs.len() * jobs);
    let completions = taken
        .iter()
        .filter(|j| j.id.0 % fail_every == 0 || j.id.0 % 2 == 1)
        .map(|j| Completion {
            lease: j.lease(),
            resolution: if j.id.0 % fail_every == 0 {
                Resolution::Failed {
                    error: "bad".into(),
                }
            } else {
                Resolution::Succeeded {
                    result: "null".into(),
                }
            },
        })
        .collect();
    client
        .worker_protocol()
        .complete(completions)
        .await
        .unwrap();
}

async fn list_all(client: &Client, filter: &JobFilter, per_page: usize) -> Vec<JobId> {
    let (mut ids, mut after) = (Vec::new(), None);
    for _ in 0..100_000 {
        let page = client.list_jobs(filter, after, per_page).await.unwrap();
        assert!(page.jobs.len() <= per_page);
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
    panic!("listing did not end");
}

fn expected(all: usize, keep: impl Fn(i64) -> bool) -> Vec<JobId> {
    (1..=all as i64).filter(|&id| keep(id)).map(JobId).collect()
}

async fn check(runs: usize, jobs: usize, fail_every: i64) {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new(SqliteBackend::open(dir.path(), SqliteOptions::default()).unwrap());
    let names: Vec<String> = (0..runs).map(|i| format!("list/{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // Twice, so each run's ids come in two blocks with the other runs' between.
    store(&client, &names, jobs / 2, fail_every).await;
    store(&client, &names, jobs / 2, fail_every).await;
    let all = runs * jobs;
    let state = |s| JobFilter {
        state: Some(s),
        ..JobFilter::default()
    };
    for per_page in [1, 2, 3, 50, 10_000] {
        assert_eq!(
            list_all(&client, &state(JobState::Failed), per_page).await,
            expected(all, |id| id % fail_every == 0),
            "failed, {per_page} a page, {runs} runs"
        );
        assert_eq!(
            list_all(&client, &state(JobState::Running), per_page).await,
            expected(all, |id| id % fail_every != 0 && id % 2 == 0),
            "running, {per_page} a page, {runs} runs"
        );
        assert_eq!(
            list_all(&client, &state(JobState::Available), per_page).await,
            Vec::<JobId>::new(),
        );
    }
}

#[tokio::test]
async fn a_state_across_a_few_runs_is_their_pages_merged() {
    check(3, 40, 7).await;
}

#[tokio::test]
async fn a_state_across_many_runs_is_the_same_jobs() {
    // More runs hold failures than are merged when common: the walk answers, with the
    // same jobs.
    check(40, 4, 7).await;
}

#[tokio::test]
async fn a_rare_state_across_many_runs_is_their_pages_merged() {
    // Failures in more than 32 runs, but under 1 % of the jobs: merged all the same.
    check(40, 200, 150).await;
}

/// A run whose page came back short (its window ran out before the filter kept
/// enough) holds back the merged page at its window's end: another run's later job
/// must not be shown before this run's jobs past the window are looked at.
#[tokio::test]
async fn a_short_run_page_holds_back_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let client = Client::new(SqliteBackend::open(dir.path(), SqliteOptions::default()).unwrap());
    let enqueue = |run: &'static str, kinds: Vec<&'static str>| {
        let client = client.clone();
        async move {
            let items = kinds
                .into_iter()
                .map(|k| EnqueueItem::Job(JobSpec::new(k, "null")))
                .collect();
            client
                .enqueue(EnqueueRequest {
                    run: RunName::new(run).unwrap(),
                    items,
                    on_done: None,
                })
                .await
                .unwrap()
        }
    };
    // Run a: more failed jobs of a common kind than a window holds, then a rare one;
    // run b, after it: one rare job. All fail.
    let mut kinds = vec!["common"; 12_000];
    kinds.push("rare");
    let a = enqueue("short/a", kinds).await;
    let b = enqueue("short/b", vec!["rare"]).await;
    let taken = client
        .worker_protocol()
        .reserve(ReserveRequest {
            queue: "default".into(),
            max: 20_000,
            lease: Duration::from_secs(600),
            wait: Duration::ZERO,
        })
        .await
        .unwrap();
    let failed = |j: &tranche_types::ReservedJob| Completion {
        lease: j.lease(),
        resolution: Resolution::Failed {
            error: "bad".into(),
        },
    };
    client
        .worker_protocol()
        .complete(taken.iter().map(failed).collect())
        .await
        .unwrap();
    let rare = JobFilter {
        state: Some(JobState::Failed),
        kind: Some("rare".into()),
        ..JobFilter::default()
    };
    let want = vec![a.last().unwrap().ids[0], b[0].ids[0]];
    assert_eq!(list_all(&client, &rare, 1).await, want);
}
