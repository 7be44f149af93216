//! The generated day: the same for a seed, valid but for the rows made bad, shaped
//! like a real day, and written as a CSV that reads back into the same entries.

use std::collections::{BTreeMap, HashSet};

use chrono::NaiveDate;
use tranche_ach::{Direction, Entry, SecCode, SAME_DAY_LIMIT_CENTS};
use tranche_ach_rules::generate::{
    day, next_business_day, rows, write_day, DayOptions, Flaw, CSV_HEADER,
};
use tranche_ach_rules::{Delivery, Rules};

fn monday() -> NaiveDate {
    "2026-03-02".parse().unwrap()
}

fn options(entries: u64) -> DayOptions {
    let mut o = DayOptions::new(entries, monday());
    o.seed = 7;
    o.banks = vec!["first".into(), "second".into(), "third".into()];
    o
}

#[test]
fn a_seed_gives_the_same_day() {
    assert_eq!(DayOptions::default().same_day_share, 0.15);
    assert_eq!(DayOptions::default().banks, ["first", "second"]);
    let a: Vec<Entry> = day(&options(5_000)).collect();
    let b: Vec<Entry> = day(&options(5_000)).collect();
    assert_eq!(a, b);
    let mut other = options(5_000);
    other.seed = 8;
    let c: Vec<Entry> = day(&other).collect();
    assert_ne!(a, c);
    // A shorter day of the same seed is not a prefix's worth of different entries:
    // ids and counts are exact.
    assert_eq!(a.len(), 5_000);
    assert_eq!(day(&options(0)).count(), 0);
    assert_eq!(day(&options(1)).count(), 1);
}

#[test]
fn every_entry_of_a_day_of_100k_is_valid_and_shaped_like_a_real_day() {
    let o = options(100_000);
    let (mut same_day, mut prenotes, mut addenda) = (0u64, 0u64, 0u64);
    let mut ids = HashSet::new();
    let mut runs: Vec<(String, u64)> = Vec::new();
    let mut by_bank: BTreeMap<String, u64> = BTreeMap::new();
    let mut sec = BTreeMap::new();
    let mut codes = HashSet::new();
    let mut last_id = String::new();
    for e in day(&o) {
        if let Err(errors) = e.validate() {
            panic!("{}: {errors:?}", e.entry_id);
        }
        assert!(
            e.entry_id > last_id,
            "ids ascend: {} after {last_id}",
            e.entry_id
        );
        last_id = e.entry_id.clone();
        assert!(ids.insert(e.entry_id.clone()));
        assert_eq!(e.submission_date, monday());
        if e.same_day {
            same_day += 1;
            assert_eq!(e.effective_date, monday());
            assert!(e.amount_cents <= SAME_DAY_LIMIT_CENTS);
        } else {
            assert_eq!(e.effective_date, next_business_day(monday()));
        }
        let len = e.account_number.expose().len();
        assert!((6..=17).contains(&len), "{len}");
        assert!(e
            .account_number
            .expose()
            .bytes()
            .all(|b| b.is_ascii_digit()));
        prenotes += u64::from(e.transaction_code.prenote);
        addenda += u64::from(e.addenda.is_some());
        codes.insert(e.transaction_code.code());
        *sec.entry((e.sec_code, e.direction())).or_insert(0u64) += 1;
        *by_bank.entry(e.bank.clone()).or_default() += 1;
        if !e.transaction_code.prenote {
            match e.sec_code {
                SecCode::Ppd => assert!((50_000..=900_000).contains(&e.amount_cents)),
                SecCode::Web | SecCode::Tel => {
                    assert!((1_000..=250_000).contains(&e.amount_cents))
                }
                SecCode::Ccd => assert!(e.amount_cents >= 10_000),
            }
        }
        match runs.last_mut() {
            Some((company, n)) if *company == e.company_id => *n += 1,
            _ => runs.push((e.company_id.clone(), 1)),
        }
    }
    assert_eq!(ids.len(), 100_000);
    assert_eq!(last_id, "E0000100000");

    // An originator's entries come together: no company appears in two runs.
    let companies: HashSet<&String> = runs.iter().map(|(c, _)| c).collect();
    assert_eq!(companies.len(), runs.len(), "one run per originator");
    let large = runs.iter().filter(|(_, n)| *n >= 10_000).count();
    assert!((1..=6).contains(&large), "{large} large employers");
    let small = runs.iter().filter(|(_, n)| (10..=400).contains(n)).count();
    assert!(small > 100, "{small} small originators");

    assert_eq!(by_bank.len(), 3, "{by_bank:?}");
    assert!(by_bank.values().all(|n| *n > 10_000), "{by_bank:?}");
    let share = same_day as f64 / 100_000.0;
    assert!((0.12..=0.18).contains(&share), "same-day share {share}");

    for kind in [
        (SecCode::Ppd, Direction::Credit),
        (SecCode::Ccd, Direction::Credit),
        (SecCode::Web, Direction::Debit),
        (SecCode::Tel, Direction::Debit),
    ] {
        assert!(
            sec.get(&kind).copied().unwrap_or(0) > 1_000,
            "{kind:?}: {sec:?}"
        );
    }
    assert_eq!(sec.len(), 4, "{sec:?}");
    assert!((50..=2_000).contains(&prenotes), "{prenotes} prenotes");
    assert!(addenda > 500, "{addenda} addenda");
    let mut codes: Vec<u8> = codes.into_iter().collect();
    codes.sort();
    assert_eq!(codes, [22, 23, 27, 28, 32, 33, 37, 38]);
}

