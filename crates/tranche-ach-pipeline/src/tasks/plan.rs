//! `ach.plan`: claim a window's eligible entries and fan out the grouping.

use serde::{Deserialize, Serialize};
use tranche_ach_ledger::{EligibleQuery, FileFilter, FileState, ReleaseOutcome};
use tranche_core::JobContext;
use tranche_types::{EnqueueItem, EnqueueRequest, LockClaim, Outcome};

use super::{job, At, GroupArgs, ReduceArgs, Scope, CHUNK, GROUP, PLAN, REDUCE};
use crate::naming::claim_keys;
use crate::seqs::SeqSet;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// Entries read from the ledger per page while planning.
const PAGE: u32 = 10_000;

/// A package pass of `scope`, acting at `at`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// When the pass acts (its files are dated by it).
    pub at: At,
}

/// What a plan did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Planned {
    /// Eligible entries found.
    pub eligible: u64,
    /// Of those, claimed by this pass and handed to its groupers.
    pub claimed: u64,
    /// Of those, left alone: another packager holds a claim in their chunk.
    pub held_elsewhere: u64,
    /// Packaged files of the window released because they hold a cancelled entry.
    pub released_files: Vec<String>,
    /// The window is not in its packaging phase at `at`: nothing done.
    #[serde(default)]
    pub out_of_window: bool,
    /// A retry of a plan whose group was enqueued: the pass goes on in its jobs.
    #[serde(default)]
    pub already_planned: bool,
}

/// Enqueue a package pass of `scope` at `at`, once per `key` in the scope's run.
pub(crate) async fn enqueue_plan(
    p: &Payments,
    scope: &Scope,
    at: At,
    key: String,
) -> Result<bool, tranche_types::BackendError> {
    let args = PlanArgs {
        scope: scope.clone(),
        at,
    };
    super::enqueue_once(p, scope, job(PLAN, &args, 10), key).await
}

pub(super) async fn run(p: Payments, ctx: JobContext, a: PlanArgs) -> Outcome<Planned> {
    outcome(plan(&p, &ctx, a).await)
}

async fn plan(p: &Payments, ctx: &JobContext, a: PlanArgs) -> StepResult<Planned> {
    let (bank, window) = p.window(&a.scope)?;
    let tz = bank.time_zone;
    let in_phase =
        window.packaging_from(a.scope.date, tz) <= a.at && a.at < window.ends(a.scope.date, tz);
    if !in_phase {
        return Ok(Planned {
            out_of_window: true,
            ..Planned::default()
        });
    }
    let same_day = window.same_day();
    let run = a.scope.run();
    let pass = ctx.id().0;
    let reduce_key = format!("reduce/{pass}");
    let existing = p
        .client()
        .unique_jobs(&run, std::slice::from_ref(&reduce_key))
        .await
        .map_err(|e| StepError::backend("looking for this pass's reduce", e))?;
    if existing.first().is_some_and(Option::is_some) {
        return Ok(Planned {
            already_planned: true,
            ..Planned::default()
        });
    }
    let released_files = rebuild(p, &a.scope).await?;
    let started = std::time::Instant::now();

    let ledger = p.ledger();
    let mut seqs = Vec::new();
    let mut after = None;
    loop {
        let page = ledger
            .eligible_seqs(&EligibleQuery {
                bank: a.scope.bank.clone(),
                submission_date: a.scope.date,
                same_day,
                after,
                limit: PAGE,
            })
            .await
            .map_err(|e| StepError::ledger("listing eligible entries", e))?;
        let Some(&last) = page.last() else { break };
        after = Some(last);
        let full = page.len() as u32 == PAGE;
        seqs.extend(page);
        if !full {
            break;
        }
    }
    let eligible = seqs.len() as u64;
    let listed_took = started.elapsed();

    // Claims belong to this attempt: a redelivered plan cannot take a lost attempt's
    // claims for its own; those lapse after the TTL and their entries wait a pass.
    let owner = format!("ach-pass:{pass}:{}", ctx.attempt());
    let ttl = p.rules().engine.claim_ttl;
    let mut claimed: Vec<SeqSet> = Vec::new();
    let mut held_elsewhere = 0;
    let scope = &a.scope;
    for chunk in SeqSet::from_sorted(seqs).chunks(CHUNK) {
        let keys = claim_keys(&scope.bank, scope.date, same_day, chunk.iter());
        match p
            .client()
            .claim_locks(tranche_types::LockRequest {
                owner: &owner,
                keys: &keys,
                ttl,
            })
            .await
        {
            Ok(LockClaim::Claimed) => claimed.push(chunk),
            Ok(LockClaim::Conflict { .. }) => held_elsewhere += chunk.len(),
            Err(e) => {
                release(p, &owner, &a.scope, same_day, &claimed).await;
                return Err(StepError::backend("claiming entries", e));
            }
        }
    }
    let claimed_count: u64 = claimed.iter().map(SeqSet::len).sum();
    if claimed.is_empty() {
        return Ok(Planned {
            eligible,
            held_elsewhere,
            released_files,
            ..Planned::default()
        });
    }
    let members = claimed
        .iter()
        .map(|seqs| {
            job(
                GROUP,
                &GroupArgs {
                    scope: a.scope.clone(),
                    same_day,
                    seqs: seqs.clone(),
                },
                10,
            )
        })
        .collect();
    let callback = job(
        REDUCE,
        &ReduceArgs {
            scope: a.scope.clone(),
            at: a.at,
            pass,
            owner: owner.clone(),
            same_day,
        },
        10,
    )
    .unique_key(reduce_key);
    let enqueued = p
        .client()
        .enqueue(EnqueueRequest {
            run,
            items: vec![EnqueueItem::Group { members, callback }],
            on_done: None,
        })
        .await;
    if let Err(e) = enqueued {
        release(p, &owner, &a.scope, same_day, &claimed).await;
        return Err(StepError::backend("enqueueing the groupers", e));
    }
    tracing::info!(
        scope = %a.scope,
        eligible,
        claimed = claimed_count,
        held_elsewhere,
        listed_ms = listed_took.as_millis() as u64,
        took_ms = started.elapsed().as_millis() as u64,
        "ACH pass planned"
    );
    Ok(Planned {
        eligible,
        claimed: claimed_count,
        held_elsewhere,
        released_files,
        ..Planned::default()
    })
}

