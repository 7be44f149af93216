//! Submission windows and their time math: when a window of a given submission date
//! begins packaging, opens and closes, as instants.
//!
//! Times are wall-clock times in the bank's zone, which daylight saving makes
//! irregular. The rule (the same as `tranche-schedule`'s):
//! - a time that does not exist (the hour skipped when clocks go forward) is the first
//!   instant after the gap (02:15 on a New York spring-forward day is 03:00 EDT);
//! - a time that occurs twice (the hour repeated when clocks go back) is its first
//!   occurrence (01:30 EDT, not 01:30 EST).
//!
//! A lead is a real duration: on a clock-change day packaging still starts that long
//! before the window opens, whatever the wall clock says.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Which entries a window takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Eligible {
    /// Same Day ACH entries (`same_day`) of the window's submission date.
    SameDay,
    /// Entries that settle on a later day (not `same_day`) of the window's
    /// submission date.
    NextDay,
}

impl Eligible {
    /// As ach.toml spells it: `same-day`, `next-day`.
    pub fn as_str(self) -> &'static str {
        match self {
            Eligible::SameDay => "same-day",
            Eligible::NextDay => "next-day",
        }
    }

    /// Every value, as ach.toml spells them.
    pub const NAMES: [&'static str; 2] = ["same-day", "next-day"];

    /// The value ach.toml spells `name`.
    pub fn from_name(name: &str) -> Option<Eligible> {
        match name {
            "same-day" => Some(Eligible::SameDay),
            "next-day" => Some(Eligible::NextDay),
            _ => None,
        }
    }
}

impl fmt::Display for Eligible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One submission window of a bank: on each submission date, files of the eligible
/// entries are sent between `submission_begin` and `submission_end` (the bank's
/// cut-off), and packaged from `lead` before the window opens until it closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Its name, `[a-z0-9-]+`, unique within its bank (`sd1`, `nd-night`).
    pub name: String,
    /// Which entries it takes.
    pub eligible: Eligible,
    /// When files may start going to the bank, in the bank's zone, on the submission
    /// date.
    pub submission_begin: NaiveTime,
    /// The bank's cut-off. Earlier than `submission_begin`: on the next day (a night
    /// window 21:00 → 02:15).
    pub submission_end: NaiveTime,
    /// When the bank settles the window's entries. Informational: the ACH operator
    /// decides, not us.
    pub settlement: Option<NaiveTime>,
    /// How long before `submission_begin` packaging starts.
    pub lead: Duration,
}

impl Window {
    /// The default lead: packaging starts 2 hours before the window opens.
    pub const DEFAULT_LEAD: Duration = Duration::from_secs(2 * 3600);
    /// The longest lead, a day: a longer one would start a date's packaging while the
    /// previous date's of the same window is still going on.
    pub const MAX_LEAD: Duration = Duration::from_secs(24 * 3600);

    /// Whether the window takes Same Day ACH entries.
    pub fn same_day(&self) -> bool {
        self.eligible == Eligible::SameDay
    }

    /// Whether the window takes `entry` on `date`: its same-day flag and submission
    /// date match.
    pub fn takes(&self, entry: &tranche_ach::Entry, date: NaiveDate) -> bool {
        entry.same_day == self.same_day() && entry.submission_date == date
    }

    /// Whether the window closes on the day after it opens.
    pub fn crosses_midnight(&self) -> bool {
        self.submission_end < self.submission_begin
    }

    /// When packaging starts for submission date `date`: [`Window::begins`] less the
    /// lead.
    pub fn packaging_from(&self, date: NaiveDate, tz: Tz) -> DateTime<Utc> {
        self.begins(date, tz) - lead(self.lead)
    }

    /// When the window opens for submission date `date`.
    pub fn begins(&self, date: NaiveDate, tz: Tz) -> DateTime<Utc> {
        resolve(tz, date.and_time(self.submission_begin))
    }

    /// When the window closes for submission date `date`: on `date`, or the day after
    /// when it ends before it begins.
    pub fn ends(&self, date: NaiveDate, tz: Tz) -> DateTime<Utc> {
        let day = if self.crosses_midnight() {
            date.succ_opt().expect("a date before the end of time")
        } else {
            date
        };
        resolve(tz, day.and_time(self.submission_end))
    }
}

fn lead(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).expect("a lead of at most 24 h (validated)")
}

