//! What the file tests share: a bank profile, seeded random entries, an independent
//! recomputation of a file's counts and totals, and moov-io's `achcli`.

#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use chrono::{NaiveDate, NaiveDateTime};
use tranche_ach::{
    check_digit, AccountKind, AccountNumber, BankProfile, Direction, Entry, FileOptions, SecCode,
    TransactionCode,
};

pub fn profile() -> BankProfile {
    BankProfile {
        bank: "first".into(),
        odfi: "021000021".parse().unwrap(),
        immediate_destination: "021000021".parse().unwrap(),
        immediate_destination_name: "JPMORGAN CHASE BANK".into(),
        immediate_origin: "1234567890".into(),
        immediate_origin_name: "TRANCHE BACK OFFICE".into(),
        reference_code: "REF00001".into(),
    }
}

pub fn submission() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 2).unwrap()
}

pub fn options() -> FileOptions {
    let created: NaiveDateTime = submission().and_hms_opt(9, 30, 0).unwrap();
    FileOptions::new(created, 'A')
}

/// A routing number with a right check digit, from 8 random digits.
pub fn routing(rng: &mut fastrand::Rng) -> tranche_ach::RoutingNumber {
    let mut d: Vec<u8> = (0..8).map(|_| b'0' + rng.u8(0..10)).collect();
    d.push(b'0' + check_digit(&d).unwrap());
    String::from_utf8(d).unwrap().parse().unwrap()
}

fn word(rng: &mut fastrand::Rng, max: usize) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,-&'/#";
    let n = rng.usize(1..=max);
    let mut s: String = (0..n)
        .map(|_| CHARS[rng.usize(..CHARS.len())] as char)
        .collect();
    if s.bytes().all(|b| b == b' ' || b == b'0') {
        s.replace_range(..1, "X");
    }
    s
}

/// A random valid entry: a few companies and dates so entries share batches, some
/// same-day, some prenotes, some addenda.
pub fn random_entry(rng: &mut fastrand::Rng, i: usize) -> Entry {
    let sec = SecCode::ALL[rng.usize(..4)];
    let account = if rng.bool() {
        AccountKind::Checking
    } else {
        AccountKind::Savings
    };
    let direction = if sec == SecCode::Tel || rng.bool() {
        Direction::Debit
    } else {
        Direction::Credit
    };
    let prenote = rng.u8(..20) == 0;
    let same_day = rng.u8(..4) == 0;
    let company = rng.usize(..3);
    let amount_cents = if prenote {
        0
    } else if same_day {
        rng.u64(1..=100_000_000)
    } else if rng.u8(..50) == 0 {
        rng.u64(100_000_000..=9_999_999_999)
    } else {
        rng.u64(1..5_000_000)
    };
    Entry {
        entry_id: format!("E-{i}"),
        bank: "first".into(),
        company_name: ["ACME PAYROLL", "GLOBEX CORP", "INITECH LLC"][company].into(),
        company_id: ["1234567890", "9876543210", "1122334455"][company].into(),
        sec_code: sec,
        transaction_code: TransactionCode {
            account,
            direction,
            prenote,
        },
        rdfi_routing: routing(rng),
        account_number: AccountNumber::new(format!("{}", rng.u64(1..100_000_000_000_000_000))),
        amount_cents,
        individual_id: if rng.bool() {
            word(rng, 15)
        } else {
            String::new()
        },
        individual_name: word(rng, 22),
        entry_description: ["PAYROLL", "INVOICE", "REFUND"][rng.usize(..3)].into(),
        descriptive_date: if same_day && rng.bool() {
            "SD1300".into()
        } else {
            String::new()
        },
        effective_date: if same_day {
            submission()
        } else {
            submission() + chrono::Days::new(rng.u64(1..3))
        },
        submission_date: submission(),
        same_day,
        addenda: if sec != SecCode::Tel && rng.u8(..5) == 0 {
            Some(word(rng, 80))
        } else {
            None
        },
    }
}

/// Counts and totals of a file, recomputed from its lines without the library.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recount {
    pub batches: u64,
    pub entries: u64,
    pub addenda: u64,
    pub hash: u64,
    pub debits: u64,
    pub credits: u64,
    pub lines: u64,
}

pub fn recount(bytes: &[u8]) -> Recount {
    let text = std::str::from_utf8(bytes).unwrap();
    let mut r = Recount::default();
    for line in text.lines() {
        assert_eq!(line.len(), 94, "{line:?}");
        r.lines += 1;
        match &line[..1] {
            "5" => r.batches += 1,
            "6" => {
                r.entries += 1;
                r.hash += line[3..11].parse::<u64>().unwrap();
                let amount: u64 = line[29..39].parse().unwrap();
                let code: u8 = line[1..3].parse().unwrap();
                if code % 10 >= 6 {
                    r.debits += amount;
                } else {
                    r.credits += amount;
                }
            }
            "7" => r.addenda += 1,
            _ => {}
        }
    }
    r.hash %= 10_000_000_000;
    r
}

/// The fields of the file control record (type 9, not padding) as numbers.
pub fn file_control(bytes: &[u8]) -> Recount {
    let text = std::str::from_utf8(bytes).unwrap();
    let fc = text
        .lines()
        .find(|l| l.starts_with('9') && !l.bytes().all(|b| b == b'9'))
        .unwrap();
    let n = |a: usize, b: usize| fc[a - 1..b].parse::<u64>().unwrap();
    let count = n(14, 21);
    Recount {
        batches: n(2, 7),
        entries: count, // entries + addenda: the caller compares the sum
        addenda: 0,
        hash: n(22, 31),
        debits: n(32, 43),
        credits: n(44, 55),
        lines: n(8, 13) * 10,
    }
}

/// moov-io's achcli verdict on a file: `Some(Ok)` when it reads it as valid, `Some(Err)`
/// with its output when not, `None` when achcli is not installed (a skip, said on
/// stderr) — or a panic when tools are required (`TRANCHE_REQUIRE_TOOLS=1`, `CI`).
pub fn achcli(path: &Path) -> Option<Result<(), String>> {
    let out = match Command::new("achcli")
        .arg("-reformat=ach")
        .arg(path)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if tranche_test_support::tools_required() {
                panic!("achcli is required (TRANCHE_REQUIRE_TOOLS=1 or CI is set; .ci/run installs it): {e}");
            }
            eprintln!("skipping the achcli check: achcli is not installed (.ci/run installs it)");
            return None;
        }
        Err(e) => panic!("cannot run achcli: {e}"),
    };
    if out.status.success() {
        Some(Ok(()))
    } else {
        let mut msg = String::from_utf8_lossy(&out.stderr).into_owned();
        msg.push_str(&String::from_utf8_lossy(&out.stdout));
        Some(Err(msg.chars().take(2000).collect()))
    }
}
