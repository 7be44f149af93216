//! `tranche ach …`: payment files. The logic lives in `tranche-ach`; this reads files
//! and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tranche_ach::{mask_account, Entry, Report, RoutingNumber, SecCode, TransactionCode};
use tranche_ach_ledger::{
    mask_url, CancelOutcome, ImportOutcome, Imported, Ledger, PostgresLedger, SqliteLedger, State,
};
use tranche_server::EntryView;
use tranche_types::Timestamp;

use crate::cli::DataArgs;

#[derive(Serialize)]
struct FileReport<'a> {
    file: &'a Path,
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    report: Option<Report>,
}

/// `tranche ach validate FILE…`: 0 when every file is valid, 1 when one is not, 2 when
/// one cannot be read.
pub fn validate(files: &[PathBuf], json: bool) -> Result<ExitCode> {
    let mut reports = Vec::with_capacity(files.len());
    let (mut invalid, mut unreadable) = (false, false);
    for file in files {
        let r = match std::fs::read(file) {
            Ok(bytes) => {
                let report = tranche_ach::validate(&bytes);
                invalid |= !report.is_valid();
                FileReport {
                    file,
                    valid: report.is_valid(),
                    error: None,
                    report: Some(report),
                }
            }
            Err(e) => {
                unreadable = true;
                FileReport {
                    file,
                    valid: false,
                    error: Some(format!("cannot read: {e}")),
                    report: None,
                }
            }
        };
        if !json {
            print_text(&r);
        }
        reports.push(r);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    Ok(if unreadable {
        ExitCode::from(2)
    } else if invalid {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_text(r: &FileReport) {
    let name = r.file.display();
    if let Some(e) = &r.error {
        eprintln!("{name}: {e}");
        return;
    }
    let Some(report) = &r.report else { return };
    for f in &report.findings {
        println!("{name}: {f}");
    }
    let money = |c: u64| format!("{}.{:02}", c / 100, c % 100);
    let summary = format!(
        "{} lines, {} batches, {} entries, {} addenda, debits {}, credits {}",
        report.lines,
        report.batches,
        report.entries,
        report.addenda,
        money(report.debit_cents),
        money(report.credit_cents)
    );
    if report.is_valid() {
        println!("{name}: valid ({summary})");
    } else {
        let n = report.findings.len();
        let s = if n == 1 { "" } else { "s" };
        println!("{name}: INVALID, {n} problem{s} ({summary})");
    }
}

/// Entries per ledger call (one transaction each).
const IMPORT_BATCH: usize = 10_000;

/// The ledger: `--ledger postgres://…`, else SQLite in `DATA/ach`; `None` only for a
/// server on `--broker` without `--ledger` (a fleet must share one ledger).
pub async fn open_ledger(at: &DataArgs, server: bool) -> Result<Option<Arc<dyn Ledger>>> {
    match &at.ledger {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let ledger = PostgresLedger::connect(url)
                .await
                .with_context(|| format!("could not open the ledger at {}", mask_url(url)))?;
            Ok(Some(Arc::new(ledger)))
        }
        Some(url) => bail!(
            "--ledger: expected a postgres:// URL, got {}",
            mask_url(url)
        ),
        None if at.broker.is_some() && server => Ok(None),
        None if at.broker.is_some() => {
            bail!("with --broker (a fleet), give the shared ledger: --ledger postgres://…")
        }
        None => {
            let ledger =
                SqliteLedger::open(&at.data.join("ach")).context("could not open the ledger")?;
            Ok(Some(Arc::new(ledger)))
        }
    }
}

async fn required_ledger(at: &DataArgs) -> Result<Arc<dyn Ledger>> {
    open_ledger(at, false)
        .await?
        .context("no ACH ledger configured")
}

/// What an import did with a file's rows.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    /// Rows read.
    pub rows: u64,
    /// Stored now (accepted).
    pub new: u64,
    /// Already in the ledger with the same payload.
    pub known: u64,
    /// Of those, rejected when first imported.
    pub known_rejected: u64,
    /// Already in the ledger with another payload (the stored one kept).
    pub conflicts: u64,
    /// Not entries, or invalid (reported by line and field).
    pub rejected: u64,
}

/// `tranche ach import ENTRIES.csv`: 0 when every row is stored (or known) valid, 1
/// when a row was rejected or conflicts with a stored entry.
pub async fn import(at: &DataArgs, file: &Path) -> Result<ExitCode> {
    let ledger = required_ledger(at).await?;
    let name = file.display().to_string();
    let tally = import_into(&ledger, file, true).await?;
    let known_rejected = if tally.known_rejected > 0 {
        format!(" ({} of them rejected)", tally.known_rejected)
    } else {
        String::new()
    };
    println!(
        "{name}: {} rows: {} accepted new, {} already known{known_rejected}, {} conflicts, {} rejected",
        tally.rows, tally.new, tally.known, tally.conflicts, tally.rejected
    );
    Ok(
        if tally.rejected + tally.conflicts + tally.known_rejected > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// Import a CSV file of entries into `ledger`, `IMPORT_BATCH` rows a transaction; each
/// bad row is said on stderr by file, line and field; `progress` says every batch. The
/// next batch is read while the ledger stores the last (one in flight), so reading and
/// storing use a core each.
pub async fn import_into(ledger: &Arc<dyn Ledger>, file: &Path, progress: bool) -> Result<Tally> {
    let name = file.display().to_string();
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(file)
        .with_context(|| format!("{name}: cannot read"))?;
    let headers = reader
        .headers()
        .with_context(|| format!("{name}: cannot read its header row"))?
        .clone();
    check_header(&name, &headers)?;
    let mut tally = Tally::default();
    let mut batch: Vec<(u64, Entry)> = Vec::with_capacity(IMPORT_BATCH);
    let mut in_flight: Option<Storing> = None;
    let mut record = csv::StringRecord::new();
    while reader
        .read_record(&mut record)
        .with_context(|| format!("{name}: cannot read"))?
    {
        tally.rows += 1;
        let line = record.position().map_or(0, |p| p.line());
        match record.deserialize::<Entry>(Some(&headers)) {
            Ok(entry) => {
                if let Err(errors) = entry.validate() {
                    for e in errors {
                        eprintln!("{name}: line {line}: field {e}");
                    }
                }
                batch.push((line, entry));
            }
            Err(e) => {
                // Not an entry at all: reported, counted rejected, not stored.
                eprintln!("{name}: line {line}: {}", row_error(&e, &headers, &record));
                tally.rejected += 1;
            }
        }
        if batch.len() == IMPORT_BATCH {
            if let Some(previous) = in_flight.take() {
                account(&name, previous.await??, &mut tally);
            }
            in_flight = Some(store(ledger, &mut batch));
            if progress {
                eprintln!("{name}: {} rows read…", tally.rows);
            }
        }
    }
    if let Some(previous) = in_flight.take() {
        account(&name, previous.await??, &mut tally);
    }
    if !batch.is_empty() {
        account(&name, store(ledger, &mut batch).await??, &mut tally);
    }
    Ok(tally)
}

/// A batch being stored: its rows' lines and what the ledger did with each.
type Storing = tokio::task::JoinHandle<Result<(Vec<u64>, Vec<Imported>)>>;

fn store(ledger: &Arc<dyn Ledger>, batch: &mut Vec<(u64, Entry)>) -> Storing {
    let (lines, entries): (Vec<u64>, Vec<Entry>) = batch.drain(..).unzip();
    let ledger = ledger.clone();
    tokio::spawn(async move {
        let results = ledger
            .import(entries)
            .await
            .context("could not import into the ledger")?;
        Ok((lines, results))
    })
}

/// A header row missing a required column fails the whole file (rather than every
/// row); a column that is no field of an entry is refused too (a misspelt optional
/// column would otherwise be ignored).
fn check_header(name: &str, headers: &csv::StringRecord) -> Result<()> {
    let columns = Entry::CSV_COLUMNS;
    let missing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !Entry::OPTIONAL_CSV_COLUMNS.contains(c))
        .filter(|c| !headers.iter().any(|h| h == *c))
        .collect();
    let unknown: Vec<&str> = headers.iter().filter(|h| !columns.contains(h)).collect();
    if !missing.is_empty() || !unknown.is_empty() {
        bail!(
            "{name}: line 1: expected a header row of an entry's fields ({}), got {}{}",
            columns.join(","),
            if missing.is_empty() {
                String::new()
            } else {
                format!("no {}", missing.join(", "))
            },
            if unknown.is_empty() {
                String::new()
            } else {
                format!(
                    "{}unknown {}",
                    if missing.is_empty() { "" } else { "; " },
                    unknown.join(", ")
                )
            }
        );
    }
    Ok(())
}

/// Count what the ledger did with a batch, saying each conflict and unstorable row.
fn account(name: &str, (lines, results): (Vec<u64>, Vec<Imported>), tally: &mut Tally) {
    for (line, r) in lines.into_iter().zip(results) {
        match r.outcome {
            ImportOutcome::New(State::Rejected) => tally.rejected += 1,
            ImportOutcome::New(_) => tally.new += 1,
            ImportOutcome::Existing(state) => {
                tally.known += 1;
                if state == State::Rejected {
                    tally.known_rejected += 1;
                }
            }
            ImportOutcome::Conflict(state) => {
                tally.conflicts += 1;
                eprintln!(
                    "{name}: line {line}: entry {}: conflicts with the stored entry of that id ({state}), which is kept",
                    r.entry_id
                );
            }
            ImportOutcome::Unstorable(why) => {
                tally.rejected += 1;
                eprintln!(
                    "{name}: line {line}: entry {}: cannot be stored: {why}",
                    r.entry_id
                );
            }
        }
    }
}

/// A row that is not an entry: `field X: expected …, got …` (account numbers masked).
fn row_error(e: &csv::Error, headers: &csv::StringRecord, record: &csv::StringRecord) -> String {
    let csv::ErrorKind::Deserialize { err, .. } = e.kind() else {
        return e.to_string();
    };
    let message = err.kind().to_string();
    let Some(index) = err.field() else {
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
        {
            return format!("field {field}: expected a value, got no column");
        }
        // The ach types' own errors do not say which column: find it.
        let column = |name: &str| {
            headers
                .iter()
                .position(|h| h == name)
                .and_then(|i| record.get(i))
                .unwrap_or_default()
        };
        let failed = [
            ("sec_code", column("sec_code").parse::<SecCode>().err()),
            (
                "transaction_code",
                column("transaction_code").parse::<TransactionCode>().err(),
            ),
            (
                "rdfi_routing",
                column("rdfi_routing").parse::<RoutingNumber>().err(),
            ),
        ];
        return match failed.into_iter().find_map(|(f, e)| e.map(|e| (f, e))) {
            Some((field, e)) => format!("field {field}: expected {}, got {}", e.expected, e.got),
            None => message,
        };
    };
    let field = headers.get(index as usize).unwrap_or("?");
    let value = record.get(index as usize).unwrap_or_default();
    let got = if field == "account_number" {
        format!("{:?}", mask_account(value))
    } else {
        format!("{value:?}")
    };
    // The ach types' own errors already say `…: expected …, got …`.
    if let Some(at) = message.find("expected ") {
        if message.contains(", got ") {
            return format!("field {field}: {}", &message[at..]);
        }
    }
    let expected = match field {
        "amount_cents" => "a whole number of cents".to_string(),
        "same_day" => "true or false".to_string(),
        f if f.ends_with("_date") => "a date YYYY-MM-DD".to_string(),
        _ => message,
    };
    format!("field {field}: expected {expected}, got {got}")
}

fn when(t: Timestamp) -> String {
    chrono::DateTime::from_timestamp_micros(t.micros())
        .map(|d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| t.micros().to_string())
}

/// `tranche ach cancel ENTRY_ID`: 0 when cancelled (now or before), 1 when too late.
pub async fn cancel(
    at: &DataArgs,
    entry_id: &str,
    reason: &str,
    before_import: bool,
) -> Result<ExitCode> {
    let ledger = required_ledger(at).await?;
    // Checked before cancelling: the ledger records a cancel of an unknown id (it may
    // overtake its import), which from a command line is far more often a typo.
    if !before_import && ledger.entry(entry_id).await?.is_none() {
        eprintln!(
            "{entry_id}: no ACH entry has this id; nothing was cancelled (to cancel an \
             entry before it is imported, add --before-import)"
        );
        return Ok(ExitCode::from(1));
    }
    match ledger.cancel(entry_id, reason).await? {
        CancelOutcome::Cancelled { known, file_id } => {
            println!("{entry_id}: cancelled");
            if !known {
                println!("{entry_id}: not imported yet: it will be stored cancelled");
            }
            if let Some(file) = file_id {
                println!("{entry_id}: its file {file} will be rebuilt without it");
            }
            Ok(ExitCode::SUCCESS)
        }
        CancelOutcome::AlreadyCancelled(c) => {
            println!(
                "{entry_id}: already cancelled at {}: {}",
                when(c.at),
                c.reason
            );
            Ok(ExitCode::SUCCESS)
        }
        CancelOutcome::TooLate {
            file_id,
            file_state,
        } => {
            eprintln!("{entry_id}: cannot be cancelled: its file {file_id} is {file_state}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `tranche ach entry ENTRY_ID`: 1 when there is no such entry.
pub async fn entry(at: &DataArgs, entry_id: &str, json: bool) -> Result<ExitCode> {
    let ledger = required_ledger(at).await?;
    let Some(stored) = ledger.entry(entry_id).await? else {
        eprintln!("{entry_id}: no such ACH entry");
        return Ok(ExitCode::from(1));
    };
    let view = EntryView::new(stored, false);
    if json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    let money = |c: u64| format!("{}.{:02}", c / 100, c % 100);
    println!("entry:       {}", view.entry_id);
    println!("state:       {}", view.state.as_str());
    if let Some(file) = &view.file_id {
        println!("file:        {file}");
    }
    if let Some(why) = &view.rejection {
        println!("rejected:    {why}");
    }
    if let Some(c) = &view.cancellation {
        println!("cancelled:   {} ({})", when(c.at), c.reason);
    }
    println!("bank:        {}", view.bank);
    println!("company:     {} ({})", view.company_name, view.company_id);
    println!(
        "amount:      {} (code {}, {})",
        money(view.amount_cents),
        view.transaction_code,
        view.sec_code
    );
    println!(
        "receiver:    {} at {} account {}",
        view.individual_name, view.rdfi_routing, view.account_number
    );
    println!(
        "dates:       effective {}, submitted {}{}",
        view.effective_date,
        view.submission_date,
        if view.same_day { " (same day)" } else { "" }
    );
    println!("imported:    {}", when(view.imported_at));
    Ok(ExitCode::SUCCESS)
}