/// A wall-clock time in `tz` as an instant, by the module's rule: a time in a gap is
/// the first instant after it, a repeated time its first occurrence.
pub fn resolve(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let mut t = local;
    // Gaps are whole minutes and at most a day long (Samoa skipped 30 December 2011),
    // and our times are whole minutes: stepping by minutes finds the gap's end.
    for _ in 0..=(26 * 60) {
        match tz.from_local_datetime(&t) {
            LocalResult::Single(d) => return d.with_timezone(&Utc),
            LocalResult::Ambiguous(first, _) => return first.with_timezone(&Utc),
            LocalResult::None => t += chrono::Duration::minutes(1),
        }
    }
    // No zone has a gap this long; reading the time as UTC keeps this total.
    Utc.from_utc_datetime(&local)
}

/// A window that is due: its bank, its name, the submission date, and which phase
/// holds the instant asked about (see [`crate::Rules::due`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The bank's key.
    pub bank: String,
    /// The window's name.
    pub window: String,
    /// The submission date: the window takes entries submitted on it.
    pub date: NaiveDate,
    /// In the packaging phase, `[packaging_from, ends)`: package the window's entries.
    pub package: bool,
    /// In the submission phase, `[begins, ends)`: files may go to the bank.
    pub submit: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::America::New_York;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn date(y: i32, m: u32, d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(y, m, d).unwrap()
    }

    fn window(begin: &str, end: &str, lead_secs: u64) -> Window {
        Window {
            name: "w".into(),
            eligible: Eligible::SameDay,
            submission_begin: crate::duration::parse_time(begin).unwrap(),
            submission_end: crate::duration::parse_time(end).unwrap(),
            settlement: None,
            lead: Duration::from_secs(lead_secs),
        }
    }

    #[test]
    fn a_day_window_in_new_york() {
        let w = window("08:30", "10:30", 2 * 3600);
        let d = date(2026, 6, 15);
        assert_eq!(w.begins(d, New_York), utc("2026-06-15T12:30:00Z"));
        assert_eq!(w.ends(d, New_York), utc("2026-06-15T14:30:00Z"));
        assert_eq!(w.packaging_from(d, New_York), utc("2026-06-15T10:30:00Z"));
        let d = date(2026, 1, 15);
        assert_eq!(w.begins(d, New_York), utc("2026-01-15T13:30:00Z"));
    }

    #[test]
    fn a_night_window_ends_the_next_day() {
        let w = window("21:00", "02:15", 3600);
        assert!(w.crosses_midnight());
        let d = date(2026, 6, 15);
        assert_eq!(w.begins(d, New_York), utc("2026-06-16T01:00:00Z"));
        assert_eq!(w.ends(d, New_York), utc("2026-06-16T06:15:00Z"));
        assert_eq!(w.packaging_from(d, New_York), utc("2026-06-16T00:00:00Z"));
    }

    #[test]
    fn a_time_in_the_spring_gap_is_the_gaps_end() {
        // 8 March 2026: New York goes from 02:00 EST to 03:00 EDT.
        let w = window("21:00", "02:15", 3600);
        let d = date(2026, 3, 7);
        assert_eq!(w.begins(d, New_York), utc("2026-03-08T02:00:00Z")); // 21:00 EST
        assert_eq!(w.ends(d, New_York), utc("2026-03-08T07:00:00Z")); // 03:00 EDT
        let w = window("02:30", "04:00", 3600);
        let d = date(2026, 3, 8);
        assert_eq!(w.begins(d, New_York), utc("2026-03-08T07:00:00Z"));
        // The lead is real time: an hour before 03:00 EDT is 01:00 EST.
        assert_eq!(w.packaging_from(d, New_York), utc("2026-03-08T06:00:00Z"));
    }

    #[test]
    fn a_repeated_time_in_the_autumn_is_its_first_occurrence() {
        // 1 November 2026: New York goes from 02:00 EDT back to 01:00 EST.
        let w = window("21:00", "01:30", 0);
        let d = date(2026, 10, 31);
        assert_eq!(w.ends(d, New_York), utc("2026-11-01T05:30:00Z")); // 01:30 EDT
        let w = window("08:30", "10:30", 2 * 3600);
        let d = date(2026, 11, 1);
        assert_eq!(w.begins(d, New_York), utc("2026-11-01T13:30:00Z")); // EST
        assert_eq!(w.packaging_from(d, New_York), utc("2026-11-01T11:30:00Z"));
    }
}
