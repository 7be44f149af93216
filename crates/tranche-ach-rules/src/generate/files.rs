//! A generated day on disk: the CSV `tranche ach import` reads, and an ach.toml for
//! its banks beside it.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use tranche_ach::Entry;

use super::{rows, DayOptions, Flaw};
use crate::{example_for, Rules};

/// The CSV header: an [`Entry`]'s fields in the order serde writes them, so rows can be
/// serialized straight from entries.
pub const CSV_HEADER: [&str; 17] = Entry::CSV_COLUMNS;

/// The files of a generated day, and what is in them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayFiles {
    /// `entries.csv`: a header row, then one row per entry.
    pub entries_csv: PathBuf,
    /// `ach.toml`: the example rules for the day's banks, outboxes under the
    /// directory.
    pub rules: PathBuf,
    /// What the rows are.
    pub counts: DayCounts,
}

/// How many rows a day has, by bank and kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DayCounts {
    /// Every row (bad ones included).
    pub rows: u64,
    /// The bad rows.
    pub bad: u64,
    /// By bank key.
    pub banks: BTreeMap<String, BankCounts>,
}

/// One bank's rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BankCounts {
    /// Valid same-day entries.
    pub same_day: u64,
    /// Valid entries effective on a later day.
    pub next_day: u64,
    /// Bad rows.
    pub bad: u64,
}

impl fmt::Display for DayFiles {
    /// What a person wants to see after generating a day: where, and how many of what.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counts;
        writeln!(
            f,
            "{}: {} rows ({} valid, {} same-day; {} bad)",
            self.entries_csv.display(),
            c.rows,
            c.valid(),
            c.same_day(),
            c.bad
        )?;
        write!(
            f,
            "{}: rules for {} banks",
            self.rules.display(),
            c.banks.len()
        )?;
        for (bank, b) in &c.banks {
            write!(
                f,
                "\n  {bank}: {} same-day, {} next-day, {} bad",
                b.same_day, b.next_day, b.bad
            )?;
        }
        Ok(())
    }
}

impl DayCounts {
    /// Count one row.
    pub fn add(&mut self, entry: &Entry, flaw: Option<Flaw>) {
        self.rows += 1;
        let bank = self.banks.entry(entry.bank.clone()).or_default();
        match (flaw, entry.same_day) {
            (Some(_), _) => {
                self.bad += 1;
                bank.bad += 1;
            }
            (None, true) => bank.same_day += 1,
            (None, false) => bank.next_day += 1,
        }
    }

    /// The valid same-day entries of every bank.
    pub fn same_day(&self) -> u64 {
        self.banks.values().map(|b| b.same_day).sum()
    }

    /// The valid entries of every bank.
    pub fn valid(&self) -> u64 {
        self.rows - self.bad
    }
}

/// Write the day of `options` into `dir` (made if missing): `entries.csv` and
/// `ach.toml`. The rules are checked before anything is written: a bank name that is
/// no valid key fails with `InvalidInput`, as do no banks.
pub fn write_day(dir: &Path, options: &DayOptions) -> io::Result<DayFiles> {
    if options.banks.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a day needs at least one bank",
        ));
    }
    let rules = dir.join("ach.toml");
    let text = example_for(&options.banks);
    Rules::parse(&text, &rules).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the rules for banks {:?} are not valid: {e}", options.banks),
        )
    })?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(&rules, text)?;

    let entries_csv = dir.join("entries.csv");
    let mut out = csv::WriterBuilder::new()
        .has_headers(false)
        .from_path(&entries_csv)?;
    out.write_record(CSV_HEADER)?;
    let mut counts = DayCounts::default();
    for (entry, flaw) in rows(options) {
        counts.add(&entry, flaw);
        if flaw == Some(Flaw::CheckDigit) {
            out.write_record(&wrong_check_digit(&entry)?)?;
        } else {
            out.serialize(&entry)?;
        }
    }
    out.flush()?;
    Ok(DayFiles {
        entries_csv,
        rules,
        counts,
    })
}

/// `entry`'s row with its routing number's check digit changed: serialized as any
/// row is, then the one field altered, so the row differs from a good one only there.
fn wrong_check_digit(entry: &Entry) -> io::Result<csv::StringRecord> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.serialize(entry)?;
    let bytes = w.into_inner().map_err(|e| e.into_error())?;
    let mut record = csv::StringRecord::new();
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(bytes.as_slice())
        .read_record(&mut record)?;
    let at = CSV_HEADER
        .iter()
        .position(|c| *c == "rdfi_routing")
        .expect("a routing column");
    let mut fields: Vec<String> = record.iter().map(str::to_string).collect();
    let mut digits = fields[at].clone().into_bytes();
    digits[8] = b'0' + (digits[8] - b'0' + 1) % 10;
    fields[at] = String::from_utf8(digits).expect("digits");
    Ok(fields.into_iter().collect())
}
