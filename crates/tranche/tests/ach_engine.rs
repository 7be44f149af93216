//! `tranche ach generate|engine|status|demo` end to end on the embedded default: a
//! generated day packaged and submitted by `engine --once`, what `--dry-run` says (and
//! does not do), the status it leaves, rules with mistakes, and the demo.

use crate::support;

use std::path::Path;
use std::process::Output;

use support::*;

const DAY: &str = "2026-03-03";

fn ach(data: &Path, args: &[&str]) -> Output {
    tranche()
        .arg("--data")
        .arg(data)
        .arg("ach")
        .args(args)
        .output()
        .expect("run tranche")
}

/// A generated day of `n` entries in `dir/day`, imported into `dir/data`, with its
/// rules' pacing taken out (the test does not wait 15 s per file).
fn imported_day(dir: &Path, n: u64) -> std::path::PathBuf {
    let day = dir.join("day");
    let out = ach(
        dir,
        &[
            "generate",
            "--entries",
            &n.to_string(),
            "--date",
            DAY,
            "--out",
            day.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let rules = day.join("ach.toml");
    let text_ = std::fs::read_to_string(&rules).unwrap();
    let unpaced: Vec<String> = text_
        .lines()
        .map(|l| {
            if l.starts_with("pacing = ") {
                "pacing = \"0s\"".into()
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&rules, unpaced.join("\n")).unwrap();
    let out = ach(
        &dir.join("data"),
        &["import", day.join("entries.csv").to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    day
}

fn outbox_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for bank in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(bank.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "ach") {
                files.push(f.path());
            }
        }
    }
    files
}

#[test]
fn engine_once_packages_and_submits_a_generated_day_and_status_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let day = imported_day(dir.path(), 3_000);
    let data = dir.path().join("data");
    let rules = day.join("ach.toml");
    let rules = rules.to_str().unwrap();

    // 06:45 New York: nothing is due yet for the example's banks but sd1's packaging
    // (from 06:30 for `first`): a dry run says what a tick would do, and does nothing.
    let out = ach(
        &data,
        &[
            "engine",
            "--rules",
            rules,
            "--dry-run",
            "--at",
            "2026-03-03T06:45:00-05:00",
        ],
    );
    let (stdout, stderr) = streams(&out);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout.contains(
            "dry run at 2026-03-03 11:45:00 UTC: nothing is claimed, written or submitted"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("first/sd1/2026-03-03:"), "{stdout}");
    assert!(stdout.contains("would package "), "{stdout}{stderr}");
    let status = ach(&data, &["status", DAY, "--rules", rules]);
    assert!(
        streams(&status).0.contains("packaged 0 (0.00)"),
        "{}",
        text(&status)
    );

    // Every window of the day, each at its opening: package and submit.
    for at in [
        "2026-03-03T08:30:00-05:00",
        "2026-03-03T12:45:00-05:00",
        "2026-03-03T15:45:00-05:00",
        "2026-03-03T17:30:00-05:00",
        "2026-03-03T21:00:00-05:00",
    ] {
        let out = ach(
            &data,
            &[
                "engine",
                "--rules",
                rules,
                "--once",
                "--at",
                at,
                "--store",
                dir.path().join("store").to_str().unwrap(),
            ],
        );
        assert!(out.status.success(), "{at}: {}", text(&out));
    }
    let out = ach(&data, &["status", DAY, "--rules", rules]);
    let (stdout, _) = streams(&out);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("submission date 2026-03-03"), "{stdout}");
    for bank in ["first", "second"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("  bank {bank}:")))
            .unwrap_or_else(|| panic!("no line for {bank}: {stdout}"));
        assert!(
            line.contains("accepted 0 (0.00), packaged 0 (0.00)"),
            "{line}"
        );
        assert!(!line.contains("submitted 0 "), "{line}");
    }
    let json = ach(&data, &["status", DAY, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let submitted: u64 = v["banks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["entries"].as_array().unwrap().iter())
        .filter(|t| t["state"] == "submitted")
        .map(|t| t["entries"].as_u64().unwrap())
        .sum();
    assert_eq!(submitted, 3_000, "{v}");

    let files = outbox_files(&day.join("outbox"));
    assert!(files.len() >= 4, "{files:?}");
    let mut args = vec!["validate"];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let out = ach(&data, &args);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn rules_with_mistakes_are_refused_whole_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ach.toml");
    std::fs::write(
        &rules,
        "[engine]\ntik = \"5m\"\n\n[[bank]]\nname = \"first\"\nodfi = \"021000022\"\nimmediate_destination = \"021000021\"\nimmediate_destination_name = \"FIRST\"\nimmediate_origin = \"1234567890\"\nimmediate_origin_name = \"ACME\"\n[[bank.window]]\nname = \"sd1\"\neligible = \"same-dya\"\nsubmission_begin = \"08:30\"\nsubmission_end = \"25:00\"\n",
    )
    .unwrap();
    let out = ach(
        &dir.path().join("data"),
        &["engine", "--rules", rules.to_str().unwrap(), "--once"],
    );
    let (_, stderr) = streams(&out);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let file = rules.display().to_string();
    for (line, what) in [
        (2, "tik"),
        (6, "bank[0].odfi"),
        (13, "bank[0].window[0].eligible"),
        (15, "bank[0].window[0].submission_end"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("{file}:{line}:")) && l.contains(what)),
            "no problem at line {line} about {what}:\n{stderr}"
        );
    }
    assert!(stderr.contains("did you mean \"tick\""), "{stderr}");
    assert!(stderr.contains("did you mean \"same-day\""), "{stderr}");
    assert!(!dir.path().join("data").exists(), "nothing was opened");
}

