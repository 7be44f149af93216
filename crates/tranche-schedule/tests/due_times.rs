//! Due times in a zone: weekdays, daylight saving both ways, month ends.

use chrono::{DateTime, Utc};
use tranche_schedule::Timing;
use tranche_types::Timestamp;

fn utc(s: &str) -> Timestamp {
    Timestamp(
        DateTime::parse_from_rfc3339(s)
            .unwrap()
            .with_timezone(&Utc)
            .timestamp_micros(),
    )
}

fn show(t: Timestamp) -> String {
    DateTime::from_timestamp_micros(t.micros())
        .unwrap()
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The next `n` due times after `after`, as UTC text.
fn next_n(timing: &Timing, after: &str, n: usize) -> Vec<String> {
    let mut t = utc(after);
    (0..n)
        .map(|_| {
            t = timing.next_after(t).expect("a next due time");
            show(t)
        })
        .collect()
}

#[test]
fn weekday_evenings_in_kolkata() {
    let t = Timing::cron("0 18 * * MON-FRI", "Asia/Kolkata").unwrap();
    // Friday 1 May 2026, 17:30 IST: that evening, then Monday and Tuesday (18:00 IST is
    // 12:30 UTC; no weekend).
    assert_eq!(
        next_n(&t, "2026-05-01T12:00:00Z", 3),
        [
            "2026-05-01T12:30:00Z",
            "2026-05-04T12:30:00Z",
            "2026-05-05T12:30:00Z"
        ]
    );
    // Exactly at a due time: the next one, not the same.
    assert_eq!(
        next_n(&t, "2026-05-01T12:30:00Z", 1),
        ["2026-05-04T12:30:00Z"]
    );
}

#[test]
fn new_york_spring_forward_fires_a_skipped_time_at_the_end_of_the_gap() {
    // 8 March 2026: 02:00 EST jumps to 03:00 EDT, so 02:30 does not exist that day.
    let t = Timing::cron("30 2 * * *", "America/New_York").unwrap();
    assert_eq!(
        next_n(&t, "2026-03-07T00:00:00Z", 3),
        [
            "2026-03-07T07:30:00Z", // 02:30 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT, the first instant after the gap
            "2026-03-09T06:30:00Z", // 02:30 EDT
        ]
    );
    // Four skipped times (02:00, 02:15, 02:30, 02:45) collapse into one due time.
    let t = Timing::cron("*/15 2 * * *", "America/New_York").unwrap();
    assert_eq!(
        next_n(&t, "2026-03-08T06:50:00Z", 2),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"]
    );
}

#[test]
fn new_york_fall_back_fires_a_repeated_time_once() {
    // 1 November 2026: 02:00 EDT falls back to 01:00 EST, so 01:30 happens twice.
    let t = Timing::cron("30 1 * * *", "America/New_York").unwrap();
    assert_eq!(
        next_n(&t, "2026-10-31T12:00:00Z", 2),
        [
            "2026-11-01T05:30:00Z", // 01:30 EDT, the first occurrence
            "2026-11-02T06:30:00Z", // the next day; not 01:30 EST on the 1st
        ]
    );
    // Hourly: the repeated 01:00 fires once; the hour runs on at 02:00 EST.
    let t = Timing::cron("0 * * * *", "America/New_York").unwrap();
    assert_eq!(
        next_n(&t, "2026-11-01T04:30:00Z", 3),
        [
            "2026-11-01T05:00:00Z", // 01:00 EDT
            "2026-11-01T07:00:00Z", // 02:00 EST
            "2026-11-01T08:00:00Z",
        ]
    );
    // From inside the repeated hour (01:15 EST), the earlier 01:30 EDT is not due again.
    let t = Timing::cron("30 1 * * *", "America/New_York").unwrap();
    assert_eq!(
        next_n(&t, "2026-11-01T06:15:00Z", 1),
        ["2026-11-02T06:30:00Z"]
    );
}

#[test]
fn the_31st_fires_only_in_months_that_have_one() {
    let t = Timing::cron("0 0 31 * *", "UTC").unwrap();
    assert_eq!(
        next_n(&t, "2026-01-01T00:00:00Z", 4),
        [
            "2026-01-31T00:00:00Z",
            "2026-03-31T00:00:00Z",
            "2026-05-31T00:00:00Z",
            "2026-07-31T00:00:00Z"
        ]
    );
}

#[test]
fn the_last_day_of_each_month_leap_years_included() {
    let t = Timing::cron("0 9 L * *", "Asia/Kolkata").unwrap();
    assert_eq!(
        next_n(&t, "2028-01-15T00:00:00Z", 4),
        [
            "2028-01-31T03:30:00Z",
            "2028-02-29T03:30:00Z",
            "2028-03-31T03:30:00Z",
            "2028-04-30T03:30:00Z"
        ]
    );
    assert_eq!(
        next_n(&t, "2027-02-01T00:00:00Z", 1),
        ["2027-02-28T03:30:00Z"]
    );
}

#[test]
fn missed_due_times_collapse_into_the_latest() {
    let t = Timing::cron("0 * * * *", "UTC").unwrap();
    let after = utc("2026-05-01T00:00:00Z");
    assert_eq!(
        t.latest_in(after, utc("2026-05-01T05:30:00Z")).map(show),
        Some("2026-05-01T05:00:00Z".into())
    );
    assert_eq!(t.latest_in(after, utc("2026-05-01T00:59:59Z")), None);
    // Years down: still the latest, without walking every hour since.
    assert_eq!(
        t.latest_in(after, utc("2029-05-01T05:30:00Z")).map(show),
        Some("2029-05-01T05:00:00Z".into())
    );
}

#[test]
fn a_one_off_time_is_due_once() {
    let at = utc("2026-05-01T09:00:00Z");
    let t = Timing::At(at);
    assert_eq!(t.next_after(utc("2026-05-01T08:00:00Z")), Some(at));
    assert_eq!(t.next_after(at), None);
    assert_eq!(t.latest_in(Timestamp(at.micros() - 1), at), Some(at));
}

#[test]
fn bad_patterns_and_zones_say_what_was_expected() {
    let e = Timing::cron("0 25 * * *", "UTC").unwrap_err();
    assert_eq!(e.field, "cron");
    assert!(e.got.contains("0 25 * * *"), "{e}");
    let e = Timing::cron("0 18 * * *", "Asia/Bombay_").unwrap_err();
    assert_eq!(e.field, "zone");
    assert!(e.to_string().contains("expected an IANA time zone"), "{e}");
}
