//! The vocabulary every Tranche layer shares: ids, run names, job states and their
//! transitions, the closed set of handler outcomes, what is enqueued and what a worker
//! gets back, per-queue statistics and their fixed latency buckets, and the backend
//! error type.
//!
//! This crate has almost no dependencies on purpose: backends, the engine, pipelines and
//! the HTTP server all speak it, so it must stay cheap to depend on and free of I/O.
//!
//! # Words
//!
//! The end of one attempt of a job goes through five types, one meaning each:
//!
//! - [`Outcome`]: what a handler decides about its job: complete with a result, retry
//!   (after a given delay or the task's backoff), snooze, cancel or discard. Delays are
//!   durations; nothing is stamped yet.
//! - `RawOutcome` (tranche-core's, internal): an `Outcome<String>`, the same decision
//!   with its result already serialised to JSON text, as the engine's worker handles it
//!   whatever the handler's result type (a result that cannot be serialised becomes a
//!   discard).
//! - [`Resolution`]: what a worker reports for one attempt: the decision with its times
//!   resolved to [`Timestamp`]s on the backend's clock (a retry's backoff applied) and
//!   its result as JSON text. `Complete` becomes `Succeeded`, `Discard` `Failed`,
//!   `Cancel` `Cancelled`.
//! - [`Completion`]: a [`LeaseRef`] (which attempt of which job) and its resolution:
//!   one item of a batch handed to the backend.
//! - [`CompletionAck`]: the backend's answer to one completion: `Applied`, or `Stale`
//!   when that attempt no longer held its job (its lease expired and the job was
//!   reserved again, or it was cancelled) and nothing was changed.

#![deny(missing_docs)]

mod clock;
mod commit;
mod error;
mod event;
mod ids;
mod job;
mod limit;
mod listing;
mod outcome;
mod pause;
mod prune;
mod run;
mod schedule;
pub mod secret;
mod state;
mod stats;
mod transience;
pub mod unique;

pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use commit::{Commit, CommitAck, Record, RecordWrite};
pub use error::{one_line, BackendError, Cause, TooLong};
pub use event::{JobEvent, QueueDepth};
pub use ids::{InvalidName, JobId, RunName};
pub use job::{
    AttemptError, CancelTarget, Completion, CompletionAck, EnqueueItem, EnqueueRequest, Enqueued,
    JobRecord, JobSpec, LeaseRef, ReserveRequest, ReservedJob, Resolution,
};
pub use limit::{Limit, LimitScope, LimitStatus, StartRate};
pub use listing::{JobFilter, JobPage, JobSummary};
pub use outcome::Outcome;
pub use pause::check_queue_name;
pub use prune::Pruned;
pub use run::{
    Effect, EffectRecord, JobFailure, LockClaim, LockRequest, MemberOutcome, RunProgress,
};
pub use schedule::{ScheduleWrite, StoredSchedule};
pub use state::JobState;
pub use stats::{latency_bucket, Histogram, QueueStats, LATENCY_BUCKETS_MS, LATENCY_BUCKETS_US};
pub use transience::{Transience, SNOOZE_WHEN_FULL};
