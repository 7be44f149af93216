//! `ach.upload/<bank>`: deliver one file, at most once.

use serde::{Deserialize, Serialize};
use tranche_ach_delivery::{sha256_hex, DeliveryError};
use tranche_ach_ledger::{BeginOutcome, ReleaseOutcome, ResetOutcome, Submission, SubmitOutcome};
use tranche_core::JobContext;
use tranche_types::Outcome;

use super::{At, Scope};
use crate::naming::file_key;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// One file to upload.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UploadArgs {
    /// The file's bank, window and date.
    pub scope: Scope,
    /// The file.
    pub file_id: String,
    /// When its submission was decided (the submit's moment).
    pub at: At,
    /// The engine's clock when it was decided: `at` plus the time since is the
    /// upload's moment, in a replayed day (`--once --at`) as in a live one.
    pub decided: tranche_types::Timestamp,
}

/// What became of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Uploaded {
    /// Delivered now.
    Delivered {
        /// Where.
        destination: String,
    },
    /// An upload a crash interrupted had arrived: recorded now.
    FoundDelivered {
        /// Where.
        destination: String,
    },
    /// Delivered before.
    AlreadySubmitted,
    /// It held a cancelled entry: released, and its other entries handed to a new pass.
    Rebuilding {
        /// The cancelled entries.
        cancelled: u64,
    },
    /// Released or unknown: its entries are elsewhere.
    Gone,
    /// Its window closed before the upload could begin: not sent (the next tick
    /// releases the file, and its entries wait for a later window).
    WindowClosed,
}

pub(super) async fn run(p: Payments, _ctx: JobContext, a: UploadArgs) -> Outcome<Uploaded> {
    outcome(upload(&p, a).await)
}

async fn upload(p: &Payments, a: UploadArgs) -> StepResult<Uploaded> {
    // An upload waits behind its bank's pacing and its own retries: past the bank's
    // cut-off it must not begin (a file that was begun is settled whatever the time).
    let (bank, window) = p.window(&a.scope)?;
    let since = p.client().clock().now().since(a.decided);
    let now = a.at + chrono::Duration::from_std(since).unwrap_or_default();
    if now >= window.ends(a.scope.date, bank.time_zone) {
        // Only a file not yet begun is left; one begun (in doubt) is settled below.
        let record = file_detail(p, &a.file_id).await?;
        if record.state == tranche_ach_ledger::FileState::Packaged {
            tracing::warn!(file = %a.file_id, "the window closed before the upload began: not sent");
            return Ok(Uploaded::WindowClosed);
        }
    }
    let delivery = p.delivery(&a.scope.bank).await?;
    let destination = delivery.location();
    let ledger = p.ledger();
    // Twice at most: an in-doubt upload that did not arrive is reset, then begun again.
    for _ in 0..2 {
        let begun = ledger
            .begin_submission(&a.file_id, &destination)
            .await
            .map_err(|e| StepError::ledger("beginning the submission", e))?;
        match begun {
            BeginOutcome::Started { .. } => {
                let (name, hash, bytes) = stored(p, &a).await?;
                if let Err(e) = delivery.deliver(&name, &bytes).await {
                    if matches!(e, DeliveryError::Full { .. }) {
                        p.destinations().full(
                            &a.scope.bank,
                            &destination,
                            &name,
                            bytes.len() as u64,
                            delivery.free_space(),
                        );
                    }
                    // Left submitting: the next attempt asks the destination first.
                    return Err(StepError::delivery("delivering the file", e));
                }
                p.destinations().room(&destination);
                mark(p, &a.file_id, &destination, &hash).await?;
                tracing::info!(file = %a.file_id, %destination, "ACH file delivered");
                return Ok(Uploaded::Delivered { destination });
            }
            BeginOutcome::InDoubt { .. } => {
                let detail = file_detail(p, &a.file_id).await?;
                let (name, hash) = (detail.file.name.clone(), detail.file.hash.clone());
                let found = delivery
                    .find(&name)
                    .await
                    .map_err(|e| StepError::delivery("looking for an interrupted upload", e))?;
                match found {
                    Some(h) if h == hash => {
                        mark(p, &a.file_id, &destination, &hash).await?;
                        return Ok(Uploaded::FoundDelivered { destination });
                    }
                    Some(_) => {
                        return Err(StepError::permanent(
                            "settling an interrupted upload",
                            format!("{destination} holds a different file named {name}: not overwritten; look at it before resetting {}", a.file_id),
                        ))
                    }
                    None => {
                        let reset = ledger
                            .reset_submission(&a.file_id)
                            .await
                            .map_err(|e| StepError::ledger("resetting an upload that did not arrive", e))?;
                        if !matches!(reset, ResetOutcome::Reset | ResetOutcome::NotSubmitting(_)) {
                            return Ok(Uploaded::Gone);
                        }
                        // Packaged again: past the cut-off it is not begun again (an
                        // upload that waited out a full disk or a dead server), and the
                        // tick releases it to a later window.
                        if now >= window.ends(a.scope.date, bank.time_zone) {
                            tracing::warn!(file = %a.file_id, "the window closed before the upload could be begun again: not sent");
                            return Ok(Uploaded::WindowClosed);
                        }
                    }
                }
            }
            BeginOutcome::AlreadySubmitted(_) => return Ok(Uploaded::AlreadySubmitted),
            BeginOutcome::Refused { cancelled } => {
                let released = ledger
                    .release_file(&a.file_id)
                    .await
                    .map_err(|e| StepError::ledger("releasing a file with a cancelled entry", e))?;
                if matches!(
                    released,
                    ReleaseOutcome::Released { .. } | ReleaseOutcome::AlreadyReleased
                ) {
                    // At the submission's moment, which is inside the window's packaging
                    // phase: the new pass packages them for this window.
                    super::enqueue_plan(p, &a.scope, a.at, format!("plan/rebuild/{}", a.file_id))
                        .await
                        .map_err(|e| StepError::backend("handing the entries to a new pass", e))?;
                }
                tracing::info!(file = %a.file_id, cancelled = cancelled.len(), "file released before upload: it holds cancelled entries");
                return Ok(Uploaded::Rebuilding {
                    cancelled: cancelled.len() as u64,
                });
            }
            BeginOutcome::Released | BeginOutcome::UnknownFile => return Ok(Uploaded::Gone),
        }
    }
    Err(StepError::transient(
        "submitting the file",
        "its in-doubt upload was reset and began again, twice",
    ))
}

