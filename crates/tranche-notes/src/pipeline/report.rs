//! The night's report: one line per client (and one per input row no client can be
//! named for), read back from the chains' job records, so it is right whichever
//! processes did the work and however often the run was retried.

use std::io::Write;
use std::path::Path;

use rust_decimal::Decimal;
use serde::Serialize;
use tranche_core::Client;
use tranche_types::{BackendError, JobRecord, JobState};

use super::chain::ChainStep;
use super::plan::RowAccount;
use super::steps::{Mailed, Processed, Rendered, Signed};
use super::submit::ChainIds;
use super::STEPS;

/// Where a client's note stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    /// The note was sent.
    Mailed,
    /// A step failed for good; the row's error says which and why.
    Failed,
    /// The chain was cancelled before its note was mailed: by an operator, or because
    /// the client is no longer in the input.
    Cancelled,
    /// The run has not finished this client yet.
    Pending,
}

impl ReportStatus {
    /// As `report.csv` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Mailed => "mailed",
            ReportStatus::Failed => "failed",
            ReportStatus::Cancelled => "cancelled",
            ReportStatus::Pending => "pending",
        }
    }
}

/// A line of `report.csv`: one client's note, or one refused input row no client can
/// be named for (its `client_code` empty).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReportRow {
    /// Empty for a row no client can be named for.
    pub client_code: String,
    /// Where the note stands.
    pub status: ReportStatus,
    /// Of the rendered PDF, once rendered.
    pub pages: Option<usize>,
    /// Receivable by the client when positive, payable when negative.
    pub net_amount: Option<Decimal>,
    /// Size of the signed PDF, once signed.
    pub bytes: Option<usize>,
    /// The mail's Message-ID, once mailed.
    pub message_id: Option<String>,
    /// Why the note failed or was cancelled (`step: reason`), or the last attempt's
    /// error of a pending one.
    pub error: Option<String>,
    /// Rows of the trades file in this client's note (or in the reason it failed).
    pub trade_rows: u64,
    /// Input rows refused for this client; 1 on a line of its own for a refused row
    /// no client can be named for.
    pub rejected_rows: u64,
    /// What resubmitting found or did: input changed after mailing, made again from
    /// changed input, a corrected note.
    pub remark: Option<String>,
}

/// How many report rows stand where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReportSummary {
    /// Notes sent.
    pub mailed: usize,
    /// Notes that failed, and input rows no client can be named for.
    pub failed: usize,
    /// Notes cancelled.
    pub cancelled: usize,
    /// Notes the run has not finished yet.
    pub pending: usize,
}

impl ReportSummary {
    pub(crate) fn of(rows: &[ReportRow]) -> Self {
        let mut s = ReportSummary::default();
        for r in rows {
            match r.status {
                ReportStatus::Mailed => s.mailed += 1,
                ReportStatus::Failed => s.failed += 1,
                ReportStatus::Cancelled => s.cancelled += 1,
                ReportStatus::Pending => s.pending += 1,
            }
        }
        s
    }
}

/// The furthest result a chain got to, whatever step produced it.
#[derive(Default)]
struct Reached {
    pages: Option<usize>,
    net_amount: Option<Decimal>,
    bytes: Option<usize>,
    message_id: Option<String>,
}

impl Reached {
    fn take(&mut self, step: ChainStep, result: &str) {
        match step {
            ChainStep::Process => {
                if let Ok(p) = serde_json::from_str::<Processed>(result) {
                    self.net_amount = Some(p.net_amount);
                }
            }
            ChainStep::Render => {
                if let Ok(r) = serde_json::from_str::<Rendered>(result) {
                    self.net_amount = Some(r.processed.net_amount);
                    self.pages = Some(r.pages);
                }
            }
            ChainStep::Sign => {
                if let Ok(s) = serde_json::from_str::<Signed>(result) {
                    self.net_amount = Some(s.rendered.processed.net_amount);
                    self.pages = Some(s.rendered.pages);
                    self.bytes = Some(s.bytes);
                }
            }
            ChainStep::Mail => {
                if let Ok(m) = serde_json::from_str::<Mailed>(result) {
                    self.net_amount = Some(m.signed.rendered.processed.net_amount);
                    self.pages = Some(m.signed.rendered.pages);
                    self.bytes = Some(m.signed.bytes);
                    self.message_id = Some(m.message_id);
                }
            }
        }
    }
}

/// Read each chain's state. `unattributed` are input problems without a client.
pub(crate) async fn collect_report(
    backend: &Client,
    chains: &[ChainIds],
    unattributed: &[String],
) -> Result<Vec<ReportRow>, BackendError> {
    let mut rows = Vec::with_capacity(chains.len() + unattributed.len());
    for chain in chains {
        rows.push(chain_row(backend, chain).await?);
    }
    rows.extend(unattributed.iter().map(|problem| ReportRow {
        client_code: String::new(),
        status: ReportStatus::Failed,
        pages: None,
        net_amount: None,
        bytes: None,
        message_id: None,
        error: Some(problem.clone()),
        trade_rows: 0,
        rejected_rows: 1,
        remark: None,
    }));
    Ok(rows)
}

