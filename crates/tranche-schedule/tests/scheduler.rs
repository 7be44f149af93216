//! The scheduler over a real backend (SQLite) on a manual clock: due times fire once
//! however many schedulers race, a scheduler that was down fires what it missed once
//! (or skips it), and one-off times fire once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::DateTime;
use tranche_core::Client;
use tranche_schedule::{apply, list, Handled, Schedule, ScheduledJob, Scheduler};
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{Clock, ManualClock, RunName, Timestamp};

fn utc(s: &str) -> Timestamp {
    Timestamp(DateTime::parse_from_rfc3339(s).unwrap().timestamp_micros())
}

fn open(dir: &Path, clock: &ManualClock) -> Client {
    Client::new(
        SqliteBackend::open(
            dir,
            SqliteOptions {
                clock: Arc::new(clock.clone()),
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    )
}

/// A clock standing at `start`, and a way to move it to a later time.
fn clock_at(start: &str) -> (ManualClock, impl Fn(&str)) {
    let clock = ManualClock::new(utc(start));
    let c = clock.clone();
    let set = move |to: &str| {
        let now = c.now().micros();
        let to = utc(to).micros();
        assert!(to >= now, "the clock only moves forward");
        c.advance(Duration::from_micros((to - now) as u64));
    };
    (clock, set)
}

async fn jobs_in(client: &Client, run: &str) -> u64 {
    client
        .run_progress(&RunName::new(run).unwrap())
        .await
        .unwrap()
        .map_or(0, |p| p.total)
}

fn fired(handled: &[Handled]) -> Vec<(String, Timestamp, bool)> {
    handled
        .iter()
        .filter_map(|h| match h {
            Handled::Fired {
                name, due, late, ..
            } => Some((name.clone(), *due, *late)),
            _ => None,
        })
        .collect()
}

fn eod() -> Schedule {
    Schedule::cron(
        "eod",
        "0 18 * * MON-FRI",
        "Asia/Kolkata",
        ScheduledJob::new("report"),
    )
    .unwrap()
}

#[tokio::test]
async fn a_weekday_schedule_fires_each_due_time_once() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, set) = clock_at("2026-05-01T12:00:00Z"); // Friday, 17:30 IST
    let client = open(dir.path(), &clock);
    assert!(apply(&client, &eod()).await.unwrap());
    let s = Scheduler::new(client.clone());
    assert!(s.tick().await.unwrap().is_empty(), "not due yet");
    let listed = list(&client).await.unwrap();
    assert_eq!(listed[0].next_due, Some(utc("2026-05-01T12:30:00Z")));

    set("2026-05-01T12:30:00Z");
    assert_eq!(
        fired(&s.tick().await.unwrap()),
        [("eod".into(), utc("2026-05-01T12:30:00Z"), false)]
    );
    assert!(s.tick().await.unwrap().is_empty(), "fired once");
    set("2026-05-03T12:30:00Z"); // Sunday
    assert!(s.tick().await.unwrap().is_empty(), "no weekend due time");
    set("2026-05-04T12:30:05Z");
    assert_eq!(
        fired(&s.tick().await.unwrap()),
        [("eod".into(), utc("2026-05-04T12:30:00Z"), false)]
    );
    assert_eq!(jobs_in(&client, "schedule:eod").await, 2);
    let listed = list(&client).await.unwrap();
    assert_eq!(listed[0].last_fired, Some(utc("2026-05-04T12:30:00Z")));
    assert_eq!(listed[0].next_due, Some(utc("2026-05-05T12:30:00Z")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedulers_in_two_processes_fire_each_due_time_once() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, _) = clock_at("2026-05-01T00:00:00Z");
    // Two backends on one file: what two processes sharing it see.
    let (a, b) = (open(dir.path(), &clock), open(dir.path(), &clock));
    let every_minute = Schedule::cron("tick", "* * * * *", "UTC", ScheduledJob::new("k")).unwrap();
    apply(&a, &every_minute).await.unwrap();
    let (sa, sb) = (Scheduler::new(a.clone()), Scheduler::new(b.clone()));
    let mut wins = Vec::new();
    for _ in 0..20 {
        clock.advance(Duration::from_secs(60));
        let (ra, rb) = tokio::join!(sa.tick(), sb.tick());
        let mut both = fired(&ra.unwrap());
        both.extend(fired(&rb.unwrap()));
        assert_eq!(both.len(), 1, "exactly one scheduler fired: {both:?}");
        wins.push(both[0].1);
    }
    wins.dedup();
    assert_eq!(wins.len(), 20, "a new due time each minute");
    assert_eq!(jobs_in(&a, "schedule:tick").await, 20);
}

#[tokio::test]
async fn a_scheduler_down_over_two_due_times_fires_once_on_start() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, set) = clock_at("2026-05-01T12:00:00Z");
    let client = open(dir.path(), &clock);
    apply(&client, &eod()).await.unwrap();
    apply(
        &client,
        &Schedule::cron(
            "eod-skip",
            "0 18 * * MON-FRI",
            "Asia/Kolkata",
            ScheduledJob::new("report"),
        )
        .unwrap()
        .skip_missed(true),
    )
    .await
    .unwrap();
    drop(client);
    // Down over Friday's and Monday's due times; back on Monday evening.
    set("2026-05-04T15:00:00Z");
    let client = open(dir.path(), &clock);
    let handled = Scheduler::new(client.clone()).tick().await.unwrap();
    assert_eq!(
        handled,
        [
            Handled::Fired {
                name: "eod".into(),
                due: utc("2026-05-04T12:30:00Z"),
                job: handled
                    .iter()
                    .find_map(|h| match h {
                        Handled::Fired { job, .. } => Some(*job),
                        _ => None,
                    })
                    .unwrap(),
                late: true,
            },
            Handled::Skipped {
                name: "eod-skip".into(),
                due: utc("2026-05-04T12:30:00Z"),
            },
        ]
    );
    assert_eq!(
        jobs_in(&client, "schedule:eod").await,
        1,
        "two missed, one fired"
    );
    assert_eq!(jobs_in(&client, "schedule:eod-skip").await, 0);
    assert!(Scheduler::new(client.clone())
        .tick()
        .await
        .unwrap()
        .is_empty());
    // On time again the next day, skip_missed or not.
    set("2026-05-05T12:30:00Z");
    let handled = Scheduler::new(client.clone()).tick().await.unwrap();
    assert_eq!(fired(&handled).len(), 2);
}

