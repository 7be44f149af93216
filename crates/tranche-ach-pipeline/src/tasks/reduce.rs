//! `ach.reduce`: merge the groupers' batches and split them into files.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tranche_ach::BatchKey;
use tranche_core::JobContext;
use tranche_types::{EnqueueItem, EnqueueRequest, JobState, Outcome};

use super::{job, At, FinishArgs, Grouped, Member, Scope, WriteArgs, FINISH, WRITE};
use crate::seqs::SeqSet;
use crate::split::split;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// The reduce of a pass.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReduceArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// When the pass acts.
    pub at: At,
    /// The pass (its plan job's id).
    pub pass: i64,
    /// Who holds the pass's claims.
    pub owner: String,
    /// The window's same-day flag.
    pub same_day: bool,
}

/// What the reduce decided.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Reduced {
    /// Batches found.
    pub batches: u64,
    /// Entries to write.
    pub entries: u64,
    /// Files planned.
    pub files: u64,
    /// Groupers that failed for good: their entries wait for a later pass.
    pub failed_groupers: u64,
    /// Entries of files planned for which no file ID modifier was free: they stay
    /// accepted, for a later pass once a file gives its modifier back
    /// (`tranche ach status` says so).
    #[serde(default)]
    pub no_modifier: u64,
}

pub(super) async fn run(p: Payments, ctx: JobContext, a: ReduceArgs) -> Outcome<Reduced> {
    outcome(reduce(&p, &ctx, a).await)
}

async fn reduce(p: &Payments, ctx: &JobContext, a: ReduceArgs) -> StepResult<Reduced> {
    let started = std::time::Instant::now();
    // Read straight into the groupers' result type (not through JSON values): a
    // day's reduce reads a thousand of them.
    let members: Vec<Member<Grouped>> = ctx
        .input()
        .map_err(|e| StepError::permanent("reading the groupers' outcomes", e))?
        .unwrap_or_default();
    let mut batches: BTreeMap<BatchKey, Vec<i64>> = BTreeMap::new();
    let mut claimed: Vec<SeqSet> = Vec::new();
    let mut failed_groupers = 0;
    for m in members {
        let g = match (m.state, m.result) {
            (JobState::Succeeded, Some(g)) => g,
            _ => {
                failed_groupers += 1;
                continue;
            }
        };
        for (key, seqs) in g.groups {
            batches.entry(key).or_default().extend(seqs.iter());
            claimed.push(seqs);
        }
        claimed.push(g.dropped);
    }
    let claimed = SeqSet::union(&claimed);
    let batches: Vec<(BatchKey, Vec<i64>)> = batches
        .into_iter()
        .map(|(k, mut seqs)| {
            seqs.sort_unstable();
            (k, seqs)
        })
        .collect();
    let cap = u64::from(p.bank(&a.scope.bank)?.max_entries_per_file);
    let mut files = split(&batches, cap);
    let entries: u64 = files.iter().map(|f| f.entries).sum();
    let mut reduced = Reduced {
        batches: batches.len() as u64,
        entries,
        files: files.len() as u64,
        failed_groupers,
        no_modifier: 0,
    };
    // Modifiers are only a first choice: a writer finding its modifier taken (another
    // pass of the bank's day chose it too) takes the next free one.
    let day = super::day_modifiers(p, &a.scope).await?;
    let free = day.free(files.len());
    if free.len() < files.len() {
        let left: u64 = files[free.len()..].iter().map(|f| f.entries).sum();
        reduced.no_modifier = left;
        tracing::warn!(
            bank = %a.scope.bank,
            date = %a.scope.date,
            entries = left,
            files = files.len() - free.len(),
            "no file ID modifier is free for these files: their entries wait (tranche ach status)"
        );
        files.truncate(free.len());
    }
    if files.is_empty() {
        super::plan::release(
            p,
            &a.owner,
            &a.scope,
            a.same_day,
            std::slice::from_ref(&claimed),
        )
        .await;
        return Ok(reduced);
    }
    let writers = files
        .into_iter()
        .enumerate()
        .map(|(i, f)| {
            job(
                WRITE,
                &WriteArgs {
                    scope: a.scope.clone(),
                    at: a.at,
                    pass: a.pass,
                    same_day: a.same_day,
                    index: i as u32,
                    seqs: f.seqs,
                    modifier: free.get(i).copied(),
                    file_id: free
                        .get(i)
                        .map(|&m| day.next_id(&a.scope.bank, a.scope.date, m)),
                },
                10,
            )
        })
        .collect();
    let finish = job(
        FINISH,
        &FinishArgs {
            scope: a.scope.clone(),
            at: a.at,
            pass: a.pass,
            owner: a.owner.clone(),
            claimed,
            same_day: a.same_day,
        },
        10,
    )
    .unique_key(format!("finish/{}", a.pass));
    p.client()
        .enqueue(EnqueueRequest {
            run: a.scope.run(),
            items: vec![EnqueueItem::Group {
                members: writers,
                callback: finish,
            }],
            on_done: None,
        })
        .await
        .map_err(|e| StepError::backend("enqueueing the file writers", e))?;
    tracing::debug!(scope = %a.scope, files = reduced.files, took_ms = started.elapsed().as_millis() as u64, "ACH batches split into files");
    Ok(reduced)
}
