//! `tranche ach status`: per bank and window, what the day's entries and files are.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use tranche_ach_ledger::{FileFilter, FileState, Ledger, LedgerError, State};
use tranche_ach_rules::Rules;

use crate::naming::{DayModifiers, MODIFIERS};
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
    /// The day's file ID modifiers (36 a day per bank).
    pub modifiers: ModifierFigures,
    /// What stops entries from going out, each said with what the operator can do.
    pub problems: Vec<String>,
}

/// How a bank's day stands with its 36 file ID modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModifierFigures {
    /// Held by files sent, being sent, or that may be at the bank.
    pub sent: u64,
    /// Held by packaged files not sent yet (given back if the file is released).
    pub waiting: u64,
    /// Free for the next files.
    pub free: u64,
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
            let mine: Vec<_> = files
                .iter()
                .filter(|f| f.file.bank == name)
                .cloned()
                .collect();
            let day = DayModifiers::of(&mine);
            let modifiers = ModifierFigures {
                sent: day.sent.len() as u64,
                waiting: day.waiting.len() as u64,
                free: day.free(MODIFIERS.len()).len() as u64,
            };
            let accepted = t.tally(State::Accepted);
            let problems = out_of_modifiers(&name, date, modifiers, accepted.entries)
                .into_iter()
                .collect();
            banks.push(BankFigures {
                modifiers,
                problems,
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

/// The problem of a bank's day whose modifiers are all held while `waiting` entries are
/// accepted, said with what the operator can do; `None` otherwise.
fn out_of_modifiers(
    bank: &str,
    date: NaiveDate,
    m: ModifierFigures,
    waiting: u64,
) -> Option<String> {
    if m.free > 0 || waiting == 0 {
        return None;
    }
    let what = if m.waiting > 0 {
        "they go out once a packaged file of the day is released (a cancel of one of its \
         entries, or its window ending) and gives its modifier back; for the days to come, \
         a larger max_entries_per_file makes fewer, larger files"
            .to_string()
    } else {
        format!(
            "the bank takes no more files from this origin on {date}: cancel them \
             (tranche ach cancel) and import them again for a later submission date, or \
             agree another immediate origin with the bank"
        )
    };
    Some(format!(
        "bank {bank}, submission date {date}: no file ID modifier is left ({} of {} on \
         files sent or being sent, {} on packaged files waiting to be sent); {waiting} \
         accepted entries wait: {what}",
        m.sent,
        MODIFIERS.len(),
        m.waiting
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_modifiers_says_what_to_do() {
        let d = NaiveDate::from_ymd_opt(2026, 3, 3).unwrap();
        let all_sent = ModifierFigures {
            sent: 36,
            waiting: 0,
            free: 0,
        };
        let said = out_of_modifiers("first", d, all_sent, 40).unwrap();
        for part in [
            "first",
            "2026-03-03",
            "36 of 36",
            "40 accepted entries",
            "cancel them",
        ] {
            assert!(said.contains(part), "{part:?} in {said}");
        }
        let some_waiting = ModifierFigures {
            sent: 30,
            waiting: 6,
            free: 0,
        };
        let said = out_of_modifiers("first", d, some_waiting, 40).unwrap();
        assert!(said.contains("max_entries_per_file"), "{said}");
        assert_eq!(out_of_modifiers("first", d, all_sent, 0), None);
        let one_free = ModifierFigures {
            free: 1,
            ..all_sent
        };
        assert_eq!(out_of_modifiers("first", d, one_free, 40), None);
    }
}
