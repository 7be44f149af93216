//! A broker's bad night at the input files: `notes run` and `notes check` read the
//! same rows the same way, lose none of them, and account for every one.

use crate::support;

use std::path::Path;

use support::*;

fn column(header: &str, name: &str) -> usize {
    header.split(',').position(|h| h == name).unwrap()
}

/// Replace one field of line `at` (0-based, the header being 0).
fn set_field(path: &Path, at: usize, name: &str, value: &str) -> String {
    let mut all = lines(path);
    let col = column(&all[0], name);
    let mut fields: Vec<String> = all[at].split(',').map(str::to_string).collect();
    let code = fields[column(&all[0], "client_code")].clone();
    fields[col] = value.to_string();
    all[at] = fields.join(",");
    std::fs::write(path, all.join("\n") + "\n").unwrap();
    code
}

/// accounting.csv as (file name, read, in_notes, not_needed, rejected).
fn accounting(out: &Path) -> Vec<(String, u64, u64, u64, u64)> {
    let mut r = csv::Reader::from_path(out.join("accounting.csv")).unwrap();
    assert_eq!(
        r.headers().unwrap().iter().collect::<Vec<_>>(),
        ["file", "read", "in_notes", "not_needed", "rejected"]
    );
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            let n = |i: usize| rec[i].parse::<u64>().unwrap();
            let file = Path::new(&rec[0])
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string();
            (file, n(1), n(2), n(3), n(4))
        })
        .collect()
}

#[test]
fn a_stray_quote_fails_one_client_and_every_later_client_is_still_mailed() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    generate(&input, 12);
    let trades_csv = input.join("trades.csv");
    let rows = lines(&trades_csv).len() as u64 - 1;
    // Early in the file, so that a reader swallowing the rest would lose most clients.
    let bad_client = set_field(&trades_csv, 2, "instrument", "\"RELIANCE");
    let traders = traders_lenient(&trades_csv);

    let run = tranche()
        .arg("--data")
        .arg(tmp.path().join("state"))
        .args(run_args(&input, &out))
        .args(["--render-processes", "0"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run));
    let report = report(&out);
    assert_eq!(report.len(), traders.len(), "{report:?}");
    for (code, row) in &report {
        if *code == bad_client {
            assert_eq!(row[0], "failed");
            assert!(
                row[5].contains("trades.csv:3: field instrument: expected a closing double quote"),
                "{row:?}"
            );
            assert_eq!(row[7], "1", "{row:?}");
        } else {
            assert_eq!(row[0], "mailed", "{code}: {row:?}");
        }
    }
    let in_notes: u64 = report.values().map(|r| r[6].parse::<u64>().unwrap()).sum();
    assert_eq!(in_notes, rows - 1);
    assert_eq!(
        accounting(&out),
        [
            ("trades.csv".to_string(), rows, rows - 1, 0, 1),
            (
                "clients.csv".to_string(),
                12,
                traders.len() as u64,
                12 - traders.len() as u64,
                0
            ),
        ]
    );
    let shown = text(&run);
    assert!(
        shown.contains(&format!(
            "trades.csv: {rows} rows read = {} in notes + 0 not needed + 1 rejected",
            rows - 1
        )),
        "{shown}"
    );
}

/// Client codes of every row, read line by line (a CSV reader would stop at the quote).
fn traders_lenient(trades: &Path) -> std::collections::BTreeSet<String> {
    let all = lines(trades);
    let col = column(&all[0], "client_code");
    all[1..]
        .iter()
        .map(|l| l.split(',').nth(col).unwrap().to_string())
        .collect()
}

#[test]
fn a_day_without_trades_is_an_empty_report_and_success() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    let out = tmp.path().join("out");
    generate(&input, 3);
    let header = lines(&input.join("trades.csv"))[0].clone();
    std::fs::write(input.join("trades.csv"), header + "\n").unwrap();
    let run = tranche()
        .arg("--data")
        .arg(tmp.path().join("state"))
        .args(run_args(&input, &out))
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    assert!(report(&out).is_empty());
    assert_eq!(accounting(&out)[0], ("trades.csv".to_string(), 0, 0, 0, 0));
    assert!(text(&run).contains("0 mailed, 0 failed"), "{}", text(&run));
}

#[test]
fn check_agrees_with_run_and_never_panics_on_huge_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("input");
    generate(&input, 6);
    let trades_csv = input.join("trades.csv");
    let huge = set_field(&trades_csv, 1, "quantity", "999999999999999");
    set_field(&trades_csv, 1, "price", "99999999999999999999");
    let n = lines(&trades_csv).len();
    set_field(&trades_csv, n - 1, "client_code", "../../etc");
    let mut args: Vec<String> = run_args(&input, &tmp.path().join("out"));
    args[1] = "check".into();
    args.truncate(args.len() - 2); // no --out
    let check = tranche().args(&args).output().unwrap();
    let shown = text(&check);
    assert_eq!(check.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("trades.csv:2: field quantity: expected at most 1000000000000"),
        "{shown}"
    );
    assert!(shown.contains(&format!("client {huge}:")), "{shown}");
    assert!(
        shown.contains(&format!("trades.csv:{n}: field client_code: expected a code that can name a file, got \"../../etc\"")),
        "{shown}"
    );
}

#[test]
fn a_demo_given_a_broker_runs_its_night_there() {
    if !have("redis-server", &["--version"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (_redis, port) = redis(tmp.path());
    let broker = format!("redis://127.0.0.1:{port}");
    let demo = tmp.path().join("demo");
    let out = tranche()
        .args([
            "--broker",
            &broker,
            "notes",
            "demo",
            "--clients",
            "2",
            "--dir",
        ])
        .arg(&demo)
        .args(["--seed", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!demo.join("state").exists(), "the demo kept its own state");
    let runs = tranche()
        .args(["--broker", &broker, "runs"])
        .output()
        .unwrap();
    assert!(text(&runs).contains(RUN), "{}", text(&runs));
}