/// Release the window's packaged files that hold a cancelled entry: their other
/// entries go back to accepted, and this pass packages them again.
async fn rebuild(p: &Payments, scope: &Scope) -> StepResult<Vec<String>> {
    let ledger = p.ledger();
    let dirty = ledger
        .unsubmitted_files_with_cancellations()
        .await
        .map_err(|e| StepError::ledger("listing files with cancelled entries", e))?;
    if dirty.is_empty() {
        return Ok(Vec::new());
    }
    let mine = ledger
        .files(&FileFilter {
            bank: Some(scope.bank.clone()),
            submission_date: Some(scope.date),
            state: Some(FileState::Packaged),
        })
        .await
        .map_err(|e| StepError::ledger("listing the window's files", e))?;
    let mut released = Vec::new();
    for f in mine.iter().filter(|f| f.file.window == scope.window) {
        if !dirty.iter().any(|d| d.file_id == f.file.file_id) {
            continue;
        }
        let out = ledger
            .release_file(&f.file.file_id)
            .await
            .map_err(|e| StepError::ledger("releasing a file with a cancelled entry", e))?;
        if matches!(out, ReleaseOutcome::Released { .. }) {
            tracing::info!(file = %f.file.file_id, "file released: it holds a cancelled entry");
            released.push(f.file.file_id.clone());
        }
    }
    Ok(released)
}

/// Give back claims (best effort: unreleased ones lapse after their TTL).
pub(super) async fn release(
    p: &Payments,
    owner: &str,
    scope: &Scope,
    same_day: bool,
    sets: &[SeqSet],
) {
    let keys = claim_keys(
        &scope.bank,
        scope.date,
        same_day,
        sets.iter().flat_map(|s| {
            s.ranges().iter().flat_map(|&(a, b)| {
                // One seq per bucket the range touches is enough to name the bucket.
                let step = crate::naming::CLAIM_BUCKET;
                (a.div_euclid(step)..=b.div_euclid(step)).map(move |k| (k * step).max(a))
            })
        }),
    );
    for chunk in keys.chunks(CHUNK as usize) {
        if let Err(e) = p.client().release_locks(owner, chunk).await {
            tracing::warn!(error = %tranche_types::one_line(&e), "could not release ACH claims; they lapse after their TTL");
            return;
        }
    }
}
