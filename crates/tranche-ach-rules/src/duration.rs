//! Durations and times of day as ach.toml writes them: `"1h30m"`, `"08:30"`.
//!
//! A parser of our own rather than humantime: it takes exactly hours, minutes and
//! seconds (a cut-off is never "2 months"), and its errors say what to write instead
//! (`"5 min"` → did you mean `"5m"`?).

use std::fmt;
use std::time::Duration;

use chrono::NaiveTime;

/// What ach.toml says a duration must look like.
pub(crate) const DURATION_EXPECTED: &str =
    "a duration of hours, minutes and seconds such as \"15s\", \"5m\", \"2h\" or \"1h30m\"";

/// What ach.toml says a time of day must look like.
pub(crate) const TIME_EXPECTED: &str = "a time HH:MM";

/// A duration that could not be read, and what was probably meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadDuration {
    /// The text with its units spelt as we spell them, when that reads
    /// (`"5 min"` → `"5m"`).
    pub suggestion: Option<String>,
}

/// Read `"15s"`, `"5m"`, `"2h"`, `"1h30m"`, `"1h30m15s"`, `"0s"`: numbers each
/// followed by `h`, `m` or `s`, largest unit first, each unit at most once.
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    strict(text).ok_or_else(|| BadDuration {
        suggestion: loose(text).and_then(|d| {
            let canonical = format_duration(d);
            (canonical != text).then_some(canonical)
        }),
    })
}

fn strict(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total: u64 = 0;
    let mut last_rank = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        let (rank, seconds) = match rest.as_bytes().get(digits)? {
            b'h' => (1, 3600),
            b'm' => (2, 60),
            b's' => (3, 1),
            _ => return None,
        };
        if rank <= last_rank {
            return None;
        }
        last_rank = rank;
        total += n * seconds;
        rest = &rest[digits + 1..];
    }
    Some(Duration::from_secs(total))
}

/// The readings people write anyway: spaces, long unit names, upper case.
fn loose(text: &str) -> Option<Duration> {
    let lower = text.trim().to_ascii_lowercase();
    let mut total: u64 = 0;
    let mut any = false;
    let mut rest = lower.as_str();
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 9 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let seconds = match &rest[..unit_len] {
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "s" | "sec" | "secs" | "second" | "seconds" => 1,
            _ => return None,
        };
        total += n * seconds;
        any = true;
        rest = &rest[unit_len..];
    }
    any.then(|| Duration::from_secs(total))
}

/// A duration as ach.toml writes it: `"1h30m"`, `"15s"`, `"0s"`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Read a time of day `"HH:MM"` (or `"H:MM"`), 00:00 to 23:59.
pub fn parse_time(text: &str) -> Option<NaiveTime> {
    let (h, m) = text.split_once(':')?;
    let digits = |s: &str, max_len| {
        (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u32>().ok())
            .flatten()
    };
    if m.len() != 2 {
        return None;
    }
    NaiveTime::from_hms_opt(digits(h, 2)?, digits(m, 2)?, 0)
}

/// A time of day as ach.toml writes it, `"08:30"`, for messages.
pub(crate) struct Hm(pub NaiveTime);

impl fmt::Display for Hm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format("%H:%M"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_hours_minutes_and_seconds() {
        let secs = |t| parse_duration(t).map(|d| d.as_secs());
        assert_eq!(secs("15s"), Ok(15));
        assert_eq!(secs("5m"), Ok(300));
        assert_eq!(secs("2h"), Ok(7200));
        assert_eq!(secs("1h30m"), Ok(5400));
        assert_eq!(secs("1h30m15s"), Ok(5415));
        assert_eq!(secs("0s"), Ok(0));
        assert_eq!(secs("90m"), Ok(5400));
        for bad in [
            "",
            "5",
            "m",
            "5x",
            "1m1h",
            "1h1h",
            "-5m",
            "1.5h",
            "5ms",
            "1234567890s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn near_misses_suggest_our_spelling() {
        let hint = |t| parse_duration(t).unwrap_err().suggestion;
        assert_eq!(hint("5 min"), Some("5m".into()));
        assert_eq!(hint("2 hours"), Some("2h".into()));
        assert_eq!(hint("1h 30m"), Some("1h30m".into()));
        assert_eq!(hint("15S"), Some("15s".into()));
        assert_eq!(hint("90 minutes"), Some("1h30m".into()));
        assert_eq!(hint("soon"), None);
        assert_eq!(hint("5"), None);
    }

    #[test]
    fn durations_format_as_they_parse() {
        for d in [0, 15, 300, 5400, 5415, 86_400] {
            let text = format_duration(Duration::from_secs(d));
            assert_eq!(parse_duration(&text), Ok(Duration::from_secs(d)), "{text}");
        }
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
    }

    #[test]
    fn times_of_day() {
        let t = |h, m| NaiveTime::from_hms_opt(h, m, 0);
        assert_eq!(parse_time("08:30"), t(8, 30));
        assert_eq!(parse_time("8:30"), t(8, 30));
        assert_eq!(parse_time("00:00"), t(0, 0));
        assert_eq!(parse_time("23:59"), t(23, 59));
        for bad in [
            "24:00", "25:00", "12:60", "12:5", "1230", "12:30:00", "ab:cd", "", ":30",
        ] {
            assert_eq!(parse_time(bad), None, "{bad:?}");
        }
        assert_eq!(Hm(t(8, 5).unwrap()).to_string(), "08:05");
    }
}
