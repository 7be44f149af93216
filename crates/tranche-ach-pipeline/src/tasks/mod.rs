//! The steps of a pass, as engine task kinds, and what their jobs carry.
//!
//! ```text
//! tick ─► ach.plan ──claims──► group( ach.group × ⌈n/1000⌉ ) ─► ach.reduce
//!                                                               │
//!          group( ach.write × files ) ◄──────────────────────────┘
//!            └─► ach.finish (manifest, locks released) ─► ach.submit ─► ach.upload/<bank> × files
//! ```
//!
//! Every job of a bank's window on one day is in the run `ach/<bank>/<window>/<date>`.
//! Jobs carry seqs ([`SeqSet`]), never entries: the ledger is the only copy of the
//! money, and every step re-reads it (a cancel may have come since the pass began).

mod finish;
mod group;
mod plan;
mod reduce;
mod submit;
mod upload;
mod write;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use tranche_core::{Registry, TaskOptions};
use tranche_types::{JobSpec, RunName};

use crate::naming;
use crate::Payments;

pub use finish::FinishArgs;
pub use group::{GroupArgs, Grouped};
pub use plan::{PlanArgs, Planned};
pub use reduce::ReduceArgs;
pub use submit::{SubmitArgs, Submitted};
pub use upload::{UploadArgs, Uploaded};
pub use write::{WriteArgs, WrittenFile};

/// The queue every ACH step runs on.
pub const QUEUE: &str = "ach";
/// Claims the eligible entries of a window and fans out the grouping.
pub const PLAN: &str = "ach.plan";
/// Computes the batch keys of at most [`CHUNK`] entries (the map).
pub const GROUP: &str = "ach.group";
/// Merges the groups and splits them into files (the reduce).
pub const REDUCE: &str = "ach.reduce";
/// Writes, validates, stores and records one file.
pub const WRITE: &str = "ach.write";
/// Writes the pass's manifest and releases its claims.
pub const FINISH: &str = "ach.finish";
/// Hands a window's packaged files to their uploads.
pub const SUBMIT: &str = "ach.submit";
/// Uploads one file: `ach.upload/<bank>`, one kind per bank (its pacing limit).
pub const UPLOAD_PREFIX: &str = "ach.upload/";

/// Entries per grouper job.
pub const CHUNK: u64 = 1_000;

/// A bank's window on one submission date: what a pass packages and submits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Scope {
    /// The bank (its key in the rules and in entries).
    pub bank: String,
    /// The window's name.
    pub window: String,
    /// The submission date.
    pub date: NaiveDate,
}

impl Scope {
    /// The run its jobs are in.
    pub fn run(&self) -> RunName {
        naming::run_name(&self.bank, &self.window, self.date)
            .expect("bank and window names are checked by the rules")
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.bank, self.window, self.date)
    }
}

/// A group member's ending as a callback reads it: `tranche_types::MemberOutcome`
/// with its result read as the member's own type.
#[derive(Debug, Deserialize)]
pub(crate) struct Member<T> {
    state: tranche_types::JobState,
    #[serde(default = "none")]
    result: Option<T>,
}

fn none<T>() -> Option<T> {
    None
}

/// The time a pass acts at: the tick's (so `--once --at` replays a moment), carried
/// by every job of the pass; files are dated by it.
pub type At = DateTime<Utc>;

fn options(attempts: u32) -> TaskOptions {
    TaskOptions::default().queue(QUEUE).max_attempts(attempts)
}

/// The task kinds of the pipeline, bound to `payments`.
pub fn registry(payments: &Payments) -> Registry {
    let mut r = Registry::new();
    let p = payments.clone();
    r.register(PLAN, options(10), move |ctx, a| {
        plan::run(p.clone(), ctx, a)
    });
    let p = payments.clone();
    r.register(GROUP, options(10), move |ctx, a| {
        group::run(p.clone(), ctx, a)
    });
    let p = payments.clone();
    r.register(REDUCE, options(10), move |ctx, a| {
        reduce::run(p.clone(), ctx, a)
    });
    let p = payments.clone();
    r.register(WRITE, options(10), move |ctx, a| {
        write::run(p.clone(), ctx, a)
    });
    let p = payments.clone();
    r.register(FINISH, options(10), move |ctx, a| {
        finish::run(p.clone(), ctx, a)
    });
    let p = payments.clone();
    r.register(SUBMIT, options(10), move |ctx, a| {
        submit::run(p.clone(), ctx, a)
    });
    for bank in &payments.rules().banks {
        let p = payments.clone();
        r.register(
            &naming::upload_kind(&bank.profile.bank),
            options(20),
            move |ctx, a| upload::run(p.clone(), ctx, a),
        );
    }
    r
}

/// A job of `kind` on the ACH queue with `args`.
pub(crate) fn job<A: Serialize>(kind: &str, args: &A, attempts: u32) -> JobSpec {
    let args = serde_json::to_string(args).expect("step arguments serialise");
    JobSpec::new(kind, args).queue(QUEUE).max_attempts(attempts)
}

/// Enqueue `spec` into `scope`'s run once per unique `key`: true when this call added
/// it (false: an engine's earlier call did).
pub(crate) async fn enqueue_once(
    p: &Payments,
    scope: &Scope,
    spec: JobSpec,
    key: String,
) -> Result<bool, tranche_types::BackendError> {
    let out = p
        .client()
        .enqueue(tranche_types::EnqueueRequest {
            run: scope.run(),
            items: vec![tranche_types::EnqueueItem::Job(spec.unique_key(key))],
            on_done: None,
        })
        .await?;
    Ok(out.first().is_some_and(|e| !e.existed))
}

pub(crate) use plan::enqueue_plan;
pub(crate) use submit::enqueue_submit;

/// How the file ID modifiers of `scope`'s bank and date stand: what a reduce and a
/// writer read before choosing one.
pub(crate) async fn day_modifiers(
    p: &Payments,
    scope: &Scope,
) -> crate::step_error::StepResult<crate::naming::DayModifiers> {
    let files = p
        .ledger()
        .files(&tranche_ach_ledger::FileFilter {
            bank: Some(scope.bank.clone()),
            submission_date: Some(scope.date),
            state: None,
        })
        .await
        .map_err(|e| crate::step_error::StepError::ledger("listing the day's files", e))?;
    Ok(crate::naming::DayModifiers::of(&files))
}
