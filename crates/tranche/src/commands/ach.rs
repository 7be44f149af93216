//! `tranche ach …`: payment files. The logic lives in `tranche-ach`; this reads files
//! and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;
use tranche_ach::Report;

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
