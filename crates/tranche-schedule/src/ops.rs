//! Declaring, listing and removing schedules through a [`Client`].

use tranche_core::Client;
use tranche_types::Timestamp;

use crate::error::ScheduleError;
use crate::schedule::{Schedule, When};

/// Declare `schedule` (replacing one of the same name). A new schedule, or one whose
/// timing changed, counts due times from now: earlier ones are not "missed". A
/// one-off time already past when first declared is due at once (fired, or skipped
/// with `skip_missed`). Re-declaring the same timing keeps what was fired. True when
/// the schedule starts afresh.
pub async fn apply(client: &Client, schedule: &Schedule) -> Result<bool, ScheduleError> {
    let schedule = schedule.clone().checked()?;
    let timing = schedule.timing().expect("checked");
    let now = client.clock().now();
    let through = match schedule.when {
        When::At(at) => now.min(Timestamp(at.micros() - 1)),
        When::Cron { .. } => now,
    };
    Ok(client
        .put_schedule(tranche_types::ScheduleWrite {
            name: &schedule.name,
            timing: &timing.key(),
            spec: &schedule.to_json(),
            through,
        })
        .await?)
}

/// Remove a schedule; false if there was none.
pub async fn delete(client: &Client, name: &str) -> Result<bool, ScheduleError> {
    Ok(client.delete_schedule(name).await?)
}

/// One schedule as `tranche schedules` and the dashboard show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed {
    /// The schedule.
    pub name: String,
    /// Its declaration, or why it cannot be read.
    pub schedule: Result<Schedule, String>,
    /// Its next due time (at or before now: due, the scheduler fires it on its next
    /// tick), or `None` when it will never be due again.
    pub next_due: Option<Timestamp>,
    /// The latest due time that enqueued a job.
    pub last_fired: Option<Timestamp>,
}

/// Every schedule with its next due time, sorted by name.
pub async fn list(client: &Client) -> Result<Vec<Listed>, ScheduleError> {
    let stored = client.schedules().await?;
    Ok(stored
        .into_iter()
        .map(|s| {
            let schedule = Schedule::from_stored(&s).map_err(|e| e.to_string());
            let next_due = schedule
                .as_ref()
                .ok()
                .and_then(|sch| sch.timing().ok())
                .and_then(|t| t.next_after(s.through));
            Listed {
                name: s.name,
                schedule,
                next_due,
                last_fired: s.last_fired,
            }
        })
        .collect())
}
