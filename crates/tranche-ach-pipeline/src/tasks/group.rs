//! `ach.group` (the map): the batch keys of a chunk of entries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tranche_ach::{BatchKey, Grouping, ServiceClass};
use tranche_ach_ledger::{SeqEntry, SeqKeys, State};
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
    // The batch-level columns only: a grouper never needs the payee's.
    let keyed = p
        .ledger()
        .batch_keys_at(&a.seqs.to_vec())
        .await
        .map_err(|e| StepError::ledger("reading the chunk's batch keys", e))?;
    let read_took = started.elapsed();
    let grouped = by_batch(&keyed, &a.scope, a.same_day, grouping, &a.seqs);
    tracing::debug!(
        scope = %a.scope,
        entries = keyed.entries.len(),
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

/// The chunk's packageable entries by the batch key `grouping` gives them (the
/// ledger's keys keep credits and debits apart; mixed batches join them).
fn by_batch(
    keyed: &SeqKeys,
    scope: &Scope,
    same_day: bool,
    grouping: Grouping,
    asked: &SeqSet,
) -> Grouped {
    // Seqs gathered per key as read (one per run of entries sharing a key), then merged
    // by key: a map lookup per run rather than per entry.
    let mut runs: Vec<Vec<i64>> = vec![Vec::new(); keyed.keys.len()];
    let mut kept = Vec::with_capacity(keyed.entries.len());
    for e in &keyed.entries {
        let key = &keyed.keys[e.key];
        let fits = e.state == State::Accepted
            && key.bank == scope.bank
            && e.submission_date == scope.date
            && key.same_day == same_day;
        if fits {
            runs[e.key].push(e.seq);
            kept.push(e.seq);
        }
    }
    let mut groups: BTreeMap<BatchKey, Vec<i64>> = BTreeMap::new();
    for (key, seqs) in keyed.keys.iter().zip(runs) {
        if seqs.is_empty() {
            continue;
        }
        let mut key = key.clone();
        if grouping == Grouping::Mixed {
            key.service_class = ServiceClass::Mixed;
        }
        // Entries come in seq order, so each key's seqs stay ascending.
        groups.entry(key).or_default().extend(seqs);
    }
    Grouped {
        dropped: asked.without(&SeqSet::from_sorted(kept)),
        groups: groups
            .into_iter()
            .map(|(k, seqs)| (k, SeqSet::from_sorted(seqs)))
            .collect(),
    }
}
