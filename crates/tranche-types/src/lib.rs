//! The vocabulary every Tranche layer shares: ids, run names, job states and their
//! transitions, the closed set of handler outcomes, what is enqueued and what a worker
//! gets back, per-queue statistics and their fixed latency buckets, and the backend
//! error type.
//!
//! This crate has almost no dependencies on purpose: backends, the engine, pipelines and
//! the HTTP server all speak it, so it must stay cheap to depend on and free of I/O.

mod clock;
mod error;
mod event;
mod ids;
mod job;
mod outcome;
mod run;
mod state;
mod stats;

pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use error::{one_line, BackendError, Cause, TooLong};
pub use event::{JobEvent, QueueDepth};
pub use ids::{InvalidName, JobId, RunName};
pub use job::{
    AttemptError, CancelTarget, Completion, CompletionAck, EnqueueItem, EnqueueRequest, Enqueued,
    JobRecord, JobSpec, LeaseRef, ReserveRequest, ReservedJob, Resolution,
};
pub use outcome::Outcome;
pub use run::{Effect, JobFailure, LockClaim, MemberOutcome, RunProgress};
pub use state::JobState;
pub use stats::{latency_bucket, Histogram, QueueStats, LATENCY_BUCKETS_MS, LATENCY_BUCKETS_US};
