//! ach.toml text for tests: the banks the tests use, built up with what a test needs,
//! in place of a copy of the same twenty lines per test file.
//!
//! ```
//! use tranche_test_support::ach_rules::Bank;
//! let text = Bank::first().with("time_zone = \"America/New_York\"").same_day_morning().to_string();
//! assert!(text.starts_with("[[bank]]\nname = \"first\"\n"));
//! assert!(text.contains("submission_end = \"10:30\"\n"));
//! ```

use std::fmt;

/// One `[[bank]]` of an ach.toml, written out by `Display`.
#[derive(Clone, Debug)]
pub struct Bank {
    name: String,
    odfi: String,
    destination_name: String,
    lines: Vec<String>,
    delivery: Option<String>,
    windows: Vec<String>,
}

impl Bank {
    /// A bank paid from ACME PAYROLL's origin `1234567890`; its immediate destination is
    /// its ODFI.
    pub fn new(name: &str, odfi: &str, destination_name: &str) -> Bank {
        Bank {
            name: name.into(),
            odfi: odfi.into(),
            destination_name: destination_name.into(),
            lines: Vec::new(),
            delivery: None,
            windows: Vec::new(),
        }
    }

    /// `first` (021000021, FIRST NATIONAL): the tests' usual bank.
    pub fn first() -> Bank {
        Bank::new("first", "021000021", "FIRST NATIONAL")
    }

    /// `second` (026009593, SECOND STATE BANK).
    pub fn second() -> Bank {
        Bank::new("second", "026009593", "SECOND STATE BANK")
    }

    /// One more line of the bank's table (`time_zone = "…"`, `pacing = "0s"`, …).
    pub fn with(mut self, line: &str) -> Bank {
        self.lines.push(line.into());
        self
    }

    /// Files go to the outbox directory `dir`.
    pub fn outbox(mut self, dir: &str) -> Bank {
        self.delivery = Some(format!(
            "[bank.delivery]\nkind = \"outbox\"\ndir = \"{dir}\"\n"
        ));
        self
    }

    /// A window: its name, `same-day` or `next-day`, and its submission times.
    pub fn window(mut self, name: &str, eligible: &str, begin: &str, end: &str) -> Bank {
        self.windows.push(format!(
            "[[bank.window]]\nname = \"{name}\"\neligible = \"{eligible}\"\n\
             submission_begin = \"{begin}\"\nsubmission_end = \"{end}\"\n"
        ));
        self
    }

    /// The same-day window `sd1`, 08:30 to 10:30.
    pub fn same_day_morning(self) -> Bank {
        self.window("sd1", "same-day", "08:30", "10:30")
    }
}

impl fmt::Display for Bank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Bank {
            name,
            odfi,
            destination_name,
            ..
        } = self;
        write!(
            f,
            "[[bank]]\nname = \"{name}\"\nodfi = \"{odfi}\"\nimmediate_destination = \"{odfi}\"\n\
             immediate_destination_name = \"{destination_name}\"\nimmediate_origin = \"1234567890\"\n\
             immediate_origin_name = \"ACME PAYROLL\"\n"
        )?;
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        if let Some(delivery) = &self.delivery {
            write!(f, "{delivery}")?;
        }
        for window in &self.windows {
            write!(f, "\n{window}")?;
        }
        Ok(())
    }
}
