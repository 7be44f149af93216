//! A good file broken one thing at a time: our validator reports exactly that problem,
//! at the right line and field. Each case also records whether moov-io's `achcli`
//! (v1.63.3, `-reformat=ach`) rejects it; the cases it passes are what it misses.

use crate::support;

use support::{achcli, options, profile, submission};
use tranche_ach::{
    validate, write_file, AccountKind, AccountNumber, Direction, Entry, Grouping, SecCode,
    TransactionCode,
};

fn entry(
    id: &str,
    company: (&str, &str),
    sec: SecCode,
    direction: Direction,
    amount: u64,
) -> Entry {
    Entry {
        entry_id: id.into(),
        bank: "first".into(),
        company_name: company.0.into(),
        company_id: company.1.into(),
        sec_code: sec,
        transaction_code: TransactionCode::new(AccountKind::Checking, direction),
        rdfi_routing: "026009593".parse().unwrap(),
        account_number: AccountNumber::new("4001234567"),
        amount_cents: amount,
        individual_id: format!("ID-{id}"),
        individual_name: format!("RECEIVER {id}"),
        entry_description: "PAYROLL".into(),
        descriptive_date: String::new(),
        effective_date: submission().succ_opt().unwrap(),
        submission_date: submission(),
        same_day: false,
        addenda: None,
    }
}

/// The good file, by line:
///  1 file header
///  2 batch header (PPD credits, ACME)      3 entry with addenda  4 addenda  5 entry
///  6 batch control
///  7 batch header (CCD debits, same day)   8 entry  9 entry
/// 10 batch control
/// 11 batch header (CCD credits, next day)  12 entry of $1,500,000
/// 13 batch control
/// 14 file control
/// 15-20 padding
fn good_lines() -> Vec<String> {
    const ACME: (&str, &str) = ("ACME PAYROLL", "1234567890");
    const GLOBEX: (&str, &str) = ("GLOBEX CORP", "9876543210");
    let mut e1 = entry("1", ACME, SecCode::Ppd, Direction::Credit, 250_000);
    e1.addenda = Some("INVOICE 1001".into());
    let e2 = entry("2", ACME, SecCode::Ppd, Direction::Credit, 199);
    let mut e3 = entry("3", GLOBEX, SecCode::Ccd, Direction::Debit, 90_000_000);
    let mut e4 = entry("4", GLOBEX, SecCode::Ccd, Direction::Debit, 1);
    for e in [&mut e3, &mut e4] {
        e.same_day = true;
        e.effective_date = submission();
    }
    let mut e5 = entry("5", GLOBEX, SecCode::Ccd, Direction::Credit, 150_000_000);
    e5.entry_description = "SUPPLIER".into();
    let w = write_file(
        Vec::new(),
        &profile(),
        &options(),
        &[e1, e2, e3, e4, e5],
        Grouping::Separate,
    )
    .unwrap();
    let text = String::from_utf8(w.out).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 20);
    lines
}

fn set(lines: &mut [String], line: usize, start: usize, value: &str) {
    let l = &mut lines[line - 1];
    l.replace_range(start - 1..start - 1 + value.len(), value);
}

