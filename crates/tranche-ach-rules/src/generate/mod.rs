//! A realistic day of ACH entries, generated: deterministic for a seed, streamed (a
//! day of millions of entries is never held), for tests, demos and benchmarks.
//!
//! A day is a sequence of originators, each one's entries together as its file would
//! arrive: a few large employers' payrolls (tens of thousands of PPD credits each),
//! many small employers' (tens to hundreds), vendor payments (CCD credits, some with
//! an 05 addenda), collections (WEB and TEL debits), and here and there a prenote.
//! Each originator goes through one of the given banks and is same-day or not, so
//! that about `same_day_share` of the entries are. Same-day entries are effective on
//! the submission date, the others on the next business day (weekends skipped; no
//! holiday calendar).
//!
//! [`day`] yields the entries; [`write_day`] writes them as the CSV `tranche ach
//! import` reads, with an ach.toml for their banks beside it.

mod files;
mod plan;
mod rng;
mod words;

use chrono::{Datelike, NaiveDate, Weekday};
use tranche_ach::{
    AccountKind, AccountNumber, Direction, Entry, SecCode, TransactionCode, SAME_DAY_LIMIT_CENTS,
};

pub use files::{write_day, BankCounts, DayCounts, DayFiles, CSV_HEADER};

use plan::{Kind, Planner, Segment};
use rng::Rng;
use words::Rdfis;

/// What day to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct DayOptions {
    /// How many entries (rows, bad ones included).
    pub entries: u64,
    /// The submission date of every entry.
    pub date: NaiveDate,
    /// The seed: the same options give the same day.
    pub seed: u64,
    /// The banks entries go through (their keys); at least one. Each is used when
    /// there are at least as many originators as banks.
    pub banks: Vec<String>,
    /// About which share of the entries are Same Day ACH (default 0.15).
    pub same_day_share: f64,
    /// How many rows are made invalid (default 0), spread through the day.
    pub bad: u64,
}

impl Default for DayOptions {
    /// 10,000 entries submitted on Monday 2 March 2026 (the next business day is the
    /// day after), otherwise as [`DayOptions::new`].
    fn default() -> Self {
        DayOptions::new(10_000, NaiveDate::from_ymd_opt(2026, 3, 2).expect("a date"))
    }
}

impl DayOptions {
    /// `entries` entries submitted on `date`, seed 1, through banks `first` and
    /// `second` (the example ach.toml's), 15 % same-day, none invalid.
    pub fn new(entries: u64, date: NaiveDate) -> Self {
        DayOptions {
            entries,
            date,
            seed: 1,
            banks: vec!["first".into(), "second".into()],
            same_day_share: 0.15,
            bad: 0,
        }
    }
}

/// How a bad row is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flaw {
    /// The RDFI routing number's check digit is wrong. An [`Entry`] cannot hold
    /// such a number, so [`day`] yields the entry with its right number and
    /// [`write_day`] writes the wrong digit: the row does not parse as an entry.
    CheckDigit,
    /// A live (not prenote) entry of zero cents.
    ZeroAmount,
    /// The receiver's name has a letter outside NACHA's character set (`JOSÉ`).
    NonAsciiName,
    /// A same-day entry over the $1,000,000 limit.
    SameDayOverLimit,
}

impl Flaw {
    /// Every flaw, in the order bad rows take them.
    pub const ALL: [Flaw; 4] = [
        Flaw::CheckDigit,
        Flaw::ZeroAmount,
        Flaw::NonAsciiName,
        Flaw::SameDayOverLimit,
    ];
}

/// The day's entries, in order, with ids `E0000000001`, `E0000000002`, ….
///
/// # Panics
///
/// When `options.banks` is empty.
pub fn day(options: &DayOptions) -> impl Iterator<Item = Entry> {
    rows(options).map(|(entry, _)| entry)
}

/// The day's rows: each entry, and for a bad row how it is wrong.
///
/// # Panics
///
/// When `options.banks` is empty.
pub fn rows(options: &DayOptions) -> impl Iterator<Item = (Entry, Option<Flaw>)> {
    assert!(!options.banks.is_empty(), "a day needs at least one bank");
    Rows::new(options)
}

/// The next business day after `date`: Monday to Friday (no holiday calendar).
pub fn next_business_day(date: NaiveDate) -> NaiveDate {
    let mut d = date.succ_opt().expect("a date before the end of time");
    while matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
        d = d.succ_opt().expect("a date before the end of time");
    }
    d
}

/// The entry id of the `n`th entry of a day (from 1).
pub fn entry_id(n: u64) -> String {
    format!("E{n:010}")
}

struct Rows {
    date: NaiveDate,
    next_day: NaiveDate,
    entries: u64,
    bad: u64,
    planner: Planner,
    rdfis: Rdfis,
    segment: Option<Segment>,
    /// Entries made so far.
    made: u64,
    /// Bad rows made so far.
    flawed: u64,
}

impl Rows {
    fn new(o: &DayOptions) -> Self {
        let mut r = Rng::derived(o.seed, u64::MAX);
        Rows {
            date: o.date,
            next_day: next_business_day(o.date),
            entries: o.entries,
            bad: o.bad.min(o.entries),
            planner: Planner::new(o),
            rdfis: Rdfis::new(&mut r),
            segment: None,
            made: 0,
            flawed: 0,
        }
    }

    /// The index of the `k`th bad row: the bad rows sit in the middles of equal
    /// stretches of the day.
    fn bad_at(&self, k: u64) -> u64 {
        let (k, n, bad) = (
            u128::from(k),
            u128::from(self.entries),
            u128::from(self.bad),
        );
        ((2 * k + 1) * n / (2 * bad)) as u64
    }
}

