//! `ach.finish`: the pass's manifest, its claims released, and its files handed to
//! submission when the window is open.

use serde::{Deserialize, Serialize};
use tranche_core::JobContext;
use tranche_types::{JobState, Outcome};

use super::{At, Member, Scope, WrittenFile};
use crate::manifest::Manifest;
use crate::naming::manifest_key;
use crate::seqs::SeqSet;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// The end of a pass.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FinishArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// When the pass acts.
    pub at: At,
    /// The pass.
    pub pass: i64,
    /// Who holds its claims.
    pub owner: String,
    /// The entries it claimed (and its groupers saw).
    pub claimed: SeqSet,
    /// The window's same-day flag (part of the claims' keys).
    pub same_day: bool,
}

/// The manifest's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finished {
    /// Where the manifest is.
    pub manifest: String,
    /// Files written.
    pub files: u64,
    /// Entries in them.
    pub entries: u64,
}

pub(super) async fn run(p: Payments, ctx: JobContext, a: FinishArgs) -> Outcome<Finished> {
    outcome(finish(&p, &ctx, a).await)
}

async fn finish(p: &Payments, ctx: &JobContext, a: FinishArgs) -> StepResult<Finished> {
    let members: Vec<Member<Option<WrittenFile>>> = ctx
        .input()
        .map_err(|e| StepError::permanent("reading the writers' outcomes", e))?
        .unwrap_or_default();
    let mut files = Vec::new();
    let mut failed_writers = 0;
    for m in members {
        match (m.state, m.result) {
            (JobState::Succeeded, Some(f)) => files.extend(f),
            _ => failed_writers += 1,
        }
    }
    let manifest = Manifest {
        pass: a.pass,
        bank: a.scope.bank.clone(),
        window: a.scope.window.clone(),
        date: a.scope.date,
        at: a.at,
        files,
        failed_writers,
    };
    let key = manifest_key(a.scope.date, &a.scope.bank, &a.scope.window, a.pass)
        .map_err(|e| StepError::permanent("naming the manifest", e))?;
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
    p.store()
        .put(&key, json)
        .await
        .map_err(|e| StepError::store("storing the manifest", e))?;
    super::plan::release(
        p,
        &a.owner,
        &a.scope,
        a.same_day,
        std::slice::from_ref(&a.claimed),
    )
    .await;
    if !manifest.files.is_empty() {
        super::enqueue_submit(p, &a.scope, a.at, format!("submit/pass/{}", a.pass))
            .await
            .map_err(|e| StepError::backend("handing the files to submission", e))?;
    }
    tracing::info!(scope = %a.scope, files = manifest.files.len(), entries = manifest.entries(), "ACH pass finished");
    Ok(Finished {
        manifest: key.to_string(),
        files: manifest.files.len() as u64,
        entries: manifest.entries(),
    })
}
