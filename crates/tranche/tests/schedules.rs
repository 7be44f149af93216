//! `tranche schedule apply`, `tranche schedules` and the scheduler that `tranche
//! server` runs, as an operator uses them against a real data directory.

use crate::support;

use support::tranche_on as tranche;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const FILE: &str = r#"
[[schedule]]
name = "eod-report"
cron = "0 18 * * MON-FRI"
zone = "Asia/Kolkata"
kind = "report"
queue = "reports"

[[schedule]]
name = "backfill"
at = "2020-01-01T00:00:00Z"
kind = "backfill"
"#;

#[test]
fn apply_list_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("schedules.toml");
    std::fs::write(&file, FILE).unwrap();

    let out = tranche(&data, &["schedule", "apply", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("declared eod-report"),
        "{}",
        stdout(&out)
    );
    let out = tranche(&data, &["schedule", "apply", file.to_str().unwrap()]);
    assert!(
        stdout(&out).contains("updated  eod-report"),
        "{}",
        stdout(&out)
    );

    let out = tranche(&data, &["schedules"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("eod-report") && text.contains("cron \"0 18 * * MON-FRI\" in Asia/Kolkata"),
        "{text}"
    );
    assert!(
        text.contains("18:00 IST"),
        "next due shown in the zone: {text}"
    );
    assert!(
        text.contains("job report on reports into schedule:eod-report"),
        "{text}"
    );

    let out = tranche(&data, &["schedules", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
    assert_eq!(rows[1]["name"], "eod-report");
    assert!(rows[1]["next_due"].is_number());

    let out = tranche(&data, &["schedule", "delete", "backfill"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = tranche(&data, &["schedule", "delete", "backfill"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no schedule \"backfill\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_bad_file_is_refused_with_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[schedule]]\nname = \"x\"\ncron = \"0 18 * * MON-FRI\"\nzone = \"Asia/Calcutta_\"\nkind = \"k\"\n",
    )
    .unwrap();
    let out = tranche(
        &dir.path().join("data"),
        &["schedule", "apply", file.to_str().unwrap()],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("bad.toml:4: schedule \"x\": zone: expected an IANA time zone"),
        "{err}"
    );
    assert!(err.contains("got \"Asia/Calcutta_\""), "{err}");
}

#[test]
fn the_server_fires_a_due_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("schedules.toml");
    std::fs::write(&file, FILE).unwrap();
    let out = tranche(&data, &["schedule", "apply", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));

    let server = tranche_test_support::Server(
        Command::new(env!("CARGO_BIN_EXE_tranche"))
            .arg("--data")
            .arg(&data)
            .args(["server", "--listen", "127.0.0.1:0"])
            .env_remove("TRANCHE_DATA")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The one-off time long past is due at once: the server's scheduler fires it.
    let fired = tranche_test_support::eventually(
        "the server fires the backfill schedule",
        Duration::from_secs(30),
        || {
            let out = tranche(&data, &["status", "schedule:backfill", "--json"]);
            out.status.success().then(|| stdout(&out))
        },
    );
    drop(server);
    let status: serde_json::Value = serde_json::from_str(&fired).unwrap();
    assert_eq!(status["progress"]["total"], 1, "fired once: {fired}");
    let out = tranche(&data, &["schedules"]);
    assert!(stdout(&out).contains("never again"), "{}", stdout(&out));
}
