//! Schedules: periodic jobs from cron patterns read in a time zone
//! (`0 18 * * MON-FRI` in `Asia/Kolkata`) and one-off jobs at a time, declared in code
//! ([`Schedule`], [`apply`]), in a TOML file ([`read_file`]) or over HTTP, and fired
//! by a [`Scheduler`] that worker and server processes run.
//!
//! Exactly one enqueue per due time, across any number of processes: firing a due time
//! is one backend transaction that advances the schedule's "handled through" time only
//! if it is older and enqueues the job with it (`Client::fire_schedule`). None is lost
//! across a restart: the cursor lives in the backend, so a process that was down over
//! due times fires the latest of them once when it starts (late), or none if the
//! schedule says `skip_missed`.
//!
//! Daylight saving: see [`timing`] for the rule (a skipped wall-clock time fires at
//! the end of the gap; a repeated one fires once, at its first occurrence).

#![deny(missing_docs)]

mod error;
mod file;
mod ops;
mod schedule;
mod scheduler;
pub mod timing;

pub use error::{FileError, Invalid, ScheduleError};
pub use file::{parse_file, read_file};
pub use ops::{apply, delete, list, Listed};
pub use schedule::{unique_key, Schedule, ScheduledJob, When};
pub use scheduler::{Handled, Scheduler};
pub use timing::Timing;