fn join(lines: &[String]) -> Vec<u8> {
    let mut s = lines.join("\n");
    s.push('\n');
    s.into_bytes()
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Every finding expected: (line, field), in line order.
    findings: Vec<(usize, &'static str)>,
    /// Whether achcli v1.63.3 rejects the file (false: it misses this problem).
    achcli_rejects: bool,
}

/// Batch 3 (lines 11-13) under another SEC code: its header's positions 51-53.
fn sec(l: &mut [String], line: usize, code: &str) {
    set(l, line, 51, code);
}

/// Take out line 12 (batch 3's only entry) and mend the controls and the padding, so
/// that batch 3 holds no entry and nothing else is wrong.
fn empty_third_batch(l: &mut Vec<String>) {
    l.remove(11);
    // Batch 3's control: no entries, no hash, no credits.
    set(l, 12, 5, "000000");
    set(l, 12, 11, "0000000000");
    set(l, 12, 33, "000000000000");
    // The file control without the entry: 5 records, its RDFI out of the hash, its
    // $1,500,000.00 out of the credits.
    set(l, 13, 14, "00000005");
    set(l, 13, 22, "0010403836");
    set(l, 13, 44, "000000250199");
    l.push("9".repeat(94));
}

fn cases() -> Vec<Case> {
    let good = good_lines();
    let mut cases = Vec::new();
    let mut case =
        |name, findings: &[(usize, &'static str)], achcli_rejects, f: &dyn Fn(&mut Vec<String>)| {
            let mut lines = good.clone();
            f(&mut lines);
            cases.push(Case {
                name,
                bytes: join(&lines),
                findings: findings.to_vec(),
                achcli_rejects,
            });
        };
    case(
        "a 93-character line",
        &[(14, "record length")],
        false,
        &|l| {
            l[13].pop();
        },
    );
    case(
        "a wrong batch entry hash",
        &[(6, "entry hash")],
        true,
        &|l| set(l, 6, 11, "0000000001"),
    );
    case(
        "a wrong file entry hash",
        &[(14, "entry hash")],
        true,
        &|l| set(l, 14, 22, "0000000001"),
    );
    case(
        "a wrong credit total",
        &[(14, "total credit entry dollar amount")],
        true,
        &|l| set(l, 14, 44, "000150250200"),
    );
    case(
        "a wrong batch debit total",
        &[(10, "total debit entry dollar amount")],
        true,
        &|l| set(l, 10, 21, "000090000002"),
    );
    case(
        "a duplicated trace number",
        &[(9, "trace number")],
        true,
        &|l| {
            let trace = l[7][79..].to_owned();
            set(l, 9, 80, &trace);
        },
    );
    case(
        "trace numbers descending in a batch",
        &[(9, "trace number")],
        true,
        &|l| {
            set(l, 9, 80, "021000020000002");
        },
    );
    case(
        "an effective entry date that is no date",
        &[(2, "effective entry date")],
        false,
        &|l| set(l, 2, 70, "260231"),
    );
    case("a bad padding line", &[(17, "padding")], false, &|l| {
        set(l, 17, 40, "0")
    });
    case(
        "a missing block (no padding)",
        &[(14, "line count")],
        false,
        &|l| l.truncate(14),
    );
    case("a wrong block count", &[(14, "block count")], false, &|l| {
        set(l, 14, 8, "000003")
    });
    case(
        "an addenda indicator of 1 without addenda",
        &[(5, "addenda record indicator")],
        false,
        &|l| set(l, 5, 79, "1"),
    );
    case(
        "an addenda indicator of 0 with addenda",
        &[(3, "addenda record indicator")],
        true,
        &|l| set(l, 3, 79, "0"),
    );
    case(
        "a same-day entry over $1,000,000",
        &[(12, "amount")],
        false,
        &|l| {
            // The batch's effective date becomes the file's creation date: same day.
            set(l, 11, 70, "260302")
        },
    );
    case(
        "a bad routing check digit",
        &[(5, "check digit")],
        true,
        &|l| set(l, 5, 12, "4"),
    );
    case(
        "a character outside the NACHA set",
        &[(5, "individual name")],
        true,
        &|l| set(l, 5, 60, "\u{7f}"),
    );
    case(
        "batch numbers not ascending",
        &[(7, "batch number")],
        true,
        &|l| {
            set(l, 7, 88, "0000001");
            set(l, 10, 88, "0000001");
        },
    );
    case(
        "a batch control of another batch number",
        &[(10, "batch number")],
        true,
        &|l| set(l, 10, 88, "0000009"),
    );
    case(
        "a trace number of another ODFI",
        &[(9, "trace number")],
        true,
        &|l| set(l, 9, 80, "12345678"),
    );
    case(
        "a debit in a credits-only batch",
        &[(5, "transaction code")],
        true,
        &|l| {
            // Amount and totals untouched: 27 is a debit, so the credit total breaks too;
            // make it 0-amount neutral by moving the entry's amount to the debit side.
            set(l, 5, 2, "27");
            set(l, 6, 21, "000000000199");
            set(l, 6, 33, "000000250000");
            set(l, 14, 32, "000090000200");
            set(l, 14, 44, "000150250000");
        },
    );
    case(
        "an unknown SEC code",
        &[(2, "standard entry class code")],
        true,
        &|l| set(l, 2, 51, "XYZ"),
    );
    case(
        "an unknown transaction code",
        &[(12, "transaction code")],
        true,
        &|l| set(l, 12, 2, "25"),
    );
    case(
        "a bad file creation date",
        &[(1, "file creation date")],
        true,
        &|l| set(l, 1, 24, "261399"),
    );
    // The file header and the batch headers against the NACHA rules and achcli's own
    // checks (moov-io/ach's fileHeader.go, batchHeader.go, batch.go and its batch
    // types): each of these our validator passed until issue 32.
    case(
        "an immediate destination of zeros",
        &[(1, "immediate destination")],
        true,
        &|l| set(l, 1, 4, " 000000000"),
    );
    case(
        "an immediate origin of zeros",
        &[(1, "immediate origin")],
        true,
        &|l| set(l, 1, 14, "0000000000"),
    );
    case(
        "an originator status code of 0 outside an ADV batch",
        &[(2, "originator status code")],
        true,
        &|l| set(l, 2, 79, "0"),
    );
    case(
        "a batch without entries",
        &[(12, "record type code")],
        true,
        &empty_third_batch,
    );
    case(
        "a credit in a TEL batch",
        &[(12, "transaction code")],
        true,
        &|l| sec(l, 11, "TEL"),
    );
    case(
        "debits in a TEL REVERSAL batch",
        &[(8, "transaction code"), (9, "transaction code")],
        true,
        &|l| {
            sec(l, 7, "TEL");
            set(l, 7, 54, "REVERSAL  ");
        },
    );
    case(
        "an addenda 05 on a TEL entry",
        &[(4, "addenda type code")],
        true,
        &|l| {
            // A REVERSAL batch holds credits: only the addenda is wrong.
            sec(l, 2, "TEL");
            set(l, 2, 54, "REVERSAL  ");
        },
    );
    case(
        "debits in a CIE batch (credits only)",
        &[(7, "service class code")],
        true,
        &|l| sec(l, 7, "CIE"),
    );
    case("an ARC entry over $25,000", &[(8, "amount")], true, &|l| {
        sec(l, 7, "ARC")
    });
    case(
        "an RCK batch not described REDEPCHECK, over $2,500",
        &[(7, "company entry description"), (8, "amount")],
        true,
        &|l| sec(l, 7, "RCK"),
    );
    case(
        "an ENR batch not described AUTOENROLL, with money",
        &[(11, "company entry description"), (12, "amount")],
        true,
        &|l| sec(l, 11, "ENR"),
    );
    case("a DNE entry with money", &[(12, "amount")], true, &|l| {
        sec(l, 11, "DNE")
    });
    case(
        "a COR entry with money and no addenda 98",
        &[(12, "amount"), (12, "addenda record indicator")],
        true,
        &|l| sec(l, 11, "COR"),
    );
    case(
        "an MTE entry without its addenda 02",
        &[(12, "addenda record indicator")],
        true,
        &|l| sec(l, 11, "MTE"),
    );
    cases
}

#[test]
fn the_good_file_is_valid() {
    let bytes = join(&good_lines());
    let report = validate(&bytes);
    assert!(report.is_valid(), "{:#?}", report.findings);
    assert_eq!((report.batches, report.entries, report.addenda), (3, 5, 1));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("good.ach");
    std::fs::write(&path, &bytes).unwrap();
    if let Some(verdict) = achcli(&path) {
        verdict.unwrap();
    }
}

#[test]
fn each_broken_thing_is_reported_at_its_line_and_field() {
    let mut wrong = Vec::new();
    for c in cases() {
        let report = validate(&c.bytes);
        let got: Vec<(usize, &str)> = report.findings.iter().map(|f| (f.line, f.field)).collect();
        if got != c.findings {
            let found: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
            wrong.push(format!(
                "{}: expected findings {:?}, got {found:#?}",
                c.name, c.findings
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn what_achcli_misses() {
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    let mut missed = Vec::new();
    for c in cases() {
        let path = dir.path().join("case.ach");
        std::fs::write(&path, &c.bytes).unwrap();
        let Some(verdict) = achcli(&path) else { return };
        if verdict.is_err() != c.achcli_rejects {
            wrong.push(format!(
                "{}: achcli rejects: {}, recorded {}",
                c.name,
                verdict.is_err(),
                c.achcli_rejects
            ));
        }
        if verdict.is_ok() {
            missed.push(c.name);
        }
    }
    eprintln!("achcli v1.63.3 passes: {missed:#?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn findings_read_line_field_positions_expected_found() {
    let mut lines = good_lines();
    set(&mut lines, 5, 12, "4");
    let report = validate(&join(&lines));
    assert_eq!(
        report.findings[0].to_string(),
        "line 5: check digit (position 12): expected 3 (the check digit of 02600959), found 4"
    );
}
