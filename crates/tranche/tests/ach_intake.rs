//! `tranche ach import|entry|cancel` end to end on the SQLite ledger in --data: a CSV
//! with one bad row (its exact error line, the account masked), a re-import that is a
//! no-op, a cancel, and the entry as shown; rows that do not line up with the header
//! (extra or missing fields, after blank lines, LF or CRLF); an unknown bank and an
//! over-long id; a 10 MB field said and stored as an excerpt.

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

    // A cancel is recorded before its entry comes: never of an id no entry can have,
    // nor with a reason of megabytes.
    let (code, _, err) = tranche(&data, &["ach", "cancel", &"L".repeat(65)]);
    assert_ne!(code, 0);
    assert!(
        err.contains("entry id: expected at most 64 characters, got 65 characters"),
        "{err}"
    );
    let reason = "R".repeat(501);
    let (code, _, err) = tranche(&data, &["ach", "cancel", "E3", "--reason", &reason]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--reason: expected at most 500 characters, got 501 characters"),
        "{err}"
    );
    let (_, out, _) = tranche(&data, &["ach", "entry", "E3"]);
    assert!(out.contains("state:       accepted"), "{out}");
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

/// The rows of `csv`, as `tranche ach import` says them on stderr, each without the
/// file's name.
fn said(err: &str, file: &str) -> Vec<String> {
    err.lines()
        .map(|l| {
            l.strip_prefix(&format!("{file}: "))
                .unwrap_or(l)
                .to_string()
        })
        .collect()
}

#[test]
fn rows_that_do_not_line_up_with_the_header_are_refused_by_line_and_field() {
    for ending in ["\n", "\r\n"] {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("e.csv");
        let short = row("S1", "4001234567", "1000");
        let short = short.strip_suffix(",false,").unwrap();
        let rows = [
            HEADER.to_string(),
            row("A1", "4001234567", "1000"),
            // Two blank lines: the lines after them keep their numbers.
            String::new(),
            String::new(),
            // A comma in a name not quoted: every column after it shifts right.
            row("X1", "4001234567", "1000").replace("JANE DOE", "DOE, JANE"),
            short.to_string(),
            row("D1", "4001234567", "1000").replace("2026-03-03", "2026-02-30"),
            // A quoted value over two lines: the next row is still on its own line.
            row("Q1", "4001234567", "1000").replace("ACME PAYROLL", "\"ACME\nPAYROLL\""),
            row("N1", "4001234567", "12x"),
        ];
        std::fs::write(&csv, rows.join("\n").replace('\n', ending) + ending).unwrap();
        let file = csv.to_str().unwrap();
        let (code, out, err) = tranche(&dir.path().join("data"), &["ach", "import", file]);
        assert_eq!(code, 1, "{out}{err}");
        let quoted = format!("{:?}", format!("ACME{ending}PAYROLL"));
        assert_eq!(
            said(&err, file),
            [
                "line 5: field 18 (after addenda, the header's last column): expected 17 fields, as the header has columns, got 18 (1 more, 0 bytes; a comma in a value that is not quoted?)".to_string(),
                "line 6: field same_day: expected 17 fields, as the header has columns, got 15".to_string(),
                "line 7: field effective_date: expected a date YYYY-MM-DD, got \"2026-02-30\"".to_string(),
                format!("line 8: field company_name: expected characters of the NACHA set (printable ASCII), got {quoted}"),
                "line 10: field amount_cents: expected a whole number of cents, got \"12x\"".to_string(),
            ],
            "{ending:?}: {err}"
        );
        // The shifted name is never shown.
        assert!(!err.contains("DOE"), "{err}");
        assert!(
            out.contains("6 rows: 1 accepted new, 0 already known, 0 conflicts, 5 rejected"),
            "{out}"
        );
        // The row with extra fields was not stored with its values dropped.
        let (code, _, _) = tranche(&dir.path().join("data"), &["ach", "entry", "X1"]);
        assert_eq!(code, 1);
    }
}

