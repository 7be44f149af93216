//! Schedules: declared, listed and removed; each due time handled (claimed and its job
//! enqueued, in one transaction) by exactly one caller, however many race.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tranche_types::{EnqueueItem, EnqueueRequest, JobState, Timestamp};

use crate::*;

/// Every check of this area, in turn, each on a fresh backend from `make`.
pub async fn all(make: &dyn MakeBackend) {
    declared_listed_and_removed(make).await;
    a_redeclaration_keeps_what_was_fired_unless_the_timing_changed(make).await;
    a_due_time_fires_once_and_enqueues_its_job(make).await;
    a_skipped_due_time_advances_without_a_job(make).await;
    an_invalid_job_leaves_the_due_time_unhandled(make).await;
    racing_callers_fire_each_due_time_once(make).await;
}

fn at(secs: i64) -> Timestamp {
    Timestamp(1_800_000_000_000_000 + secs * 1_000_000)
}

fn request(run_name: &str, key: &str) -> EnqueueRequest {
    EnqueueRequest {
        run: run(run_name),
        items: vec![EnqueueItem::Job(job("report", "{}").unique_key(key))],
        on_done: None,
    }
}

async fn declared_listed_and_removed(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    assert!(b.schedules().await.unwrap().is_empty());
    assert!(b
        .put_schedule(tranche_types::ScheduleWrite {
            name: "nightly",
            timing: "cron A",
            spec: "{}",
            through: at(0)
        })
        .await
        .unwrap());
    assert!(b
        .put_schedule(tranche_types::ScheduleWrite {
            name: "eod",
            timing: "cron B",
            spec: "{\"x\":1}",
            through: at(5)
        })
        .await
        .unwrap());
    let all = b.schedules().await.unwrap();
    let names: Vec<_> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["eod", "nightly"], "sorted by name");
    assert_eq!(
        (all[0].timing.as_str(), all[0].spec.as_str(), all[0].through),
        ("cron B", "{\"x\":1}", at(5))
    );
    assert_eq!(all[0].last_fired, None);
    assert!(b.delete_schedule("eod").await.unwrap());
    assert!(!b.delete_schedule("eod").await.unwrap(), "already gone");
    let names: Vec<_> = b
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["nightly"]);
    assert_eq!(
        b.fire_schedule("eod", at(10), Some(request("s/eod", "k")))
            .await
            .unwrap(),
        None,
        "a removed schedule fires nothing"
    );
    assert!(b.run_progress(&run("s/eod")).await.unwrap().is_none());
}

async fn a_redeclaration_keeps_what_was_fired_unless_the_timing_changed(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    b.put_schedule(tranche_types::ScheduleWrite {
        name: "s",
        timing: "cron A",
        spec: "{\"v\":1}",
        through: at(0),
    })
    .await
    .unwrap();
    b.fire_schedule("s", at(60), Some(request("s/s", "s:60")))
        .await
        .unwrap()
        .expect("fired");
    assert!(
        !b.put_schedule(tranche_types::ScheduleWrite {
            name: "s",
            timing: "cron A",
            spec: "{\"v\":2}",
            through: at(100)
        })
        .await
        .unwrap(),
        "same timing: the cursor stays"
    );
    let s = &b.schedules().await.unwrap()[0];
    assert_eq!(
        (s.spec.as_str(), s.through, s.last_fired),
        ("{\"v\":2}", at(60), Some(at(60)))
    );
    assert!(b
        .put_schedule(tranche_types::ScheduleWrite {
            name: "s",
            timing: "cron B",
            spec: "{\"v\":3}",
            through: at(100)
        })
        .await
        .unwrap());
    let s = &b.schedules().await.unwrap()[0];
    assert_eq!(
        (s.timing.as_str(), s.through, s.last_fired),
        ("cron B", at(100), None),
        "a new timing starts afresh"
    );
    assert_eq!(
        b.fire_schedule("s", at(90), None).await.unwrap(),
        None,
        "due times before the new start are not handled"
    );
}