#[tokio::test]
async fn a_one_off_time_fires_once_and_a_redeclaration_does_not_fire_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, set) = clock_at("2026-05-01T08:00:00Z");
    let client = open(dir.path(), &clock);
    let once = Schedule::at(
        "once",
        utc("2026-05-01T09:00:00Z"),
        ScheduledJob::new("migrate"),
    )
    .unwrap();
    apply(&client, &once).await.unwrap();
    let s = Scheduler::new(client.clone());
    assert!(s.tick().await.unwrap().is_empty());
    set("2026-05-01T09:00:00Z");
    assert_eq!(fired(&s.tick().await.unwrap()).len(), 1);
    assert!(!apply(&client, &once).await.unwrap(), "same timing: kept");
    set("2026-05-02T09:00:00Z");
    assert!(s.tick().await.unwrap().is_empty());
    assert_eq!(list(&client).await.unwrap()[0].next_due, None);
    assert_eq!(jobs_in(&client, "schedule:once").await, 1);
    let job = client
        .unique_jobs(
            &RunName::new("schedule:once").unwrap(),
            &[tranche_schedule::unique_key(
                "once",
                utc("2026-05-01T09:00:00Z"),
            )],
        )
        .await
        .unwrap();
    assert!(
        job[0].is_some(),
        "the job names its due time in its unique key"
    );
}