/// A first run's two stumbles: no ach.toml where it looked, and a --once at a moment
/// when nothing is due. Each says where or when it looked and what to do instead.
#[test]
fn missing_rules_and_a_tick_with_nothing_due_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let missing = dir.path().join("nowhere/ach.toml");
    let out = ach(
        &data,
        &["engine", "--rules", missing.to_str().unwrap(), "--once"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("looked for {}", missing.display()))
            && said.contains("tranche ach generate --out DIR"),
        "{said}"
    );

    let day = imported_day(dir.path(), 100);
    let rules = day.join("ach.toml");
    // 03:00 in New York: before every window's packaging.
    let out = ach(
        &data,
        &[
            "engine",
            "--rules",
            rules.to_str().unwrap(),
            "--once",
            "--at",
            &format!("{DAY}T03:00:00-05:00"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    for part in [
        format!("bank first: nothing due at {DAY} 03:00 America/New_York"),
        "sd1 packages from 06:30, submits 08:30–10:30".to_string(),
        "to act at another moment, give --at, e.g. --at".to_string(),
    ] {
        assert!(said.contains(&part), "{part:?} in {said}");
    }
}

#[test]
fn at_is_only_for_a_single_tick_or_a_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = ach(dir.path(), &["engine", "--at", "2026-03-03T08:30:00-05:00"]);
    assert!(!out.status.success());
    assert!(
        streams(&out)
            .1
            .contains("--at: only with --once or --dry-run"),
        "{}",
        text(&out)
    );
    let out = ach(dir.path(), &["engine", "--once", "--at", "tomorrow"]);
    assert!(!out.status.success());
    assert!(
        streams(&out)
            .1
            .contains("expected an instant like 2026-03-03T08:30:00-05:00, got \"tomorrow\""),
        "{}",
        text(&out)
    );
}

#[test]
fn the_demo_runs_a_day_into_outboxes_and_says_where_to_look() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = tranche()
        .args([
            "ach",
            "demo",
            "--entries",
            "1500",
            "--dir",
            demo.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = streams(&out);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stderr.contains("field amount_cents: expected more than 0, got 0 cents"),
        "{stderr}"
    );
    let delivered = outbox_files(&demo.join("outbox"));
    assert!(!delivered.is_empty());
    assert!(
        stdout.contains(&format!(
            "{} files delivered, 0 invalid by tranche ach validate",
            delivered.len()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("where to look:"), "{stdout}");
    for f in &delivered {
        let bytes = std::fs::read(f).unwrap();
        tranche_test_support::nacha::assert_file_checks_out(&f.display().to_string(), &bytes);
    }
    // Again into the same directory: the previous demo is replaced.
    let again = tranche()
        .args([
            "ach",
            "demo",
            "--entries",
            "200",
            "--dir",
            demo.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again));
}
