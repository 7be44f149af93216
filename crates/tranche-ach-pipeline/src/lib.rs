//! Payment files on the engine: ACH entries in the ledger become NACHA files per bank
//! and submission window, and are delivered to the bank — with cancellations that
//! always win and no entry ever in two files.
//!
//! A [`Payments`] binds the four things a pass needs — the engine ([`Client`]), the
//! entry ledger, the store the files are kept in and the rules (banks, windows) — and
//! gives the engine its task kinds ([`Payments::registry`]). [`Payments::tick`] is
//! the heartbeat (`tranche ach engine` calls it every few minutes; `--once --at`
//! calls it once): it asks the rules what is due at that moment and enqueues it.
//!
//! # A pass
//!
//! Each bank's window of a day is a run, `ach/<bank>/<window>/<date>`. A package
//! pass (see [`tasks`]) is a map-reduce on the engine:
//!
//! 1. **plan** reads the eligible entries' seqs (accepted, uncancelled, of the bank,
//!    the submission date and the window's same-day flag), claims them in chunks of
//!    1,000 with the engine's all-or-nothing locks (a TTL, so a crashed packager's
//!    claims lapse; a chunk another packager holds is left to it), and enqueues a
//!    group of grouper jobs, one per chunk, with the reduce as its callback;
//! 2. **group** (map) reads its chunk from the ledger and computes each entry's batch
//!    key from the batch-level fields;
//! 3. **reduce** merges the groups and splits them into files of at most the bank's
//!    cap (whole batches where they fit: [`split`]), then enqueues a group of file
//!    writers with **finish** as its callback;
//! 4. **write** re-reads its entries (dropping any cancelled since), writes the NACHA
//!    file, validates it with [`tranche_ach::validate`], stores it, and records it in
//!    the ledger with [`Ledger::package`](tranche_ach_ledger::Ledger::package), which
//!    is all-or-nothing: an entry cancelled or taken meanwhile makes it refuse, and
//!    the writer writes the file again without that entry;
//! 5. **finish** writes the pass's manifest and releases the claims.
//!
//! Submission (`ach.submit`, from the submission window's begin to its end) hands each
//! packaged file to an upload job of its bank's kind, which the engine paces with a
//! kind limit (one start per the bank's pacing). An upload calls
//! [`begin_submission`](tranche_ach_ledger::Ledger::begin_submission) — the cut after
//! which a cancel answers "too late", refused if an entry was cancelled before — then
//! delivers and marks the file submitted. A crash between the two leaves the file in
//! doubt; the next upload asks the destination whether the file is there
//! ([`Delivery::find`](tranche_ach_delivery::Delivery::find)) instead of sending it
//! again.
//!
//! Rebuild: a packaged file holding a cancelled entry is released (its other entries
//! go back to accepted) by the next plan of its window, or by its upload, and they are
//! packaged again into a new file. A file whose window ended unsubmitted is released
//! by the tick: its entries are accepted again and a later window of their bank, date
//! and kind takes them (after the day's last such window they stay accepted, and
//! `tranche ach status` shows them). An upload that would begin after its window's
//! cut-off does not begin.

#![deny(missing_docs)]

mod dry_run;
mod manifest;
pub mod naming;
mod payments;
pub mod seqs;
mod space;
pub mod split;
mod status;
mod step_error;
pub mod tasks;
mod tick;

pub use dry_run::{DryRun, DryRunScope};
pub use manifest::{Manifest, ManifestFile};
pub use payments::{Payments, PipelineError};
pub use space::FullDestination;
pub use status::{
    day_status, BankFigures, DayStatus, FileCount, ModifierFigures, StateTally, WindowFigures,
};
pub use step_error::StepError;
pub use tick::{Tick, TickScope};
