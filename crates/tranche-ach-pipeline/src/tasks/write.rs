//! `ach.write`: one file written, validated, stored and recorded in the ledger.

use serde::{Deserialize, Serialize};
use tranche_ach::{validate, write_file, Entry, FileOptions};
use tranche_ach_delivery::sha256_hex;
use tranche_ach_ledger::{NewFile, PackageOutcome};
use tranche_core::JobContext;
use tranche_types::Outcome;

use super::group::packageable;
use super::{At, Scope};
use crate::naming::{file_id, file_key, file_name, first_trace_sequence};
use crate::seqs::SeqSet;
use crate::step_error::{outcome, StepError, StepResult};
use crate::Payments;

/// How many times a writer writes its file again because entries were cancelled or
/// its modifier taken while it wrote, before it leaves the rest to a later attempt.
const ROUNDS: usize = 8;

/// One file of a pass.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriteArgs {
    /// The bank's window and date.
    pub scope: Scope,
    /// When the pass acts: the file's creation time.
    pub at: At,
    /// The pass.
    pub pass: i64,
    /// The window's same-day flag.
    pub same_day: bool,
    /// The file's place in the pass.
    pub index: u32,
    /// Its entries.
    pub seqs: SeqSet,
    /// The file ID modifier the reduce chose (`None`: the next free one).
    pub modifier: Option<char>,
    /// The file id the reduce chose with it (`None` from a reduce of before ids could
    /// take a modifier back: the modifier's first id).
    #[serde(default)]
    pub file_id: Option<String>,
}

/// A file as written and recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenFile {
    /// The ledger's id.
    pub file_id: String,
    /// Its name at the bank.
    pub name: String,
    /// Where its bytes are in the store.
    pub key: String,
    /// SHA-256 of its bytes, hex.
    pub hash: String,
    /// Bytes.
    pub bytes: u64,
    /// Entry detail records.
    pub entries: u64,
    /// Addenda records.
    pub addenda: u64,
    /// Batches.
    pub batches: u32,
    /// Debits in cents.
    pub debit_cents: u64,
    /// Credits in cents.
    pub credit_cents: u64,
    /// The entry hash of the file control.
    pub entry_hash: u64,
    /// First and last trace sequence numbers.
    pub traces: (u32, u32),
    /// Entries of the plan left out (cancelled or taken since).
    pub dropped: u64,
}

pub(super) async fn run(
    p: Payments,
    ctx: JobContext,
    a: WriteArgs,
) -> Outcome<Option<WrittenFile>> {
    // A retry of a writer whose file was recorded answers the same file (the effect
    // is recorded right after the ledger's commit).
    let effect = format!("ach-write/{}/{}", a.pass, a.index);
    match ctx_effect(&p, &effect).await {
        Ok(Some(done)) => return Outcome::Complete(done),
        Ok(None) => {}
        Err(e) => return e.into_outcome(),
    }
    let result = write(&p, &a).await;
    if let Ok(Some(file)) = &result {
        let value = serde_json::to_string(file).expect("a written file serialises");
        if let Err(e) = p
            .client()
            .record_effect(tranche_types::EffectRecord {
                key: &effect,
                job: Some(ctx.id()),
                value: &value,
            })
            .await
        {
            return StepError::backend("recording the written file", e).into_outcome();
        }
    }
    outcome(result)
}

async fn ctx_effect(p: &Payments, key: &str) -> StepResult<Option<Option<WrittenFile>>> {
    let Some(e) = p
        .client()
        .effect(key)
        .await
        .map_err(|e| StepError::backend("looking up the written file", e))?
    else {
        return Ok(None);
    };
    let file = serde_json::from_str(&e.value)
        .map_err(|e| StepError::permanent("reading the recorded file", e))?;
    Ok(Some(Some(file)))
}

