//! Which windows are due when: the example's banks at instants through a summer day,
//! a night window across midnight, and the clock-change days of New York.

use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use tranche_ach_rules::{Due, Rules, EXAMPLE};

fn utc(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn date(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn example() -> Rules {
    Rules::parse(EXAMPLE, Path::new("ach.toml")).unwrap()
}

/// `bank/window/date/phase` for each due window, phase `package` or `submit`.
fn due(rules: &Rules, at: &str) -> Vec<String> {
    rules
        .due(utc(at))
        .into_iter()
        .map(|d: Due| {
            assert!(
                d.package,
                "a window in its submission phase is packaging too"
            );
            let phase = if d.submit { "submit" } else { "package" };
            format!("{}/{}/{}/{phase}", d.bank, d.window, d.date)
        })
        .collect()
}

#[test]
fn a_summer_day_of_the_example() {
    // 15 June 2026: New York is UTC-4, Chicago UTC-5.
    let r = example();
    let before_anything = due(&r, "2026-06-15T10:00:00Z"); // 06:00 EDT, 05:00 CDT
    assert_eq!(before_anything, Vec::<String>::new());
    assert_eq!(
        due(&r, "2026-06-15T11:00:00Z"), // packaging of both sd1s, not yet open
        [
            "first/sd1/2026-06-15/package",
            "second/sd1/2026-06-15/package"
        ]
    );
    assert_eq!(
        due(&r, "2026-06-15T12:30:00Z"), // first's sd1 opens at 08:30 EDT exactly
        [
            "first/sd1/2026-06-15/submit",
            "second/sd1/2026-06-15/submit"
        ]
    );
    assert_eq!(
        due(&r, "2026-06-15T14:30:00Z"), // 10:30 EDT: sd1 closed, sd2 packaging
        [
            "first/sd2/2026-06-15/package",
            "second/sd2/2026-06-15/package"
        ]
    );
    assert_eq!(
        due(&r, "2026-06-15T20:00:00Z"), // 16:00 EDT: sd3 open, evening packaging
        [
            "first/sd3/2026-06-15/submit",
            "first/nd-evening/2026-06-15/package",
            "second/nd/2026-06-15/package",
        ]
    );
    assert_eq!(
        due(&r, "2026-06-15T23:59:59Z"), // a second before both evenings close
        [
            "first/nd-evening/2026-06-15/submit",
            "second/nd/2026-06-15/submit"
        ]
    );
    assert_eq!(
        due(&r, "2026-06-16T00:00:00Z"), // 20:00 EDT: the night window packages
        ["first/nd-night/2026-06-15/package"]
    );
}

#[test]
fn a_night_window_belongs_to_the_date_it_opened() {
    let r = example();
    // 01:00 EDT on the 16th: the night window of the 15th is still open.
    assert_eq!(
        due(&r, "2026-06-16T05:00:00Z"),
        ["first/nd-night/2026-06-15/submit"]
    );
    let d = &r.due(utc("2026-06-16T05:00:00Z"))[0];
    assert_eq!(d.date, date("2026-06-15"));
    // 02:15 EDT: closed.
    assert_eq!(due(&r, "2026-06-16T06:15:00Z"), Vec::<String>::new());
}

#[test]
fn spring_forward_closes_a_night_window_at_the_end_of_the_gap() {
    // 8 March 2026, 02:00 EST → 03:00 EDT: 02:15 does not exist, so the night window
    // of the 7th closes at 03:00 EDT (07:00Z), not at 02:15 EST (07:15Z).
    let r = example();
    assert_eq!(
        due(&r, "2026-03-08T06:59:00Z"),
        ["first/nd-night/2026-03-07/submit"]
    );
    assert_eq!(due(&r, "2026-03-08T07:00:00Z"), Vec::<String>::new());
    assert_eq!(due(&r, "2026-03-08T07:05:00Z"), Vec::<String>::new());
    // The next morning is on EDT: sd1 opens at 08:30 EDT, 12:30Z.
    assert_eq!(
        due(&r, "2026-03-09T12:30:00Z"),
        [
            "first/sd1/2026-03-09/submit",
            "second/sd1/2026-03-09/submit"
        ]
    );
    let sd1 = r.bank("first").unwrap().window("sd1").unwrap();
    let tz = r.bank("first").unwrap().time_zone;
    assert_eq!(
        sd1.begins(date("2026-03-06"), tz),
        utc("2026-03-06T13:30:00Z")
    );
    assert_eq!(
        sd1.begins(date("2026-03-09"), tz),
        utc("2026-03-09T12:30:00Z")
    );
}

const NIGHT_TO_0130: &str = r#"
[[bank]]
name = "late"
odfi = "021000021"
immediate_destination = "021000021"
immediate_destination_name = "LATE BANK"
immediate_origin = "1234567890"
immediate_origin_name = "ACME"
[[bank.window]]
name = "night"
eligible = "next-day"
submission_begin = "22:00"
submission_end = "01:30"
lead = "30m"
[[bank.window]]
name = "early"
eligible = "same-day"
submission_begin = "00:30"
submission_end = "01:00"
lead = "1h"
"#;

#[test]
fn fall_back_closes_at_the_first_of_two_0130s() {
    // 1 November 2026, 02:00 EDT → 01:00 EST: 01:30 happens twice; the window of
    // 31 October closes at the first, 01:30 EDT (05:30Z).
    let r = Rules::parse(NIGHT_TO_0130, Path::new("ach.toml")).unwrap();
    assert_eq!(
        due(&r, "2026-11-01T05:29:00Z"),
        ["late/night/2026-10-31/submit"]
    );
    assert_eq!(due(&r, "2026-11-01T05:30:00Z"), Vec::<String>::new());
    // 01:15 EST, the second time round: still closed.
    assert_eq!(due(&r, "2026-11-01T06:15:00Z"), Vec::<String>::new());
}

#[test]
fn due_windows_sort_by_bank_then_date_then_begin() {
    // 00:45 EDT on 16 June: the night window of the 15th and the early window of the
    // 16th (packaging since 23:30 on the 15th) are both open.
    let r = Rules::parse(NIGHT_TO_0130, Path::new("ach.toml")).unwrap();
    assert_eq!(
        due(&r, "2026-06-16T04:45:00Z"),
        [
            "late/night/2026-06-15/submit",
            "late/early/2026-06-16/submit"
        ]
    );
    assert_eq!(
        due(&r, "2026-06-16T03:40:00Z"), // 23:40 EDT on the 15th
        [
            "late/night/2026-06-15/submit",
            "late/early/2026-06-16/package"
        ]
    );
}
