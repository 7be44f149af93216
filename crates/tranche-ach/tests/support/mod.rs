//! What the file tests share: a bank profile, seeded random entries, an independent
//! recomputation of a file's counts and totals, and moov-io's `achcli`.

#![allow(dead_code)]

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

#[allow(unused_imports)] // each test file uses a part
pub use tranche_test_support::nacha::{achcli, file_control, recount};
