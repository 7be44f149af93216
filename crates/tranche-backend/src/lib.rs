//! The backend contract: where job state lives, behind one trait.
//!
//! **Internal.** Applications, pipelines, the HTTP server and the CLI program against
//! `tranche_core::Client` (and `Engine` for workers), never against [`Backend`]: the trait
//! grows a method whenever the engine needs a new atomic operation, which would break
//! every caller that held it directly. It is public only so that backend crates
//! (`tranche-sqlite`, `tranche-redis`) can implement it without depending on the engine,
//! in the way River keeps its driver interface internal.
//!
//! What an implementation must do is written on [`Backend`] and enforced by one shared
//! suite, `tranche-backend-tests`, run unchanged against every backend. What they have
//! in common lives here so it is written once:
//! - [`Notifier`]: in-process wake-ups of waiting reserves and feed reads;
//! - [`long_poll`]: "answer now, or wait for a wake-up, a due time or the deadline";
//! - [`Hints`]: how a backend is best driven (e.g. reserve calls in flight per queue),
//!   so callers stop hard-coding "on Redis use 2".
//!
//! Adding an operation: see `docs/checklists.md` in the repository.

#![deny(missing_docs)]

mod contract;
mod hints;
mod long_poll;
mod notifier;

pub use contract::Backend;
pub use hints::Hints;
pub use long_poll::{long_poll, Answer};
pub use notifier::Notifier;