async fn write(p: &Payments, a: &WriteArgs) -> StepResult<Option<WrittenFile>> {
    let bank = p.bank(&a.scope.bank)?;
    let created = a.at.with_timezone(&bank.time_zone).naive_local();
    let mut chosen = a.modifier.map(|m| {
        let id = a
            .file_id
            .clone()
            .unwrap_or_else(|| file_id(&a.scope.bank, a.scope.date, m, 1));
        (m, id)
    });
    for _ in 0..ROUNDS {
        let started = std::time::Instant::now();
        let (read, mark) = p
            .ledger()
            .entries_to_package(&a.seqs.to_vec())
            .await
            .map_err(|e| StepError::ledger("reading the file's entries", e))?;
        // In import order (the ledger answers in seq order): the writer makes a batch per
        // batch key in the order their first entries come, so the same entries always
        // make the same bytes.
        let (seqs, entries): (Vec<i64>, Vec<Entry>) = read
            .into_iter()
            .filter(|e| packageable(e, &a.scope, a.same_day))
            .map(|e| (e.seq, e.entry))
            .unzip();
        let dropped = a.seqs.len() - entries.len() as u64;
        if entries.is_empty() {
            return Ok(None);
        }

        let read_took = started.elapsed();
        let (m, id) = match chosen.clone() {
            Some(c) => c,
            None => match next_modifier(p, &a.scope).await? {
                Some(c) => c,
                None => {
                    tracing::warn!(
                        bank = %a.scope.bank,
                        date = %a.scope.date,
                        entries = entries.len(),
                        "no file ID modifier is free: the file's entries wait (tranche ach status)"
                    );
                    return Ok(None);
                }
            },
        };
        let mut options = FileOptions::new(created, m);
        options.first_trace_sequence = first_trace_sequence(m);
        let written = write_file(
            Vec::with_capacity(entries.len() * 96 + 1_000),
            &bank.profile,
            &options,
            &entries,
            bank.grouping,
        )
        .map_err(|e| StepError::permanent("writing the NACHA file", e))?;
        let bytes = written.out;
        let report = validate(&bytes);
        if !report.is_valid() {
            let first: Vec<String> = report
                .findings
                .iter()
                .take(3)
                .map(ToString::to_string)
                .collect();
            return Err(StepError::permanent(
                "validating the file written",
                format!(
                    "{id}: {} problems: {}",
                    report.findings.len(),
                    first.join("; ")
                ),
            ));
        }
        let written_took = started.elapsed();
        let hash = sha256_hex(&bytes);
        let key = file_key(a.scope.date, &id, &hash)
            .map_err(|e| StepError::permanent("naming the file in the store", e))?;
        let size = bytes.len() as u64;
        p.store()
            .put(&key, bytes)
            .await
            .map_err(|e| StepError::store("storing the file", e))?;
        let file = NewFile {
            file_id: id.clone(),
            bank: a.scope.bank.clone(),
            submission_date: a.scope.date,
            same_day: a.same_day,
            window: a.scope.window.clone(),
            name: file_name(&a.scope.bank, a.scope.date, m),
            hash: hash.clone(),
        };
        let stored_took = started.elapsed();
        let outcome = p
            .ledger()
            .package_read(file, seqs, &mark)
            .await
            .map_err(|e| StepError::ledger("recording the file", e))?;
        match outcome {
            PackageOutcome::Packaged(_) | PackageOutcome::AlreadyPackaged(_) => {
                tracing::debug!(
                    file = %id,
                    entries = entries.len(),
                    read_ms = read_took.as_millis() as u64,
                    written_ms = written_took.as_millis() as u64,
                    stored_ms = stored_took.as_millis() as u64,
                    recorded_ms = started.elapsed().as_millis() as u64,
                    "ACH file written"
                );
                let s = written.summary;
                let first = first_trace_sequence(m);
                return Ok(Some(WrittenFile {
                    name: file_name(&a.scope.bank, a.scope.date, m),
                    file_id: id,
                    key: key.to_string(),
                    hash,
                    bytes: size,
                    entries: s.totals.entries,
                    addenda: s.totals.addenda,
                    batches: s.batches,
                    debit_cents: s.totals.debit_cents,
                    credit_cents: s.totals.credit_cents,
                    entry_hash: s.totals.entry_hash(),
                    traces: (first, first + s.totals.entries as u32 - 1),
                    dropped,
                }));
            }
            // An entry was cancelled or packaged by another pass since it was read:
            // write the file again from what is left.
            PackageOutcome::Refused(conflicts) => {
                tracing::info!(file = %id, conflicts = conflicts.len(), "entries changed while the file was written; writing it again");
            }
            // Another pass of the bank's day recorded a file with this modifier first.
            PackageOutcome::FileIdTaken | PackageOutcome::NameTaken { .. } => chosen = None,
            PackageOutcome::Empty => return Ok(None),
        }
    }
    Err(StepError::transient(
        "recording the file",
        format!("its entries or modifier kept changing over {ROUNDS} rounds"),
    ))
}

/// The day's first modifier no file of the bank holds, with the id its next file takes;
/// `None` when every one is held.
async fn next_modifier(p: &Payments, scope: &Scope) -> StepResult<Option<(char, String)>> {
    let day = super::day_modifiers(p, scope).await?;
    Ok(day
        .free(1)
        .first()
        .map(|&m| (m, day.next_id(&scope.bank, scope.date, m))))
}
