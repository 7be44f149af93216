//! The rules as the engine uses them: settings, banks, their deliveries and windows,
//! and which windows are due at an instant.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Days, Utc};
use chrono_tz::Tz;
use tranche_ach::{BankProfile, Grouping};

use crate::problem::RulesError;
use crate::window::{Due, Window};

/// A payments company's ACH rules: how the engine paces itself, and the banks it
/// sends files to. Only ever produced valid by [`Rules::parse`] and [`Rules::load`].
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    /// How the engine paces itself.
    pub engine: EngineSettings,
    /// The banks (ODFIs), in the order of the file.
    pub banks: Vec<BankRules>,
}

/// How the engine paces itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSettings {
    /// How often the engine looks at the windows and the ledger (default 5 min).
    pub tick: Duration,
    /// How long a packager's claim on entries lasts (default 10 min): a packager that
    /// dies holding a claim lets go of its entries this long after.
    pub claim_ttl: Duration,
}

impl EngineSettings {
    /// The default tick, 5 minutes.
    pub const DEFAULT_TICK: Duration = Duration::from_secs(5 * 60);
    /// The default claim lifetime, 10 minutes.
    pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(10 * 60);
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            tick: Self::DEFAULT_TICK,
            claim_ttl: Self::DEFAULT_CLAIM_TTL,
        }
    }
}

/// One bank (ODFI): who it is in the files, its zone, how files are cut and paced,
/// how they reach it, and its submission windows.
#[derive(Debug, Clone, PartialEq)]
pub struct BankRules {
    /// The file header fields; `profile.bank` is the bank's key, which entries name
    /// in their `bank` field.
    pub profile: BankProfile,
    /// The zone its windows' times are read in (default `America/New_York`).
    pub time_zone: Tz,
    /// The most entries in one file (default 5000, 1 to 270,000).
    pub max_entries_per_file: u32,
    /// The least time between two uploads of its files (default 15 s).
    pub pacing: Duration,
    /// Credits and debits in batches of their own (220/225, the default) or mixed
    /// (200).
    pub grouping: Grouping,
    /// How its files reach it.
    pub delivery: Delivery,
    /// Its windows, in the order of the file.
    pub windows: Vec<Window>,
}

impl BankRules {
    /// The default most entries in one file.
    pub const DEFAULT_MAX_ENTRIES_PER_FILE: u32 = 5000;
    /// The most entries a file may be set to hold: each file of a day gets its own
    /// block of the 9,999,999 trace sequence numbers, and a day has up to 36 files
    /// (file ID modifiers A-Z, 0-9), so a block is at most 9,999,999 / 36 ≈ 277,000.
    pub const MAX_ENTRIES_PER_FILE: u32 = 270_000;
    /// The default pacing, 15 seconds.
    pub const DEFAULT_PACING: Duration = Duration::from_secs(15);
    /// The default zone.
    pub const DEFAULT_TIME_ZONE: Tz = chrono_tz::America::New_York;

    /// The bank's key.
    pub fn name(&self) -> &str {
        &self.profile.bank
    }

    /// Its window called `name`.
    pub fn window(&self, name: &str) -> Option<&Window> {
        self.windows.iter().find(|w| w.name == name)
    }
}

/// Where a bank's files go. Relative paths in the file are resolved against the
/// directory of the rules file, so an ach.toml travels with its outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Files are written into a directory, for someone or something else to carry
    /// (the default: `outbox/<bank>`).
    Outbox {
        /// The directory.
        dir: PathBuf,
    },
    /// Files are uploaded over SFTP, authenticated by a key.
    Sftp {
        /// The bank's SFTP host.
        host: String,
        /// Its port (default 22).
        port: u16,
        /// The user we log in as.
        user: String,
        /// The private key file (the key itself never goes in the rules).
        key_file: PathBuf,
        /// The known_hosts file that must vouch for the host.
        known_hosts: PathBuf,
        /// The directory on the host files go into (default `.`, the login directory).
        remote_dir: String,
    },
}

impl Rules {
    /// Read rules from `text`. `source` names the file in problems and is where
    /// relative paths are resolved from (its directory). Every problem is reported.
    pub fn parse(text: &str, source: &Path) -> Result<Rules, RulesError> {
        crate::validate::read(text, source).map_err(|problems| RulesError::Invalid { problems })
    }

    /// Read the rules file at `path`.
    pub fn load(path: &Path) -> Result<Rules, RulesError> {
        let text = std::fs::read_to_string(path).map_err(|source| RulesError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Rules::parse(&text, path)
    }

    /// The bank whose key is `name`.
    pub fn bank(&self, name: &str) -> Option<&BankRules> {
        self.banks.iter().find(|b| b.name() == name)
    }

    /// Why an entry naming `bank` is refused at intake: `None` when the rules have the
    /// bank, else the error naming the banks they have. An entry of a bank the rules
    /// do not have would wait `accepted` for ever: no window is ever due for it.
    pub fn unknown_bank(&self, bank: &str) -> Option<tranche_ach::FieldError> {
        if self.bank(bank).is_some() {
            return None;
        }
        let names: Vec<&str> = self.banks.iter().map(BankRules::name).collect();
        Some(tranche_ach::FieldError {
            field: "bank",
            expected: format!("a bank of the rules ({})", names.join(", ")),
            got: tranche_ach::shown(bank),
        })
    }

    /// Every (bank, window, submission date) whose packaging phase
    /// `[packaging_from, ends)` holds `at`: `package` is then true, and `submit` too
    /// when the submission phase `[begins, ends)` holds it. Packaging goes on while
    /// files are submitted, so entries that come late still make the window's last
    /// files. Sorted by bank, date, then when the window begins.
    ///
    /// Windows are every day: there is no bank calendar here. Weekends and holidays
    /// have no entries to package because entries are not submitted on them.
    pub fn due(&self, at: DateTime<Utc>) -> Vec<Due> {
        let mut due = Vec::new();
        for bank in &self.banks {
            let tz = bank.time_zone;
            let today = at.with_timezone(&tz).date_naive();
            // A phase starts at most 24 h before its date's midnight (the lead) and
            // ends before the second midnight after it; a day either side of that
            // is margin for clock changes.
            let first = today.checked_sub_days(Days::new(2)).unwrap_or(today);
            for date in first.iter_days().take(4) {
                for w in &bank.windows {
                    let begins = w.begins(date, tz);
                    let ends = w.ends(date, tz);
                    if w.packaging_from(date, tz) <= at && at < ends {
                        due.push((
                            begins,
                            Due {
                                bank: bank.name().to_string(),
                                window: w.name.clone(),
                                date,
                                package: true,
                                submit: begins <= at,
                            },
                        ));
                    }
                }
            }
        }
        due.sort_by(|(a_begins, a), (b_begins, b)| {
            (&a.bank, a.date, a_begins).cmp(&(&b.bank, b.date, b_begins))
        });
        due.into_iter().map(|(_, d)| d).collect()
    }
}
