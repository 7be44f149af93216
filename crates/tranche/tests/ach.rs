//! `tranche ach validate`: exit status and output on good, broken and unreadable files.

use std::process::Command;

use chrono::NaiveDate;
use tranche_ach::{
    write_file, AccountKind, AccountNumber, BankProfile, Direction, Entry, FileOptions, Grouping,
    SecCode, TransactionCode,
};

fn good_file() -> Vec<u8> {
    let day = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
    let profile = BankProfile {
        bank: "first".into(),
        odfi: "021000021".parse().unwrap(),
        immediate_destination: "021000021".parse().unwrap(),
        immediate_destination_name: "JPMORGAN CHASE BANK".into(),
        immediate_origin: "1234567890".into(),
        immediate_origin_name: "TRANCHE".into(),
        reference_code: String::new(),
    };
    let entries: Vec<Entry> = (0..3)
        .map(|i| Entry {
            entry_id: format!("E{i}"),
            bank: "first".into(),
            company_name: "ACME PAYROLL".into(),
            company_id: "1234567890".into(),
            sec_code: SecCode::Ppd,
            transaction_code: TransactionCode::new(AccountKind::Checking, Direction::Credit),
            rdfi_routing: "026009593".parse().unwrap(),
            account_number: AccountNumber::new("4001234567"),
            amount_cents: 1000 + i,
            individual_id: String::new(),
            individual_name: "JANE DOE".into(),
            entry_description: "PAYROLL".into(),
            descriptive_date: String::new(),
            effective_date: day.succ_opt().unwrap(),
            submission_date: day,
            same_day: false,
            addenda: None,
        })
        .collect();
    let options = FileOptions::new(day.and_hms_opt(9, 30, 0).unwrap(), 'A');
    write_file(Vec::new(), &profile, &options, &entries, Grouping::Separate)
        .unwrap()
        .out
}

fn validate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .args(["ach", "validate"])
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap(), text)
}

#[test]
fn validate_says_valid_invalid_or_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.ach");
    std::fs::write(&good, good_file()).unwrap();
    let (code, out) = validate(&[good.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("good.ach: valid (10 lines, 1 batches, 3 entries"),
        "{out}"
    );

    // Line 3 is the first entry: a wrong check digit in position 12.
    let mut bad = String::from_utf8(good_file()).unwrap();
    let at = 95 * 2 + 11;
    bad.replace_range(at..at + 1, "9");
    let bad_path = dir.path().join("bad.ach");
    std::fs::write(&bad_path, bad).unwrap();
    let (code, out) = validate(&[good.to_str().unwrap(), bad_path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("bad.ach: line 3: check digit (position 12): expected 3 (the check digit of 02600959), found 9"),
        "{out}"
    );
    assert!(out.contains("bad.ach: INVALID, 1 problem"), "{out}");

    let (code, out) = validate(&["--json", bad_path.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json[0]["valid"], false);
    assert_eq!(json[0]["findings"][0]["line"], 3);
    assert_eq!(json[0]["findings"][0]["field"], "check digit");

    let missing = dir.path().join("missing.ach");
    let (code, out) = validate(&[missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("missing.ach: cannot read"), "{out}");
}