#[test]
fn the_same_day_share_is_as_asked() {
    for share in [0.0, 0.5, 1.0] {
        let mut o = options(20_000);
        o.same_day_share = share;
        let same_day = day(&o).filter(|e| e.same_day).count() as f64 / 20_000.0;
        assert!((same_day - share).abs() <= 0.05, "{share}: {same_day}");
    }
}

#[test]
fn bad_rows_are_bad_in_their_own_way_each() {
    let mut o = options(10_000);
    o.bad = 40;
    let mut seen = BTreeMap::new();
    let mut positions = Vec::new();
    for (i, (e, flaw)) in rows(&o).enumerate() {
        let Some(flaw) = flaw else {
            e.validate().unwrap();
            continue;
        };
        positions.push(i);
        *seen.entry(format!("{flaw:?}")).or_insert(0) += 1;
        let fields: Vec<&str> = match e.validate() {
            Ok(()) => vec![],
            Err(errors) => errors.iter().map(|f| f.field).collect(),
        };
        let expected: &[&str] = match flaw {
            Flaw::CheckDigit => &[], // only the written row is wrong
            Flaw::ZeroAmount | Flaw::SameDayOverLimit => &["amount_cents"],
            Flaw::NonAsciiName => &["individual_name"],
        };
        assert_eq!(fields, expected, "{flaw:?}: {e:?}");
    }
    assert_eq!(seen.values().sum::<i32>(), 40);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.values().all(|n| *n == 10), "{seen:?}");
    // Spread through the day, a stretch of 250 rows each.
    assert_eq!(positions.first(), Some(&125));
    assert_eq!(positions.last(), Some(&9_875));
}

#[test]
fn the_written_day_reads_back_as_the_same_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(3_000);
    o.bad = 8;
    let files = write_day(dir.path(), &o).unwrap();
    assert_eq!(files.entries_csv, dir.path().join("entries.csv"));

    let mut reader = csv::Reader::from_path(&files.entries_csv).unwrap();
    let headers = reader.headers().unwrap().clone();
    assert_eq!(headers.iter().collect::<Vec<_>>(), CSV_HEADER);
    let mut unparsed = Vec::new();
    let mut generated = rows(&o);
    for (i, record) in reader.records().enumerate() {
        let record = record.unwrap();
        let (expected, flaw) = generated.next().unwrap();
        match record.deserialize::<Entry>(Some(&headers)) {
            Ok(entry) => assert_eq!(entry, expected, "row {i}"),
            Err(e) => {
                assert_eq!(flaw, Some(Flaw::CheckDigit), "row {i}: {e}");
                assert!(e.to_string().contains("check digit"), "{e}");
                unparsed.push(i);
            }
        }
    }
    assert!(generated.next().is_none());
    assert_eq!(unparsed.len(), 2, "{unparsed:?}");

    // The counts say what was written.
    let c = &files.counts;
    assert_eq!((c.rows, c.bad, c.valid()), (3_000, 8, 2_992));
    let same_day = rows(&o).filter(|(e, f)| f.is_none() && e.same_day).count() as u64;
    assert_eq!(c.same_day(), same_day);
    assert_eq!(c.banks.len(), 3);
    let per_bank: u64 = c
        .banks
        .values()
        .map(|b| b.same_day + b.next_day + b.bad)
        .sum();
    assert_eq!(per_bank, 3_000);

    let shown = files.to_string();
    assert!(shown.starts_with(&format!(
        "{}: 3000 rows (2992 valid",
        files.entries_csv.display()
    )));
    assert_eq!(shown.lines().count(), 5, "{shown}");

    // The rules beside it name the day's banks, with outboxes under the directory.
    let rules = Rules::load(&files.rules).unwrap();
    let names: Vec<&str> = rules.banks.iter().map(|b| b.name()).collect();
    assert_eq!(names, ["first", "second", "third"]);
    assert_eq!(
        rules.bank("third").unwrap().delivery,
        Delivery::Outbox {
            dir: dir.path().join("outbox/third")
        }
    );
}

#[test]
fn the_header_is_what_serde_writes_and_what_the_import_expects() {
    let entry = day(&options(1)).next().unwrap();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(&entry).unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert_eq!(text.lines().next().unwrap(), CSV_HEADER.join(","));
    assert_eq!(
        CSV_HEADER,
        tranche_ach::Entry::CSV_COLUMNS,
        "the columns `tranche ach import` reads"
    );
}

#[test]
fn bad_bank_names_are_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(10);
    o.banks = vec!["Not A Key".into()];
    let e = write_day(&dir.path().join("day"), &o).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("bank[0].name"), "{e}");
    assert!(!dir.path().join("day").exists());
    o.banks.clear();
    assert!(write_day(dir.path(), &o).is_err());
}

#[test]
fn a_million_entries_stream() {
    // Counted, never held: the iterator keeps one originator's state at a time.
    let o = options(1_000_000);
    let mut n = 0u64;
    let mut last = None;
    for e in day(&o) {
        n += 1;
        last = Some(e.entry_id);
    }
    assert_eq!(n, 1_000_000);
    assert_eq!(last.as_deref(), Some("E0001000000"));
}
