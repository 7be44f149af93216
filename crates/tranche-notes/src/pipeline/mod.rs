//! The night as chains of jobs on the engine: per client `process → render → sign →
//! mail`, in a run named `contract-notes/<date>`.
//!
//! Each step reads its predecessor's artifact from the [`Storage`] and writes its own
//! under the partitioned layout `{d}-{kind}/{date}/{client}.{ext}`, so any worker
//! process sharing the store can take any step, and a step that runs again (a lease
//! lost, a retry) finds what it needs. A step's result — the client, pages, net amount,
//! bytes, message id, carried forward — is the next step's input; the last one's is the
//! client's line in the report. Input problems fail only their client's chain, at
//! `process`, with file, line and field. Mail is an exactly-once effect per client and
//! day: a redelivered `mail` job finds it recorded and does not send again.

mod artifacts;
mod chain;
mod drive;
mod mail_text;
mod password;
mod plan;
mod report;
mod source;
mod space;
mod step_error;
mod steps;
mod submit;

use std::sync::Arc;

use chrono::NaiveDate;
use tranche_mail::Mailer;
use tranche_sign::{Cipher, Signer};
use tranche_storage::Storage;
use tranche_types::RunName;

use crate::input::Broker;
use crate::render::helper::RenderHelpers;
use crate::render::Renderer;

pub use drive::{DriveError, StepCounts, Workers};
pub use password::PasswordRule;
pub use plan::{plan_night, Day, NightPlan, PlannedChain, ProcessArgs, RowAccount, Unaccounted};
pub use report::{ReportRow, ReportStatus, ReportSummary};
pub use source::NightSource;
pub use submit::{Attention, ChainIds, Corrections, EnqueueError, Submitted};

pub(crate) use artifacts::Artifacts;
pub(crate) use chain::ChainStep;
pub(crate) use drive::{work_until_finished, LEASE};
pub(crate) use report::{collect_report, write_accounting, write_report};
pub(crate) use source::publish_broker;
pub(crate) use space::StoreSpace;
pub(crate) use steps::register;
pub(crate) use submit::submit_night;

/// A step of the chain: its task kind, its queue (a machine role) and how many attempts
/// it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The task kind its jobs are registered and enqueued under, e.g. `notes.render`.
    pub(crate) kind: &'static str,
    /// The queue its jobs wait in, e.g. `render`: what `tranche worker --queues` names.
    pub queue: &'static str,
    pub(crate) max_attempts: u32,
    /// What the progress display calls jobs of this step that are done.
    pub(crate) done_label: &'static str,
}

pub(crate) const PROCESS: Step = Step {
    kind: "notes.process",
    queue: "process",
    max_attempts: 3,
    done_label: "processed",
};
pub(crate) const RENDER: Step = Step {
    kind: "notes.render",
    queue: "render",
    max_attempts: 3,
    done_label: "rendered",
};
pub(crate) const SIGN: Step = Step {
    kind: "notes.sign",
    queue: "sign",
    max_attempts: 3,
    done_label: "signed",
};
/// Mail servers refuse for a while (greylisting, rate limits): more attempts, longer
/// backoff.
pub(crate) const MAIL: Step = Step {
    kind: "notes.mail",
    queue: "mail",
    max_attempts: 8,
    done_label: "mailed",
};

/// The chain's steps in order: process, render, sign, mail.
pub const STEPS: [Step; 4] = [PROCESS, RENDER, SIGN, MAIL];

/// The run that holds the night of `date`: `contract-notes/<date>`.
pub fn run_name(date: NaiveDate) -> RunName {
    RunName::new(format!("contract-notes/{date}")).expect("a date makes a valid run name")
}

/// One night as its steps see it: the date and broker (from the store, see
/// [`NightSource`]) and what the worker process shares across nights.
pub(crate) struct Night {
    pub(crate) date: NaiveDate,
    pub(crate) broker: Broker,
    pub(crate) store: Arc<dyn Storage>,
    /// Whether `store` has room: the writing steps pause on it.
    pub(crate) space: Arc<StoreSpace>,
    pub(crate) renderer: Arc<Renderer>,
    /// Render in these helper processes instead of in this one, when given.
    pub(crate) helpers: Option<Arc<RenderHelpers>>,
    pub(crate) signer: Arc<dyn Signer>,
    pub(crate) mailer: Arc<dyn Mailer>,
    pub(crate) password_rule: PasswordRule,
    pub(crate) owner_password: String,
    pub(crate) cipher: Cipher,
}

impl std::fmt::Debug for Night {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passwords.
        f.debug_struct("Night").field("date", &self.date).finish()
    }
}
