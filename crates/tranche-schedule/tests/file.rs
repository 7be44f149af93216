//! Schedule files: what they declare, and errors naming file, line, field, expected
//! and got.

use std::path::Path;

use chrono::DateTime;
use tranche_schedule::{parse_file, FileError, When};
use tranche_types::Timestamp;

fn parse(text: &str) -> Result<Vec<tranche_schedule::Schedule>, FileError> {
    parse_file(Path::new("schedules.toml"), text)
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn a_file_declares_cron_and_one_off_schedules() {
    let s = parse(
        r#"
[[schedule]]
name = "eod-report"
cron = "0 18 * * MON-FRI"
zone = "Asia/Kolkata"
kind = "report"
queue = "reports"
args = { desk = "equity", days = [1, 2] }
max_attempts = 3

[[schedule]]
name = "once"
at = 2026-05-01T09:00:00
zone = "Asia/Kolkata"
skip_missed = true
kind = "migrate"
"#,
    )
    .unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(
        s[0].when,
        When::Cron {
            expr: "0 18 * * MON-FRI".into(),
            zone: "Asia/Kolkata".into()
        }
    );
    assert_eq!(
        (
            s[0].job.queue.as_str(),
            s[0].job.max_attempts,
            s[0].skip_missed
        ),
        ("reports", 3, false)
    );
    let args: serde_json::Value = serde_json::from_str(&s[0].job.args).unwrap();
    assert_eq!(args, serde_json::json!({"desk": "equity", "days": [1, 2]}));
    assert_eq!(s[0].run_name(), "schedule:eod-report");
    let nine_ist = DateTime::parse_from_rfc3339("2026-05-01T03:30:00Z").unwrap();
    assert_eq!(s[1].when, When::At(Timestamp(nine_ist.timestamp_micros())));
    assert!(s[1].skip_missed);
    assert_eq!(
        (s[1].job.queue.as_str(), s[1].job.args.as_str()),
        ("default", "{}")
    );
}

#[test]
fn errors_name_the_file_line_field_expected_and_got() {
    let e = err("[[schedule]]\nname = \"a\"\ncron = \"0 25 * * *\"\nkind = \"k\"\n");
    assert!(
        e.starts_with("schedules.toml:3: schedule \"a\": cron: expected a cron pattern"),
        "{e}"
    );
    assert!(e.contains("got \"0 25 * * *\""), "{e}");

    let e = err(
        "[[schedule]]\nname = \"a\"\ncron = \"0 1 * * *\"\nzone = \"Mars/Olympus\"\nkind = \"k\"\n",
    );
    assert!(
        e.starts_with("schedules.toml:4: schedule \"a\": zone: expected an IANA time zone"),
        "{e}"
    );

    let e = err("[[schedule]]\nname = \"a\"\nkind = \"k\"\n");
    assert!(
        e.contains(":1: schedule \"a\": cron: expected exactly one of cron or at, got neither"),
        "{e}"
    );

    let e = err("[[schedule]]\nname = \"a b\"\ncron = \"* * * * *\"\nkind = \"k\"\n");
    assert!(
        e.contains(":2: schedule \"a b\": name: expected 1 to 100 letters"),
        "{e}"
    );

    let e =
        err("[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\nkind = \"k\"\nmax_attempts = 0\n");
    assert!(
        e.contains(":5: schedule \"a\": max_attempts: expected an integer from 1 to"),
        "{e}"
    );

    let e = err("[[schedule]]\nname = \"a\"\nat = \"tomorrow\"\nkind = \"k\"\n");
    assert!(
        e.contains(":3: schedule \"a\": at: expected a date and time"),
        "{e}"
    );
    assert!(e.ends_with("got \"tomorrow\""), "{e}");

    let e = err("[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\nkind = \"k\"\n\n[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\nkind = \"k\"\n");
    assert!(
        e.contains(":7: schedule \"a\": name: expected a name used once in the file"),
        "{e}"
    );

    let e = err("[[schedule]]\nname = \"a\"\ncron = \"* * * * *\"\nkind = \"k\"\nqueu = \"x\"\n");
    assert!(
        e.starts_with("schedules.toml:5: unknown field `queu`"),
        "{e}"
    );
}
