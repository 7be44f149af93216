//! The day's plan: which originator comes next, through which bank, same-day or not,
//! and with how many entries. Made as the day streams, one originator at a time.

use std::collections::VecDeque;

use chrono::NaiveDate;

use super::rng::Rng;
use super::words::{self, LARGE_EMPLOYERS, WEB_DESCRIPTIONS};
use super::{next_business_day, DayOptions};

/// What an originator sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Salaries: PPD credits.
    Payroll { large: bool },
    /// Payments to suppliers: CCD credits, some with an addenda.
    Vendors,
    /// Consumers' bills: WEB (or TEL) debits.
    Collections { tel: bool },
}

/// One originator's entries of the day, made one by one.
pub(crate) struct Segment {
    pub kind: Kind,
    pub bank: String,
    pub company_name: String,
    pub company_id: String,
    pub description: &'static str,
    pub descriptive_date: String,
    pub same_day: bool,
    pub size: u64,
    /// Entries still to make.
    pub left: u64,
    /// The first employee number of a payroll.
    pub first_number: u64,
    /// The segment's own stream.
    pub rng: Rng,
}

/// Large employers are this share of a day of at least `LARGE_DAY` entries.
const LARGE_SHARE_PERCENT: u64 = 35;
const LARGE_DAY: u64 = 20_000;

pub(crate) struct Planner {
    rng: Rng,
    seed: u64,
    banks: Vec<String>,
    date: NaiveDate,
    next_day: NaiveDate,
    same_day_share: f64,
    /// Large employers still to come: after how many small originators' entries
    /// each starts, and its size.
    large: VecDeque<(u64, u64)>,
    large_seen: usize,
    small_left: u64,
    small_made: u64,
    planned: u64,
    same_day_planned: u64,
    segments: u64,
}

impl Planner {
    pub fn new(o: &DayOptions) -> Self {
        let mut rng = Rng::derived(o.seed, u64::MAX - 1);
        let mut sizes = Vec::new();
        if o.entries >= LARGE_DAY {
            let mut left = o.entries * LARGE_SHARE_PERCENT / 100;
            while left >= 10_000 && sizes.len() < 12 {
                let size = rng.range(10_000, 60_000).min(left);
                sizes.push(size);
                left -= size;
            }
        } else if o.entries >= 100 {
            // A small day still has one payroll much larger than the rest.
            sizes.push(o.entries * 3 / 10);
        }
        let small = o.entries - sizes.iter().sum::<u64>();
        let mut starts: Vec<u64> = sizes.iter().map(|_| rng.below(small + 1)).collect();
        starts.sort_unstable();
        Planner {
            rng,
            seed: o.seed,
            banks: o.banks.clone(),
            date: o.date,
            next_day: next_business_day(o.date),
            same_day_share: o.same_day_share.clamp(0.0, 1.0),
            large: starts.into_iter().zip(sizes).collect(),
            large_seen: 0,
            small_left: small,
            small_made: 0,
            planned: 0,
            same_day_planned: 0,
            segments: 0,
        }
    }

    /// The next originator. Their sizes add up to the day's entries exactly, so the
    /// caller asks only while entries are due.
    pub fn next_segment(&mut self) -> Segment {
        if let Some(&(start, size)) = self.large.front() {
            if start <= self.small_made || self.small_left == 0 {
                self.large.pop_front();
                return self.segment(Kind::Payroll { large: true }, size);
            }
        }
        let pick = self.rng.unit();
        let (kind, size) = if pick < 0.45 {
            (
                Kind::Payroll { large: false },
                self.rng.log_uniform(10, 400),
            )
        } else if pick < 0.75 {
            (Kind::Vendors, self.rng.log_uniform(5, 200))
        } else {
            let tel = self.rng.chance(0.3);
            (Kind::Collections { tel }, self.rng.log_uniform(20, 2000))
        };
        // Stop where the next large employer starts.
        let room = match self.large.front() {
            Some(&(start, _)) => start - self.small_made,
            None => self.small_left,
        };
        let size = size.min(room).max(1);
        self.small_made += size;
        self.small_left = self.small_left.saturating_sub(size);
        self.segment(kind, size)
    }

    fn segment(&mut self, kind: Kind, size: u64) -> Segment {
        let mut rng = Rng::derived(self.seed, self.segments);
        let bank = match self.banks.get(self.segments as usize) {
            // The first originators go one to each bank, so every bank is used.
            Some(b) => b.clone(),
            None => self.rng.pick(&self.banks).clone(),
        };
        self.segments += 1;
        // Same-day when that keeps the same-day entries planned nearest the share.
        let target = self.same_day_share * (self.planned + size) as f64;
        let same_day = self.same_day_planned as f64 + size as f64 / 2.0 <= target;
        self.planned += size;
        if same_day {
            self.same_day_planned += size;
        }
        let company_name = match kind {
            Kind::Payroll { large: true } => {
                let name = LARGE_EMPLOYERS[self.large_seen % LARGE_EMPLOYERS.len()];
                let round = self.large_seen / LARGE_EMPLOYERS.len();
                self.large_seen += 1;
                if round == 0 {
                    name.to_string()
                } else {
                    let suffix = format!(" {}", round + 1);
                    format!("{}{suffix}", &name[..name.len().min(16 - suffix.len())])
                }
            }
            _ => words::business(&mut rng, 16),
        };
        let effective = if same_day { self.date } else { self.next_day };
        let (description, descriptive_date) = match kind {
            Kind::Payroll { .. } => (
                "PAYROLL",
                effective.format("%b %d").to_string().to_ascii_uppercase(),
            ),
            Kind::Vendors => (
                *rng.pick(&["VENDOR PAY", "PAYABLES", "INVOICES"]),
                String::new(),
            ),
            Kind::Collections { tel: false } => (*rng.pick(&WEB_DESCRIPTIONS), String::new()),
            Kind::Collections { tel: true } => ("PAYMENT", String::new()),
        };
        Segment {
            kind,
            bank,
            company_name,
            company_id: words::company_id(&mut rng),
            description,
            descriptive_date,
            same_day,
            size,
            left: size,
            first_number: rng.range(1, 50_000),
            rng,
        }
    }
}