impl Iterator for Rows {
    type Item = (Entry, Option<Flaw>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.made == self.entries {
            return None;
        }
        let flaw = if self.flawed < self.bad && self.made == self.bad_at(self.flawed) {
            self.flawed += 1;
            Some(Flaw::ALL[((self.flawed - 1) % Flaw::ALL.len() as u64) as usize])
        } else {
            None
        };
        self.made += 1;
        let segment = match &mut self.segment {
            Some(s) if s.left > 0 => s,
            _ => self.segment.insert(self.planner.next_segment()),
        };
        let mut entry = make(segment, &self.rdfis, self.date, self.next_day, self.made);
        segment.left -= 1;
        if let Some(flaw) = flaw {
            spoil(&mut entry, flaw, &mut segment.rng, self.date);
        }
        Some((entry, flaw))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.entries - self.made).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

/// The next entry of `s`, the `n`th of the day.
fn make(s: &mut Segment, rdfis: &Rdfis, date: NaiveDate, next_day: NaiveDate, n: u64) -> Entry {
    let sec_code = s.sec_code();
    let r = &mut s.rng;
    let number = s.size - s.left;
    let savings = |r: &mut Rng, p| {
        if r.chance(p) {
            AccountKind::Savings
        } else {
            AccountKind::Checking
        }
    };
    let (code, amount_cents, individual_id, individual_name, addenda) = match s.kind {
        Kind::Payroll { .. } => {
            let prenote = r.chance(0.004);
            let mut code = TransactionCode::new(savings(r, 0.2), Direction::Credit);
            code.prenote = prenote;
            let amount = if prenote {
                0
            } else {
                r.log_uniform(50_000, 900_000)
            };
            let id = format!("EMP{:06}", s.first_number + number);
            (code, amount, id, words::person(r), None)
        }
        Kind::Vendors => {
            let code = TransactionCode::new(savings(r, 0.05), Direction::Credit);
            let mut amount = r.log_uniform(10_000, 25_000_000);
            if r.chance(0.01) {
                amount = r.log_uniform(25_000_000, 250_000_000);
            }
            if s.same_day {
                amount = amount.min(SAME_DAY_LIMIT_CENTS);
            }
            let addenda = r.chance(0.35).then(|| {
                format!(
                    "INV {} PO {} NET30 {}",
                    r.digits(6),
                    r.digits(5),
                    date.format("%Y%m%d")
                )
            });
            let vendor = words::business(r, 22);
            (code, amount, format!("V{}", r.digits(6)), vendor, addenda)
        }
        Kind::Collections { .. } => {
            let prenote = r.chance(0.005);
            let mut code = TransactionCode::new(savings(r, 0.15), Direction::Debit);
            code.prenote = prenote;
            let amount = if prenote {
                0
            } else {
                r.log_uniform(1_000, 250_000)
            };
            let id = format!("CUST{}", r.digits(8));
            (code, amount, id, words::person(r), None)
        }
    };
    let routing = rdfis.pick(r);
    let account_len = r.range(6, 17) as usize;
    Entry {
        entry_id: entry_id(n),
        bank: s.bank.clone(),
        company_name: s.company_name.clone(),
        company_id: s.company_id.clone(),
        sec_code,
        transaction_code: code,
        rdfi_routing: routing,
        account_number: AccountNumber::new(r.digits(account_len)),
        amount_cents,
        individual_id,
        individual_name,
        entry_description: s.description.to_string(),
        descriptive_date: s.descriptive_date.clone(),
        effective_date: if s.same_day { date } else { next_day },
        submission_date: date,
        same_day: s.same_day,
        addenda,
    }
}

/// Make `entry` wrong in the way `flaw` says (and only that way).
fn spoil(entry: &mut Entry, flaw: Flaw, r: &mut Rng, date: NaiveDate) {
    match flaw {
        Flaw::CheckDigit => {}
        Flaw::ZeroAmount => {
            entry.transaction_code.prenote = false;
            entry.amount_cents = 0;
        }
        Flaw::NonAsciiName => {
            entry.individual_name = r
                .pick(&["JOSÉ MUÑOZ", "ZOË BRONTË", "RENÉE FAÇADE"])
                .to_string();
        }
        Flaw::SameDayOverLimit => {
            entry.transaction_code.prenote = false;
            entry.same_day = true;
            entry.effective_date = date;
            entry.amount_cents = SAME_DAY_LIMIT_CENTS + r.range(1, 50_000_000);
        }
    }
}

impl Segment {
    fn sec_code(&self) -> SecCode {
        match self.kind {
            Kind::Payroll { .. } => SecCode::Ppd,
            Kind::Vendors => SecCode::Ccd,
            Kind::Collections { tel: false } => SecCode::Web,
            Kind::Collections { tel: true } => SecCode::Tel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn business_days_skip_weekends() {
        let d = |s: &str| s.parse::<NaiveDate>().unwrap();
        assert_eq!(next_business_day(d("2026-03-02")), d("2026-03-03")); // Mon → Tue
        assert_eq!(next_business_day(d("2026-03-06")), d("2026-03-09")); // Fri → Mon
        assert_eq!(next_business_day(d("2026-03-07")), d("2026-03-09")); // Sat → Mon
    }

    #[test]
    fn bad_rows_spread_evenly() {
        let mut o = DayOptions::new(1000, "2026-03-02".parse().unwrap());
        o.bad = 4;
        let r = Rows::new(&o);
        let at: Vec<u64> = (0..4).map(|k| r.bad_at(k)).collect();
        assert_eq!(at, [125, 375, 625, 875]);
        o.bad = 1000;
        let r = Rows::new(&o);
        assert_eq!((r.bad_at(0), r.bad_at(999)), (0, 999));
    }
}
