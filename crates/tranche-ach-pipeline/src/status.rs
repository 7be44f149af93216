//! `tranche ach status`: per bank and window, what the day's entries and files are.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tranche_ach_ledger::{FileFilter, FileState, Ledger, LedgerError, State};
use tranche_ach_rules::Rules;

use crate::{Payments, PipelineError};

/// A submission date's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DayStatus {
    /// The submission date.
    pub date: NaiveDate,
    /// Each bank of the rules, then any other bank with entries that day.
    pub banks: Vec<BankFigures>,
}

/// One bank's figures.
#[derive(Debug, Clone, Serialize)]
pub struct BankFigures {
    /// The bank.
    pub bank: String,
    /// Entries (and cents) by effective state: accepted, packaged, submitted,
    /// rejected, cancelled.
    pub entries: Vec<StateTally>,
    /// Each window of the bank.
    pub windows: Vec<WindowFigures>,
}

/// One window's files.
#[derive(Debug, Clone, Serialize)]
pub struct WindowFigures {
    /// The window.
    pub window: String,
    /// When its submission begins and ends that day (None for a window no longer in
    /// the rules).
    pub begins: Option<DateTime<Utc>>,
    /// Its end.
    pub ends: Option<DateTime<Utc>>,
    /// Files by state: packaged, submitting, submitted, released.
    pub files: Vec<FileCount>,
    /// Entries in its files that are not released.
    pub entries: u64,
    /// Their debits, in cents.
    pub debit_cents: u64,
    /// Their credits, in cents.
    pub credit_cents: u64,
}

/// Entries in one effective state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct StateTally {
    /// The state (`accepted`, …).
    pub state: &'static str,
    /// How many entries.
    pub entries: u64,
    /// The sum of their amounts, in cents.
    pub cents: u64,
}

/// Files in one state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileCount {
    /// The state (`packaged`, …).
    pub state: &'static str,
    /// How many files.
    pub files: u64,
}

impl Payments {
    /// The figures of one submission date.
    pub async fn status(&self, date: NaiveDate) -> Result<DayStatus, PipelineError> {
        Ok(day_status(&**self.ledger(), Some(self.rules()), date).await?)
    }
}

/// The figures of one submission date from the ledger, with the windows of `rules`
/// (without rules, the windows the day's files name).
pub async fn day_status(
    ledger: &dyn Ledger,
    rules: Option<&Rules>,
    date: NaiveDate,
) -> Result<DayStatus, LedgerError> {
    {
        let tallies = ledger.status(date).await?;
        let files = ledger
            .files(&FileFilter {
                submission_date: Some(date),
                ..FileFilter::default()
            })
            .await?;
        let mut names: Vec<String> = rules
            .map(|r| r.banks.iter().map(|b| b.profile.bank.clone()).collect())
            .unwrap_or_default();
        for b in &tallies.banks {
            if !names.contains(&b.bank) {
                names.push(b.bank.clone());
            }
        }
        let mut banks = Vec::new();
        for name in names {
            let t = tallies.bank(&name);
            let rules = rules.and_then(|r| r.bank(&name));
            let mut windows: Vec<(String, Option<(DateTime<Utc>, DateTime<Utc>)>)> = rules
                .map(|r| {
                    r.windows
                        .iter()
                        .map(|w| {
                            (
                                w.name.clone(),
                                Some((w.begins(date, r.time_zone), w.ends(date, r.time_zone))),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            for f in files.iter().filter(|f| f.file.bank == name) {
                if !windows.iter().any(|(w, _)| *w == f.file.window) {
                    windows.push((f.file.window.clone(), None));
                }
            }
            let windows = windows
                .into_iter()
                .map(|(window, times)| {
                    let mine: Vec<_> = files
                        .iter()
                        .filter(|f| f.file.bank == name && f.file.window == window)
                        .collect();
                    let live = mine.iter().filter(|f| f.state != FileState::Released);
                    WindowFigures {
                        begins: times.map(|t| t.0),
                        ends: times.map(|t| t.1),
                        files: FileState::ALL
                            .iter()
                            .map(|s| FileCount {
                                state: s.as_str(),
                                files: mine.iter().filter(|f| f.state == *s).count() as u64,
                            })
                            .collect(),
                        entries: live.clone().map(|f| f.entries).sum(),
                        debit_cents: live.clone().map(|f| f.debit_cents).sum(),
                        credit_cents: live.map(|f| f.credit_cents).sum(),
                        window,
                    }
                })
                .collect();
            banks.push(BankFigures {
                entries: State::ALL
                    .iter()
                    .map(|s| StateTally {
                        state: s.as_str(),
                        entries: t.tally(*s).entries,
                        cents: t.tally(*s).cents,
                    })
                    .collect(),
                bank: name,
                windows,
            });
        }
        Ok(DayStatus { date, banks })
    }
}
