//! When a schedule is due: a cron pattern read in a time zone, or one instant.
//!
//! Cron patterns match wall-clock times in the zone, which daylight saving makes
//! irregular. The rule:
//! - A wall-clock time that does not exist (the hour skipped when clocks go forward)
//!   is due at the first instant after the gap (02:30 on a New York spring-forward day
//!   fires at 03:00 EDT). Several skipped times collapse into that one due time.
//! - A wall-clock time that occurs twice (the hour repeated when clocks go back) is
//!   due once, at its first occurrence (01:30 EDT, not again at 01:30 EST).

use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDateTime, TimeZone, Timelike, Utc};
use chrono_tz::Tz;
use croner::Cron;
use tranche_types::Timestamp;

use crate::error::Invalid;

/// What decides a schedule's due times.
#[derive(Clone, Debug)]
pub enum Timing {
    /// Every wall-clock time the pattern matches in `zone`.
    Cron {
        /// The pattern as written, e.g. `0 18 * * MON-FRI`.
        expr: String,
        /// The zone it is read in, e.g. `Asia/Kolkata`.
        zone: Tz,
        /// The parsed pattern.
        cron: Box<Cron>,
    },
    /// Once, at this instant.
    At(Timestamp),
}

impl Timing {
    /// A cron pattern (5 fields, or 6 with seconds first; names such as `MON-FRI`,
    /// `L` for a month's last day) read in the IANA zone `zone`.
    pub fn cron(expr: &str, zone: &str) -> Result<Timing, Invalid> {
        let zone = parse_zone(zone)?;
        let cron = Cron::from_str(expr).map_err(|e| Invalid {
            field: "cron",
            expected: "a cron pattern such as \"0 18 * * MON-FRI\"".into(),
            got: format!("{expr:?} ({e})"),
        })?;
        Ok(Timing::Cron {
            expr: expr.trim().to_string(),
            zone,
            cron: Box::new(cron),
        })
    }

    /// The normalised text the backend compares on a re-declaration: a changed
    /// pattern, zone or time starts the schedule afresh.
    pub fn key(&self) -> String {
        match self {
            Timing::Cron { expr, zone, .. } => format!("cron {expr} in {}", zone.name()),
            Timing::At(t) => format!("at {}", t.micros()),
        }
    }

    /// The first due time strictly after `after`, or `None` if there is none.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match self {
            Timing::At(t) => (*t > after).then_some(*t),
            Timing::Cron { zone, cron, .. } => {
                let after_utc = to_utc(after)?;
                let mut local = after_utc.with_timezone(zone).naive_local();
                // Bounded: a pattern that matches only wall-clock times that resolve to
                // instants before `after` (the repeated hour) moves on within a day.
                for _ in 0..10_000 {
                    local = cron.find_next_occurrence(&local, false).ok()?;
                    let due = resolve(zone, local)?;
                    if due > after {
                        return Some(due);
                    }
                }
                None
            }
        }
    }

    /// The latest due time in `(after, upto]`: every due time a process that was
    /// down missed collapses into it.
    pub fn latest_in(&self, after: Timestamp, upto: Timestamp) -> Option<Timestamp> {
        let first = self.next_after(after).filter(|t| *t <= upto)?;
        // Only the latest matters: start near `upto` rather than walk years of
        // minutes after a long outage.
        const LOOKBACK: i64 = 400 * 24 * 3600 * 1_000_000;
        let mut latest = first;
        let mut cursor = first.max(Timestamp(upto.micros().saturating_sub(LOOKBACK)));
        while let Some(t) = self.next_after(cursor).filter(|t| *t <= upto) {
            latest = t;
            cursor = t;
        }
        Some(latest)
    }
}

/// An IANA zone name (`Asia/Kolkata`, `America/New_York`, `UTC`).
pub fn parse_zone(zone: &str) -> Result<Tz, Invalid> {
    Tz::from_str(zone).map_err(|_| Invalid {
        field: "zone",
        expected: "an IANA time zone such as \"Asia/Kolkata\" or \"UTC\"".into(),
        got: format!("{zone:?}"),
    })
}

/// A one-off time (a schedule's `at`): with an offset (`2026-05-01T09:00:00+05:30`,
/// `…Z`), or a wall-clock time read in the IANA zone `zone` by the same
/// daylight-saving rule as cron times. Shared by schedule files and the HTTP API so
/// both accept the same texts.
pub fn parse_at(text: &str, zone: &str) -> Result<Timestamp, Invalid> {
    let bad = || Invalid {
        field: "at",
        expected: "a date and time such as 2026-05-01T09:00:00 (in zone) or \
                   2026-05-01T09:00:00+05:30"
            .into(),
        got: format!("{text:?}"),
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(Timestamp(t.timestamp_micros()));
    }
    let naive = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
    .ok_or_else(bad)?;
    resolve(&parse_zone(zone)?, naive).ok_or_else(bad)
}

/// A wall-clock time in `zone` as an instant, by the module's rule: a time in a gap
/// is the first instant after it, a repeated time its first occurrence.
pub fn resolve(zone: &Tz, local: NaiveDateTime) -> Option<Timestamp> {
    let mut t = local;
    // Gaps are at most a day long (Samoa skipped 30 December 2011).
    for _ in 0..=(26 * 60) {
        match zone.from_local_datetime(&t) {
            LocalResult::Single(d) => return Some(Timestamp(d.timestamp_micros())),
            LocalResult::Ambiguous(first, _) => return Some(Timestamp(first.timestamp_micros())),
            LocalResult::None => {
                t = t
                    .checked_add_signed(chrono::Duration::minutes(1))?
                    .with_second(0)?
            }
        }
    }
    None
}

fn to_utc(t: Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(t.micros())
}

/// `t` as a wall-clock time in the IANA zone `zone` (`2026-05-04 18:00 IST`), for
/// listings; `None` for an unknown zone.
pub fn local_time(zone: &str, t: Timestamp) -> Option<String> {
    let zone = Tz::from_str(zone).ok()?;
    Some(
        to_utc(t)?
            .with_timezone(&zone)
            .format("%Y-%m-%d %H:%M %Z")
            .to_string(),
    )
}
