//! `tranche ach import|entry|cancel` end to end on the SQLite ledger in --data: a CSV
//! with one bad row (its exact error line, the account masked), a re-import that is a
//! no-op, a cancel, and the entry as shown.

use std::path::Path;
use std::process::{Command, Output};

const HEADER: &str = "entry_id,bank,company_name,company_id,sec_code,transaction_code,rdfi_routing,account_number,amount_cents,individual_id,individual_name,entry_description,descriptive_date,effective_date,submission_date,same_day,addenda";

fn row(id: &str, account: &str, cents: &str) -> String {
    format!("{id},first,ACME PAYROLL,1234567890,PPD,22,026009593,{account},{cents},EMP1,JANE DOE,PAYROLL,,2026-03-03,2026-03-02,false,")
}

fn tranche(data: &Path, args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .env_remove("TRANCHE_DATA")
        .env_remove("TRANCHE_BROKER")
        .env_remove("TRANCHE_LEDGER")
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn import_reports_bad_rows_by_line_and_is_idempotent_then_cancel_and_show() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let csv = dir.path().join("entries.csv");
    let rows = [
        HEADER.to_string(),
        row("E1", "4001234567", "1000"),
        // Over 17 characters: rejected, and the number never shown.
        row("E2", "98765432109876543210", "2500"),
        row("E3", "4001234999", "3000"),
    ];
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    let file = csv.to_str().unwrap();

    let (code, out, err) = tranche(&data, &["ach", "import", file]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        err.trim_end(),
        format!("{file}: line 3: field account_number: expected at most 17 characters, got 20 characters")
    );
    assert!(!err.contains("9876543"), "{err}");
    assert_eq!(
        out.trim_end(),
        format!("{file}: 3 rows: 2 accepted new, 0 already known, 0 conflicts, 1 rejected")
    );
    assert!(data.join("ach").join("ledger.sqlite").exists());

    // Again: nothing new; the bad row is known (and still rejected).
    let (code, out, _) = tranche(&data, &["ach", "import", file]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out.trim_end(),
        format!("{file}: 3 rows: 0 accepted new, 3 already known (1 of them rejected), 0 conflicts, 0 rejected")
    );

    // Only the good rows: a clean re-import exits 0.
    let good = dir.path().join("good.csv");
    std::fs::write(
        &good,
        [HEADER.to_string(), row("E1", "4001234567", "1000")].join("\n") + "\n",
    )
    .unwrap();
    let (code, out, err) = tranche(&data, &["ach", "import", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("0 accepted new, 1 already known, 0 conflicts"),
        "{out}"
    );

    // A changed payload under a known id is a conflict.
    std::fs::write(
        &good,
        [HEADER.to_string(), row("E1", "4001234567", "1001")].join("\n") + "\n",
    )
    .unwrap();
    let (code, out, err) = tranche(&data, &["ach", "import", good.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("1 conflicts"), "{out}");
    assert!(err.contains("line 2: entry E1: conflicts"), "{err}");

    let (code, out, _) = tranche(&data, &["ach", "entry", "E2"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("state:       rejected"), "{out}");
    assert!(
        out.contains("rejected:    account_number: expected at most 17 characters"),
        "{out}"
    );
    assert!(out.contains("****************3210"), "{out}");
    assert!(!out.contains("9876543"), "{out}");

    let (code, out, err) = tranche(&data, &["ach", "cancel", "E1", "--reason", "duplicate"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim_end(), "E1: cancelled");
    let (code, out, _) = tranche(&data, &["ach", "cancel", "E1"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("already cancelled at") && out.ends_with(": duplicate\n"),
        "{out}"
    );

    let (code, out, _) = tranche(&data, &["ach", "entry", "E1", "--json"]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["state"], "cancelled");
    assert_eq!(v["cancellation"]["reason"], "duplicate");
    assert_eq!(v["account_number"], "******4567");
    assert_eq!(v["amount_cents"], 1000);

    let (code, out, _) = tranche(&data, &["ach", "entry", "E3"]);
    assert_eq!(code, 0);
    assert!(out.contains("state:       accepted"), "{out}");
    assert!(out.contains("account ******4999"), "{out}");

    let (code, _, err) = tranche(&data, &["ach", "entry", "nope"]);
    assert_eq!(code, 1);
    assert_eq!(err.trim_end(), "nope: no such ACH entry");

    // A cancel of an id never imported is refused, naming it, and records nothing; with
    // --before-import it is recorded and the entry will be stored cancelled.
    let (code, _, err) = tranche(&data, &["ach", "cancel", "E9"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.starts_with("E9: no ACH entry has this id; nothing was cancelled"),
        "{err}"
    );
    let (code, out, err) = tranche(&data, &["ach", "cancel", "E9", "--before-import"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("E9: not imported yet: it will be stored cancelled"),
        "{out}"
    );
}

#[test]
fn a_row_that_is_no_entry_names_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e.csv");
    let bad_routing = row("R1", "4001234567", "1000").replace("026009593", "026009594");
    std::fs::write(
        &csv,
        [
            HEADER.to_string(),
            row("N1", "4001234567", "12x"),
            bad_routing,
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let file = csv.to_str().unwrap();
    let (code, out, err) = tranche(&dir.path().join("data"), &["ach", "import", file]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{file}: line 2: field amount_cents: expected a whole number of cents, got \"12x\""),
            format!("{file}: line 3: field rdfi_routing: expected check digit 3 (3-7-1 weights over the first 8 digits), got 4 in 026009594"),
        ]
    );
    assert!(
        out.contains("0 accepted new, 0 already known, 0 conflicts, 2 rejected"),
        "{out}"
    );
}

#[test]
fn a_header_row_missing_or_misspelling_a_column_fails_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e.csv");
    let header = HEADER.replace(",addenda", ",adenda").replace("bank,", "");
    std::fs::write(&csv, format!("{header}\n")).unwrap();
    let (code, out, err) = tranche(
        &dir.path().join("data"),
        &["ach", "import", csv.to_str().unwrap()],
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("line 1: expected a header row of an entry's fields"),
        "{err}"
    );
    assert!(err.contains("got no bank; unknown adenda"), "{err}");
}
