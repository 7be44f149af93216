//! `ach.group` (the map): the batch keys of a chunk of entries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tranche_ach::{BatchKey, Grouping};
use tranche_ach_ledger::{SeqEntry, State};
use tranche_core::JobContext;
use tranche_types::Outcome;

use super::Scope;
use crate::seqs::SeqSet;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// A chunk of a pass's claimed entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GroupArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// The window's same-day flag.
    pub same_day: bool,
    /// The entries.
    pub seqs: SeqSet,
}

/// The chunk's entries by batch key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Grouped {
    /// Each batch key with its entries, keys ascending.
    pub groups: Vec<(BatchKey, SeqSet)>,
    /// Entries no longer to be packaged (cancelled, packaged or rejected since the
    /// plan read them), or gone.
    pub dropped: SeqSet,
}

pub(super) async fn run(p: Payments, _ctx: JobContext, a: GroupArgs) -> Outcome<Grouped> {
    outcome(group(&p, a).await)
}

async fn group(p: &Payments, a: GroupArgs) -> StepResult<Grouped> {
    let grouping = p.bank(&a.scope.bank)?.grouping;
    let started = std::time::Instant::now();
    let entries = p
        .ledger()
        .entries_at(&a.seqs.to_vec())
        .await
        .map_err(|e| StepError::ledger("reading the chunk's entries", e))?;
    let read_took = started.elapsed();
    let grouped = by_batch(&entries, &a.scope, a.same_day, grouping, &a.seqs);
    tracing::debug!(
        scope = %a.scope,
        entries = entries.len(),
        read_us = read_took.as_micros() as u64,
        grouped_us = started.elapsed().as_micros() as u64,
        "ACH chunk grouped"
    );
    Ok(grouped)
}

/// Whether the pass of `scope` may still package `e`.
pub(super) fn packageable(e: &SeqEntry, scope: &Scope, same_day: bool) -> bool {
    e.state == State::Accepted
        && e.entry.bank == scope.bank
        && e.entry.submission_date == scope.date
        && e.entry.same_day == same_day
}

/// The batch key `grouping` gives an entry.
pub(super) fn key_of(e: &tranche_ach::Entry, grouping: Grouping) -> BatchKey {
    match grouping {
        Grouping::Separate => e.batch_key(),
        Grouping::Mixed => e.mixed_batch_key(),
    }
}

fn by_batch(
    entries: &[SeqEntry],
    scope: &Scope,
    same_day: bool,
    grouping: Grouping,
    asked: &SeqSet,
) -> Grouped {
    let mut groups: BTreeMap<BatchKey, Vec<i64>> = BTreeMap::new();
    let mut kept = Vec::with_capacity(entries.len());
    for e in entries.iter().filter(|e| packageable(e, scope, same_day)) {
        // Entries come in seq order, so each key's seqs are ascending.
        groups
            .entry(key_of(&e.entry, grouping))
            .or_default()
            .push(e.seq);
        kept.push(e.seq);
    }
    Grouped {
        dropped: asked.without(&SeqSet::from_sorted(kept)),
        groups: groups
            .into_iter()
            .map(|(k, seqs)| (k, SeqSet::from_sorted(seqs)))
            .collect(),
    }
}
