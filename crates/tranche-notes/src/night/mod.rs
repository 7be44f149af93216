//! A broker's night as one call: publish the day's broker details, plan, enqueue (a
//! second call for the same date adds nothing and resumes), work the four step queues
//! here or watch workers elsewhere do it, and write the report. The command line is a
//! thin wrapper around [`run_night`]: it loads the configuration, shows the
//! [`NightProgress`] and turns the [`NightSummary`] into its output and exit code.
//!
//! One meaning per word, across this crate and the command line:
//!
//! - **Day** ([`Day`]): the input files of one trade date — trades, client master,
//!   broker details — read and checked ([`read_day`], or written by the generator and
//!   read back, [`generated_day`]).
//! - **Night**: the run `contract-notes/<date>` that makes one Day's notes — planned
//!   ([`plan_night`] → [`NightPlan`]), enqueued, worked by any
//!   number of processes over any number of calls, reported. [`run_night`] is one call
//!   of it in this process, and [`NightSummary`] what that call saw.
//! - `Night`, the type (internal to the pipeline): what one night's steps share in a
//!   worker process (its date's broker, with the process's store, signer and mailer).
//! - [`NightSource`]: where a worker process gets the `Night` of any date — its own
//!   resources, plus each date's broker loaded from the store the first time.
//!
//! [`Day`]: crate::pipeline::Day
//! [`plan_night`]: crate::pipeline::plan_night
//! [`NightPlan`]: crate::pipeline::NightPlan
//! [`NightSource`]: crate::pipeline::NightSource

mod day;
mod progress;
mod report_file;
mod run;
mod stall;

pub use day::{generated_day, read_day, DayError};
pub use progress::{NightProgress, PlannedNight};
pub use report_file::ReportPlace;
pub use run::{run_night, NightConfig, NightError, NightSummary, WorkHere};
pub use stall::Stall;

pub(crate) use report_file::place_report;
pub(crate) use stall::StallWatch;