async fn chain_row(backend: &Client, chain: &ChainIds) -> Result<ReportRow, BackendError> {
    let mut reached = Reached::default();
    let mut status = ReportStatus::Mailed;
    let mut error = None;
    // Most chains end mailed: one read tells.
    let last = backend.job(chain.steps[ChainStep::Mail]).await?;
    let mut records: [Option<JobRecord>; 4] = Default::default();
    if !last
        .as_ref()
        .is_some_and(|j| j.state == JobState::Succeeded)
    {
        for step in ChainStep::ALL {
            if step != ChainStep::Mail {
                records[step] = backend.job(chain.steps[step]).await?;
            }
        }
    }
    records[ChainStep::Mail] = last;
    for step in ChainStep::ALL {
        let Some(job) = &records[step] else { continue };
        match job.state {
            JobState::Succeeded => {
                if let Some(r) = &job.result {
                    reached.take(step, r);
                }
            }
            JobState::Failed => {
                status = ReportStatus::Failed;
                error = Some(step_error(step, job));
                break;
            }
            JobState::Cancelled => {
                status = ReportStatus::Cancelled;
                error = Some(step_error(step, job));
                break;
            }
            JobState::Pending | JobState::Available | JobState::Running => {
                status = ReportStatus::Pending;
                error = job.error.clone();
                break;
            }
        }
    }
    Ok(ReportRow {
        client_code: chain.client_code.clone(),
        status,
        pages: reached.pages,
        net_amount: reached.net_amount,
        bytes: reached.bytes,
        message_id: reached.message_id,
        error,
        trade_rows: chain.trade_rows,
        rejected_rows: chain.rejected_rows,
        remark: chain.remark.clone(),
    })
}

fn step_error(step: ChainStep, job: &JobRecord) -> String {
    let what = job.error.as_deref().unwrap_or("no reason recorded");
    format!("{}: {what}", STEPS[step].queue)
}

/// The columns of `report.csv`, written even when the night has no rows (serde names
/// columns only from a first row); a test holds them to [`ReportLine`]'s fields.
const REPORT_COLUMNS: [&str; 10] = [
    "client_code",
    "status",
    "pages",
    "net_amount",
    "bytes",
    "message_id",
    "error",
    "trade_rows",
    "rejected_rows",
    "remark",
];

/// A [`ReportRow`] as `report.csv` shows it: amounts to the paisa, absent values empty.
#[derive(Serialize)]
struct ReportLine<'a> {
    client_code: &'a str,
    status: ReportStatus,
    pages: Option<usize>,
    net_amount: Option<String>,
    bytes: Option<usize>,
    message_id: Option<&'a str>,
    error: Option<&'a str>,
    trade_rows: u64,
    rejected_rows: u64,
    remark: Option<&'a str>,
}

impl<'a> From<&'a ReportRow> for ReportLine<'a> {
    fn from(r: &'a ReportRow) -> Self {
        ReportLine {
            client_code: &r.client_code,
            status: r.status,
            pages: r.pages,
            net_amount: r.net_amount.map(|n| format!("{n:.2}")),
            bytes: r.bytes,
            message_id: r.message_id.as_deref(),
            error: r.error.as_deref(),
            trade_rows: r.trade_rows,
            rejected_rows: r.rejected_rows,
            remark: r.remark.as_deref(),
        }
    }
}

/// Write `report.csv` atomically (a reader never sees half a report).
pub(crate) fn write_report(path: &Path, rows: &[ReportRow]) -> std::io::Result<()> {
    write_csv_atomically(path, false, |w| {
        w.write_record(REPORT_COLUMNS)?;
        for r in rows {
            w.serialize(ReportLine::from(r))?;
        }
        Ok(())
    })
}

/// Write `accounting.csv`: per input file, where its rows went.
pub(crate) fn write_accounting(path: &Path, accounts: &[RowAccount]) -> std::io::Result<()> {
    write_csv_atomically(path, true, |w| {
        for a in accounts {
            w.serialize(a)?;
        }
        Ok(())
    })
}

type CsvOut<'a> = csv::Writer<std::io::BufWriter<&'a mut tempfile::NamedTempFile>>;

/// `headers`: a header line from the first serialized row's field names.
fn write_csv_atomically(
    path: &Path,
    headers: bool,
    fill: impl FnOnce(&mut CsvOut<'_>) -> csv::Result<()>,
) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    {
        let mut w = csv::WriterBuilder::new()
            .has_headers(headers)
            .from_writer(std::io::BufWriter::new(&mut tmp));
        fill(&mut w)?;
        w.flush()?;
    }
    tmp.as_file_mut().flush()?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    fn row() -> ReportRow {
        ReportRow {
            client_code: "C0001".into(),
            status: ReportStatus::Mailed,
            pages: Some(2),
            net_amount: Some(dec!(-1234.5)),
            bytes: Some(48_211),
            message_id: Some("CN-1@broker.example".into()),
            error: None,
            trade_rows: 7,
            rejected_rows: 0,
            remark: Some("made again, from changed input".into()),
        }
    }

    #[test]
    fn the_written_columns_are_the_lines_fields() {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(ReportLine::from(&row())).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next(), Some(REPORT_COLUMNS.join(",").as_str()));
    }

    #[test]
    fn a_report_reads_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.csv");
        let unattributed = ReportRow {
            client_code: String::new(),
            status: ReportStatus::Failed,
            pages: None,
            net_amount: None,
            bytes: None,
            message_id: None,
            error: Some("trades.csv:3: field qty: not a number, \"x\"".into()),
            trade_rows: 0,
            rejected_rows: 1,
            remark: None,
        };
        write_report(&path, &[row(), unattributed]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "client_code,status,pages,net_amount,bytes,message_id,error,trade_rows,rejected_rows,remark\n\
             C0001,mailed,2,-1234.50,48211,CN-1@broker.example,,7,0,\"made again, from changed input\"\n\
             ,failed,,,,,\"trades.csv:3: field qty: not a number, \"\"x\"\"\",0,1,\n"
        );
        write_report(&path, &[]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "client_code,status,pages,net_amount,bytes,message_id,error,trade_rows,rejected_rows,remark\n"
        );
    }
}