async fn file_detail(p: &Payments, file_id: &str) -> StepResult<tranche_ach_ledger::FileRecord> {
    p.ledger()
        .file(file_id)
        .await
        .map_err(|e| StepError::ledger("reading the file", e))?
        .map(|d| d.record)
        .ok_or_else(|| {
            StepError::permanent(
                "reading the file",
                format!("{file_id} is not in the ledger"),
            )
        })
}

/// The file's name, hash and bytes, checked against the hash the ledger recorded.
async fn stored(p: &Payments, a: &UploadArgs) -> StepResult<(String, String, Vec<u8>)> {
    let record = file_detail(p, &a.file_id).await?;
    let key = file_key(record.file.submission_date, &a.file_id, &record.file.hash)
        .map_err(|e| StepError::permanent("naming the file in the store", e))?;
    let bytes = p
        .store()
        .get(&key)
        .await
        .map_err(|e| StepError::store("reading the file from the store", e))?;
    let hash = sha256_hex(&bytes);
    if hash != record.file.hash {
        return Err(StepError::permanent(
            "reading the file from the store",
            format!("{key}: expected SHA-256 {}, got {hash}", record.file.hash),
        ));
    }
    Ok((record.file.name, hash, bytes))
}

async fn mark(p: &Payments, file_id: &str, destination: &str, hash: &str) -> StepResult<()> {
    let at = p.client().clock().now();
    let out = p
        .ledger()
        .mark_submitted(
            file_id,
            Submission {
                at,
                destination: destination.to_string(),
                hash: hash.to_string(),
            },
        )
        .await
        .map_err(|e| StepError::ledger("recording the submission", e))?;
    match out {
        SubmitOutcome::Submitted | SubmitOutcome::AlreadySubmitted(_) => Ok(()),
        other => Err(StepError::permanent(
            "recording the submission",
            format!("the ledger refused it: {other:?}"),
        )),
    }
}