async fn a_due_time_fires_once_and_enqueues_its_job(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    declare_cron(&*b, "eod").await;
    let fired = b
        .fire_schedule("eod", at(60), Some(request("sched/eod", "schedule:eod:60")))
        .await
        .unwrap()
        .expect("the first claim wins");
    assert_eq!(fired.len(), 1);
    assert!(!fired[0].existed);
    let job = b.job(fired[0].ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (job.kind.as_str(), job.state, job.unique_key.as_deref()),
        ("report", JobState::Available, Some("schedule:eod:60"))
    );
    assert_eq!(
        b.fire_schedule(
            "eod",
            at(60),
            Some(request("sched/eod", "schedule:eod:60b"))
        )
        .await
        .unwrap(),
        None,
        "the same due time again"
    );
    assert_eq!(
        b.fire_schedule("eod", at(30), Some(request("sched/eod", "schedule:eod:30")))
            .await
            .unwrap(),
        None,
        "an earlier due time, after a later one was handled"
    );
    assert_eq!(progress(&*b, "sched/eod").await.total, 1);
    let s = &b.schedules().await.unwrap()[0];
    assert_eq!((s.through, s.last_fired), (at(60), Some(at(60))));
}

async fn a_skipped_due_time_advances_without_a_job(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    declare_cron(&*b, "s").await;
    b.fire_schedule("s", at(60), Some(request("sched/s", "60")))
        .await
        .unwrap()
        .expect("fired");
    assert_eq!(
        b.fire_schedule("s", at(120), None).await.unwrap(),
        Some(Vec::new()),
        "skipped: claimed, nothing enqueued"
    );
    let s = &b.schedules().await.unwrap()[0];
    assert_eq!((s.through, s.last_fired), (at(120), Some(at(60))));
    assert_eq!(progress(&*b, "sched/s").await.total, 1);
}

async fn an_invalid_job_leaves_the_due_time_unhandled(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    declare_cron(&*b, "s").await;
    let bad = EnqueueRequest {
        run: run("sched/bad"),
        items: vec![EnqueueItem::Job(job("report", "{}").max_attempts(0))],
        on_done: None,
    };
    assert!(b.fire_schedule("s", at(60), Some(bad)).await.is_err());
    let s = &b.schedules().await.unwrap()[0];
    assert_eq!((s.through, s.last_fired), (at(0), None), "claim undone");
    assert!(b
        .fire_schedule("s", at(60), Some(request("sched/bad", "60")))
        .await
        .unwrap()
        .is_some());
}

async fn racing_callers_fire_each_due_time_once(make: &dyn MakeBackend) {
    let (b, _) = manual(make).await;
    declare_cron(&*b, "race").await;
    let wins = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for caller in 0..8 {
        let (b, wins) = (b.clone(), wins.clone());
        tasks.push(tokio::spawn(async move {
            for due in 1..=20 {
                // Each caller fires its own job spec: a second winner would add a job.
                let key = format!("{due}/{caller}");
                let won = b
                    .fire_schedule("race", at(due * 60), Some(request("sched/race", &key)))
                    .await
                    .expect("fire");
                if won.is_some() {
                    wins.lock().unwrap().push(due);
                }
            }
        }));
    }
    tokio::time::timeout(Duration::from_secs(60), async {
        for t in tasks {
            t.await.expect("caller");
        }
    })
    .await
    .expect("racing callers finished");
    let wins = wins.lock().unwrap().clone();
    let distinct: HashSet<_> = wins.iter().collect();
    assert_eq!(
        wins.len(),
        distinct.len(),
        "no due time won twice: {wins:?}"
    );
    assert!(wins.contains(&20), "the latest due time was fired");
    assert_eq!(progress(&*b, "sched/race").await.total, wins.len() as u64);
}

/// Schedule `name` declared with a plain timing and spec, counting from `at(0)`.
async fn declare_cron(b: &dyn Backend, name: &str) {
    b.put_schedule(tranche_types::ScheduleWrite {
        name,
        timing: "cron",
        spec: "{}",
        through: at(0),
    })
    .await
    .unwrap();
}
