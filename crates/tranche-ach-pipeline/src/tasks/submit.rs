//! `ach.submit`: hand a window's packaged files to their bank's uploads.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tranche_ach_ledger::{FileFilter, FileState};
use tranche_core::JobContext;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, Outcome};

use super::{job, At, Scope, UploadArgs, SUBMIT};
use crate::naming::upload_kind;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// How long an upload's key keeps a second upload of the same file from being
/// enqueued: a day covers every window; an upload that failed for good frees it at
/// once, so the next submit tries again.
const UPLOAD_UNIQUE_FOR: Duration = Duration::from_secs(24 * 3600);

/// A submission of `scope`'s files, at `at`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SubmitArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// When (the window must be open then).
    pub at: At,
}

/// What a submit did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Submitted {
    /// Whether the window was open at `at`.
    pub open: bool,
    /// Files handed to new uploads.
    pub uploads: u64,
}

/// Enqueue a submission of `scope` at `at`, once per `key` in the scope's run.
pub(crate) async fn enqueue_submit(
    p: &Payments,
    scope: &Scope,
    at: At,
    key: String,
) -> Result<bool, BackendError> {
    let args = SubmitArgs {
        scope: scope.clone(),
        at,
    };
    super::enqueue_once(p, scope, job(SUBMIT, &args, 10), key).await
}

pub(super) async fn run(p: Payments, _ctx: JobContext, a: SubmitArgs) -> Outcome<Submitted> {
    outcome(submit(&p, a).await)
}

async fn submit(p: &Payments, a: SubmitArgs) -> StepResult<Submitted> {
    let (bank, window) = p.window(&a.scope)?;
    let tz = bank.time_zone;
    let open = window.begins(a.scope.date, tz) <= a.at && a.at < window.ends(a.scope.date, tz);
    if !open {
        return Ok(Submitted::default());
    }
    let files = p
        .ledger()
        .files(&FileFilter {
            bank: Some(a.scope.bank.clone()),
            submission_date: Some(a.scope.date),
            state: None,
        })
        .await
        .map_err(|e| StepError::ledger("listing the window's files", e))?;
    // Submitting ones too: an upload a crash interrupted is settled by its next one.
    let kind = upload_kind(&a.scope.bank);
    let decided = p.client().clock().now();
    let items: Vec<EnqueueItem> = files
        .iter()
        .filter(|f| f.file.window == a.scope.window)
        .filter(|f| matches!(f.state, FileState::Packaged | FileState::Submitting))
        .map(|f| {
            let args = UploadArgs {
                scope: a.scope.clone(),
                file_id: f.file.file_id.clone(),
                at: a.at,
                decided,
            };
            EnqueueItem::Job(
                job(&kind, &args, 20)
                    .unique_for(format!("upload/{}", f.file.file_id), UPLOAD_UNIQUE_FOR),
            )
        })
        .collect();
    if items.is_empty() {
        return Ok(Submitted { open, uploads: 0 });
    }
    let out = p
        .client()
        .enqueue(EnqueueRequest {
            run: a.scope.run(),
            items,
            on_done: None,
        })
        .await
        .map_err(|e| StepError::backend("enqueueing the uploads", e))?;
    Ok(Submitted {
        open,
        uploads: out.iter().filter(|e| !e.existed).count() as u64,
    })
}