#[test]
fn an_unknown_bank_and_an_over_long_id_are_refused_with_their_limit() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ach.toml");
    std::fs::write(&rules, tranche_ach_rules::example_for(&["first", "second"])).unwrap();
    let csv = dir.path().join("e.csv");
    let long_id = "L".repeat(65);
    std::fs::write(
        &csv,
        [
            HEADER.to_string(),
            row("B1", "4001234567", "1000").replace(",first,", ",third,"),
            row("B2", "4001234567", "1000").replace(",first,", ",First Bank,"),
            row(&long_id, "4001234567", "1000"),
            row("B4", "4001234567", "1000"),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let file = csv.to_str().unwrap();
    let data = dir.path().join("data");
    let args = ["ach", "import", file, "--rules", rules.to_str().unwrap()];
    let (code, out, err) = tranche(&data, &args);
    assert_eq!(code, 1, "{out}{err}");
    let cut = "L".repeat(64);
    assert_eq!(
        said(&err, file),
        [
            "line 2: field bank: expected a bank of the rules (first, second), got \"third\"".to_string(),
            "line 3: field bank: expected a bank name: 1 to 32 lowercase letters, digits, - and _, got \"First Bank\"".to_string(),
            "line 4: field entry_id: expected at most 64 characters, got 65 characters".to_string(),
            format!("line 4: entry {cut}…: cannot be stored: entry_id: expected at most 64 characters (the ledger's key), got 65 characters"),
        ],
        "{err}"
    );
    assert!(
        out.contains("4 rows: 1 accepted new, 0 already known, 0 conflicts, 3 rejected"),
        "{out}"
    );
    // The entry of an unknown bank is stored, rejected with its reason.
    let (code, out, _) = tranche(&data, &["ach", "entry", "B1"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("state:       rejected"), "{out}");
    assert!(
        out.contains(
            "rejected:    bank: expected a bank of the rules (first, second), got \"third\""
        ),
        "{out}"
    );
    // Again: known, still rejected.
    let (code, out, _) = tranche(&data, &args);
    assert_eq!(code, 1);
    assert!(
        out.contains("3 already known (2 of them rejected)"),
        "{out}"
    );
}

/// A 10 MB field is said in a line and stored as an excerpt: the ledger grows by a few
/// kilobytes, not 10 MB, and the receiver's name never reaches stderr.
#[test]
fn a_huge_field_is_said_and_stored_as_an_excerpt() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e.csv");
    let name = tranche_ach_ledger::conformance::noise(7, 10 << 20);
    std::fs::write(
        &csv,
        [
            HEADER.to_string(),
            row("H0", "4001234567", "1000"),
            row("H1", "4001234567", "1000").replace("JANE DOE", &name),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let file = csv.to_str().unwrap();
    let data = dir.path().join("data");
    let (code, out, err) = tranche(&data, &["ach", "import", file]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        said(&err, file),
        ["line 3: field individual_name: expected at most 22 characters, got 10485760 characters"]
    );
    let ledger: u64 = std::fs::read_dir(data.join("ach"))
        .unwrap()
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(ledger < 1 << 20, "the ledger holds {ledger} bytes");
    let (code, out, _) = tranche(&data, &["ach", "entry", "H1", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["state"], "rejected");
    assert_eq!(v["individual_name"], name[..64]);
    assert!(
        v["rejection"]
            .as_str()
            .unwrap()
            .contains("individual_name: stored as its first 64 bytes of 10485760"),
        "{v}"
    );
}

/// A row that is not UTF-8 (a Latin-1 name) is refused by line and field, its bytes
/// never shown, and the rows after it are read.
#[test]
fn a_row_that_is_not_utf8_is_refused_and_the_rest_read() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("e.csv");
    let mut bytes = [HEADER, &row("U1", "4001234567", "1000"), ""]
        .join("\n")
        .into_bytes();
    bytes.extend(
        row("U2", "4001234567", "1000")
            .replace("JANE DOE", "JOS#")
            .bytes()
            .map(|b| if b == b'#' { 0xE9 } else { b }),
    );
    bytes.extend(format!("\n{}\n", row("U3", "4001234567", "1000")).bytes());
    std::fs::write(&csv, bytes).unwrap();
    let file = csv.to_str().unwrap();
    let (code, out, err) = tranche(&dir.path().join("data"), &["ach", "import", file]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(
        said(&err, file),
        ["line 3: field individual_name: expected UTF-8 text, got byte 0xE9 at position 4 (of 4 bytes)"]
    );
    assert!(!err.contains("JOS"), "{err}");
    assert!(
        out.contains("3 rows: 2 accepted new, 0 already known, 0 conflicts, 1 rejected"),
        "{out}"
    );
}
