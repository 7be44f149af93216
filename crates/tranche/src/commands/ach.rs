//! `tranche ach …`: payment files. The logic lives in `tranche-ach`; this reads files
//! and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tranche_ach::{
    is_bank_name, is_nacha_text, shown, Entry, Report, RoutingNumber, SecCode, TransactionCode,
    EXCERPT_BYTES, MAX_ENTRY_ID,
};
use tranche_ach_ledger::{
    mask_url, CancelOutcome, ImportOutcome, Imported, Ledger, PostgresLedger, RejectOutcome,
    SqliteLedger, State,
};
use tranche_ach_rules::Rules;
use tranche_server::{EntryView, MAX_CANCEL_REASON};
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

/// `tranche ach import ENTRIES.csv [--rules ach.toml]`: 0 when every row is stored (or
/// known) valid, 1 when a row was rejected or conflicts with a stored entry; 2 when the
/// rules are invalid.
pub async fn import(at: &DataArgs, file: &Path, rules: Option<&Path>) -> Result<ExitCode> {
    let rules = match super::ach_engine::optional_rules(rules) {
        Ok(rules) => rules,
        Err(code) => return Ok(code),
    };
    let ledger = required_ledger(at).await?;
    let name = file.display().to_string();
    let tally = import_into(&ledger, file, rules.as_ref(), true).await?;
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

/// A row read: its line, the entry, and why the rules refuse its bank.
type Row = (u64, Entry, Option<String>);

/// Import a CSV file of entries into `ledger`, `IMPORT_BATCH` rows a transaction; each
/// bad row is said on stderr by file, line and field (values cut to an excerpt, no
/// receiver's text, account numbers masked); `progress` says every batch. With
/// `rules`, an entry of a bank they do not have is stored and then rejected. The next
/// batch is read while the ledger stores the last (one in flight), so reading and
/// storing use a core each.
///
/// A row with more fields than the header has columns is not an entry (a comma in an
/// unquoted value shifts every column after it), nor is one with fewer: both are
/// refused, naming the line and the field, and counted rejected.
pub async fn import_into(
    ledger: &Arc<dyn Ledger>,
    file: &Path,
    rules: Option<&Rules>,
    progress: bool,
) -> Result<Tally> {
    let name = file.display().to_string();
    let lines = Lines::of(file).with_context(|| format!("{name}: cannot read"))?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(file)
        .with_context(|| format!("{name}: cannot read"))?;
    let headers = reader
        .headers()
        .with_context(|| format!("{name}: cannot read its header row"))?
        .clone();
    check_header(
        &name,
        lines.of_record(&reader, headers.as_byte_record()),
        &headers,
    )?;
    let mut tally = Tally::default();
    let mut batch: Vec<Row> = Vec::with_capacity(IMPORT_BATCH);
    let mut in_flight: Option<Storing> = None;
    // Read as bytes, then as text: a row that is not UTF-8 (a Latin-1 name) is refused
    // by line and field, where reading text failed the whole file at it.
    let mut bytes = csv::ByteRecord::new();
    while reader
        .read_byte_record(&mut bytes)
        .with_context(|| format!("{name}: cannot read"))?
    {
        tally.rows += 1;
        let line = lines.of_record(&reader, &bytes);
        let record = match csv::StringRecord::from_byte_record(std::mem::take(&mut bytes)) {
            Ok(r) => r,
            Err(e) => {
                let field = e.utf8_error().field();
                let valid = e.utf8_error().valid_up_to();
                bytes = e.into_byte_record();
                let value = bytes.get(field).unwrap_or_default();
                // Where, never what: the field may be a name.
                eprintln!(
                    "{name}: line {line}: field {}: expected UTF-8 text, got byte 0x{:02X} at position {} (of {} bytes)",
                    headers.get(field).unwrap_or("?"),
                    value.get(valid).copied().unwrap_or(0),
                    valid + 1,
                    value.len()
                );
                tally.rejected += 1;
                continue;
            }
        };
        if let Some(why) = shape_error(&headers, &record) {
            // Not an entry: reported, counted rejected, not stored.
            eprintln!("{name}: line {line}: {why}");
            tally.rejected += 1;
            continue;
        }
        match record.deserialize::<Entry>(Some(&headers)) {
            Ok(entry) => {
                if let Err(errors) = entry.validate() {
                    for e in errors {
                        eprintln!("{name}: line {line}: field {e}");
                    }
                }
                let unknown = rules
                    .filter(|_| is_bank_name(&entry.bank))
                    .and_then(|r| r.unknown_bank(&entry.bank))
                    .map(|e| {
                        eprintln!("{name}: line {line}: field {e}");
                        e.to_string()
                    });
                batch.push((line, entry, unknown));
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
        // The next row reads into this one's buffers.
        bytes = record.into_byte_record();
    }
    if let Some(previous) = in_flight.take() {
        account(&name, previous.await??, &mut tally);
    }
    if !batch.is_empty() {
        account(&name, store(ledger, &mut batch).await??, &mut tally);
    }
    Ok(tally)
}

/// Where a file's records begin. The `csv` crate numbers a record that follows blank
/// lines by the first blank line (it skips them after taking the position), so a
/// record's line is counted back from where the reader stands after it: the line
/// after its end, less the line breaks inside its quoted fields, less its own line
/// break when the reader counted it (a last line may lack one; after a `\r\n` the
/// reader stands before the `\n`, so it has not).
struct Lines {
    /// The file's length, whether it ends in `\n`, and whether its lines end in
    /// `\r\n` (as its first line does).
    len: u64,
    ends_in_break: bool,
    crlf: bool,
}

impl Lines {
    fn of(file: &Path) -> std::io::Result<Lines> {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(file)?;
        let len = f.metadata()?.len();
        let mut head = Vec::with_capacity(64 << 10);
        (&mut f).take(64 << 10).read_to_end(&mut head)?;
        let crlf = head
            .iter()
            .position(|&b| b == b'\n')
            .is_some_and(|i| i > 0 && head[i - 1] == b'\r');
        let mut last = [0u8];
        if len > 0 {
            f.seek(SeekFrom::Start(len - 1))?;
            f.read_exact(&mut last)?;
        }
        Ok(Lines {
            len,
            ends_in_break: last[0] == b'\n',
            crlf,
        })
    }

    /// The line `record`, just read by `reader`, begins on.
    fn of_record<R: std::io::Read>(
        &self,
        reader: &csv::Reader<R>,
        record: &csv::ByteRecord,
    ) -> u64 {
        let after = reader.position();
        let inside: u64 = record
            .iter()
            .map(|f| f.iter().filter(|&&b| b == b'\n').count() as u64)
            .sum();
        let own_break = u64::from(!self.crlf && (after.byte() < self.len || self.ends_in_break));
        after.line().saturating_sub(inside + own_break).max(1)
    }
}

/// A row whose fields do not line up with the header's columns: more of them (named
/// by position, never shown: a shifted value may be anyone's), or fewer (the first
/// missing column named).
fn shape_error(headers: &csv::StringRecord, record: &csv::StringRecord) -> Option<String> {
    let (want, got) = (headers.len(), record.len());
    if got > want {
        let extra: usize = record.iter().skip(want).map(str::len).sum();
        return Some(format!(
            "field {} (after {}, the header's last column): expected {want} fields, as the header has columns, got {got} ({} more, {extra} bytes; a comma in a value that is not quoted?)",
            want + 1,
            headers.get(want - 1).unwrap_or("?"),
            got - want,
        ));
    }
    if got < want {
        return Some(format!(
            "field {}: expected {want} fields, as the header has columns, got {got}",
            headers.get(got).unwrap_or("?")
        ));
    }
    None
}

/// A batch being stored: its rows' lines and what the ledger did with each.
type Storing = tokio::task::JoinHandle<Result<(Vec<u64>, Vec<Imported>)>>;

/// Store a batch; then reject each entry the rules refused (its bank) that is accepted:
/// it is stored, so accounted for, and never packaged.
fn store(ledger: &Arc<dyn Ledger>, batch: &mut Vec<Row>) -> Storing {
    let mut lines = Vec::with_capacity(batch.len());
    let mut entries = Vec::with_capacity(batch.len());
    let mut refusals = Vec::new();
    for (i, (line, entry, unknown)) in batch.drain(..).enumerate() {
        lines.push(line);
        entries.push(entry);
        if let Some(why) = unknown {
            refusals.push((i, why));
        }
    }
    let ledger = ledger.clone();
    tokio::spawn(async move {
        let mut results = ledger
            .import(entries)
            .await
            .context("could not import into the ledger")?;
        for (i, why) in refusals {
            let r = &mut results[i];
            let (ImportOutcome::New(State::Accepted) | ImportOutcome::Existing(State::Accepted)) =
                r.outcome
            else {
                continue;
            };
            if ledger
                .reject(&r.entry_id, &why)
                .await
                .context("could not reject an entry of a bank the rules do not have")?
                == RejectOutcome::Rejected
            {
                r.outcome = match r.outcome {
                    ImportOutcome::New(_) => ImportOutcome::New(State::Rejected),
                    _ => ImportOutcome::Existing(State::Rejected),
                };
            }
        }
        Ok((lines, results))
    })
}

/// A header row missing a required column fails the whole file (rather than every
/// row); a column that is no field of an entry is refused too (a misspelt optional
/// column would otherwise be ignored).
fn check_header(name: &str, line: u64, headers: &csv::StringRecord) -> Result<()> {
    let columns = Entry::CSV_COLUMNS;
    let missing: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|c| !Entry::OPTIONAL_CSV_COLUMNS.contains(c))
        .filter(|c| !headers.iter().any(|h| h == *c))
        .collect();
    let unknown: Vec<String> = headers
        .iter()
        .filter(|h| !columns.contains(h))
        .map(|h| {
            if is_nacha_text(h) && h.len() <= EXCERPT_BYTES {
                h.to_string()
            } else {
                shown(h)
            }
        })
        .collect();
    if !missing.is_empty() || !unknown.is_empty() {
        bail!(
            "{name}: line {line}: expected a header row of an entry's fields ({}), got {}{}",
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

/// What a typed column must be, and what it is, when it does not read: `None` when it
/// reads (or is text).
fn typed_error(field: &str, value: &str) -> Option<(String, String)> {
    let got = || shown(value);
    match field {
        "sec_code" => value.parse::<SecCode>().err().map(|e| (e.expected, e.got)),
        "transaction_code" => value
            .parse::<TransactionCode>()
            .err()
            .map(|e| (e.expected, e.got)),
        "rdfi_routing" => value
            .parse::<RoutingNumber>()
            .err()
            .map(|e| (e.expected, e.got)),
        "amount_cents" => value
            .parse::<u64>()
            .is_err()
            .then(|| ("a whole number of cents".to_string(), got())),
        "effective_date" | "submission_date" => value
            .parse::<chrono::NaiveDate>()
            .is_err()
            .then(|| ("a date YYYY-MM-DD".to_string(), got())),
        "same_day" => value
            .parse::<bool>()
            .is_err()
            .then(|| ("true or false".to_string(), got())),
        _ => None,
    }
}

/// A row that is not an entry: `field X: expected …, got …` (values cut to an
/// excerpt; only typed columns fail to read, and none holds personal data).
fn row_error(e: &csv::Error, headers: &csv::StringRecord, record: &csv::StringRecord) -> String {
    let csv::ErrorKind::Deserialize { err, .. } = e.kind() else {
        return e.to_string();
    };
    let message = err.kind().to_string();
    let value_of = |i: usize| record.get(i).unwrap_or_default();
    // The field's column: as the error says, or else (the ach types' and chrono's own
    // errors do not say it) the first typed column that does not read.
    let index = err.field().map(|i| i as usize).or_else(|| {
        headers
            .iter()
            .enumerate()
            .position(|(i, h)| typed_error(h, value_of(i)).is_some())
    });
    let Some(index) = index else {
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|m| m.strip_suffix('`'))
        {
            return format!("field {field}: expected a value, got no column");
        }
        return format!("expected an entry, got {}", shown(&message));
    };
    let field = headers.get(index).unwrap_or("?");
    match typed_error(field, value_of(index)) {
        Some((expected, got)) => format!("field {field}: expected {expected}, got {got}"),
        None => format!(
            "field {field}: expected a value of its type, got {}",
            shown(&message)
        ),
    }
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
    // A cancel is stored even before its entry comes: as the HTTP route, never one of
    // an id no entry can have, nor a reason of megabytes.
    if entry_id.len() > MAX_ENTRY_ID {
        bail!(
            "entry id: expected at most {MAX_ENTRY_ID} characters, got {} characters",
            entry_id.chars().count()
        );
    }
    if reason.len() > MAX_CANCEL_REASON {
        bail!(
            "--reason: expected at most {MAX_CANCEL_REASON} characters, got {} characters",
            reason.chars().count()
        );
    }
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
