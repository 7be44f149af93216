//! The loop a worker or server process runs: on each tick, every schedule whose due
//! time has come is fired through the backend, which lets exactly one process win
//! each due time (the claim and the enqueue are one transaction). Nothing is kept in
//! the process: a process that starts after being down fires what it missed, once.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tranche_core::Client;
use tranche_types::{one_line, JobId, Timestamp};

use crate::error::ScheduleError;
use crate::schedule::Schedule;

/// Fires schedules' due times.
pub struct Scheduler {
    client: Client,
    missed_after: Duration,
    /// Problems already logged, so a broken schedule is reported once, not per tick.
    reported: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("missed_after", &self.missed_after)
            .finish()
    }
}

/// What one tick did, per schedule that had a due time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handled {
    /// This process fired `due`: its job was enqueued.
    Fired {
        /// The schedule.
        name: String,
        /// The due time.
        due: Timestamp,
        /// The job enqueued.
        job: JobId,
        /// Fired after the missed-after delay (the processes were down).
        late: bool,
    },
    /// `due` was missed and the schedule skips missed due times: nothing enqueued.
    Skipped {
        /// The schedule.
        name: String,
        /// The due time.
        due: Timestamp,
    },
    /// Another process handled `due` first.
    Lost {
        /// The schedule.
        name: String,
        /// The due time.
        due: Timestamp,
    },
}

impl Scheduler {
    /// How late a due time may be noticed and still count as on time (not missed).
    pub const DEFAULT_MISSED_AFTER: Duration = Duration::from_secs(60);
    /// How often [`run`](Self::run) looks by default.
    pub const DEFAULT_EVERY: Duration = Duration::from_secs(1);

    /// A scheduler firing the schedules stored where `client` points.
    pub fn new(client: Client) -> Self {
        Scheduler {
            client,
            missed_after: Self::DEFAULT_MISSED_AFTER,
            reported: Mutex::new(HashSet::new()),
        }
    }

    /// A due time noticed more than `d` after it came is missed: fired late, or
    /// skipped by a schedule with `skip_missed`.
    pub fn missed_after(mut self, d: Duration) -> Self {
        self.missed_after = d;
        self
    }

    /// Handle every schedule's due times up to now (the backend's clock). Every due
    /// time since the last one handled collapses into the latest, fired once. A
    /// schedule that cannot be read or fired is logged (once) and left for the next
    /// tick; only a failure to list schedules fails the tick.
    pub async fn tick(&self) -> Result<Vec<Handled>, ScheduleError> {
        let now = self.client.clock().now();
        let mut handled = Vec::new();
        for stored in self.client.schedules().await? {
            let name = stored.name.clone();
            match self.handle(&stored, now).await {
                Ok(Some(h)) => handled.push(h),
                Ok(None) => {}
                Err(e) => self.report(&name, &e),
            }
        }
        Ok(handled)
    }

    async fn handle(
        &self,
        stored: &tranche_types::StoredSchedule,
        now: Timestamp,
    ) -> Result<Option<Handled>, ScheduleError> {
        let schedule = Schedule::from_stored(stored)?;
        let name = schedule.name.clone();
        let timing = schedule
            .timing()
            .map_err(|invalid| ScheduleError::Invalid {
                name: name.clone(),
                invalid,
            })?;
        let Some(due) = timing.latest_in(stored.through, now) else {
            return Ok(None);
        };
        let late = now.since(due) > self.missed_after;
        let request = if late && schedule.skip_missed {
            None
        } else {
            Some(schedule.request(due)?)
        };
        let skip = request.is_none();
        Ok(Some(
            match self
                .client
                .worker_protocol()
                .fire_schedule(&name, due, request)
                .await?
            {
                None => Handled::Lost { name, due },
                Some(_) if skip => {
                    tracing::info!(schedule = %name, due = due.micros(), "missed due time skipped");
                    Handled::Skipped { name, due }
                }
                Some(enqueued) => {
                    let job = enqueued
                        .first()
                        .and_then(|e| e.ids.first().copied())
                        .unwrap_or(JobId(0));
                    tracing::info!(schedule = %name, due = due.micros(), job = job.0, late, "schedule fired");
                    Handled::Fired {
                        name,
                        due,
                        job,
                        late,
                    }
                }
            },
        ))
    }

    fn report(&self, name: &str, e: &ScheduleError) {
        let text = one_line(e);
        let first = self
            .reported
            .lock()
            .expect("reported lock")
            .insert(format!("{name}\n{text}"));
        if first {
            tracing::warn!(schedule = %name, error = %text, "schedule not fired; trying again each tick");
        }
    }

    /// Tick every `every` until `stop` completes. A failed tick (the backend down) is
    /// logged and the next one tries again.
    pub async fn run(&self, every: Duration, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = interval.tick() => {
                    if let Err(e) = self.tick().await {
                        tracing::warn!(error = %one_line(&e), "schedules not read; trying again");
                    }
                }
            }
        }
    }
}
