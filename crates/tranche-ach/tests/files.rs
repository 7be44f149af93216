//! Files of random valid entries pass our validator and moov-io's achcli, and their
//! counts, totals and entry hash match an independent recount.

use crate::support;

use support::{achcli, file_control, options, profile, random_entry, recount};
use tranche_ach::{validate, write_file, Grouping, LineEnding};

fn check(seed: u64, n: usize, grouping: Grouping, crlf: bool) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let entries: Vec<_> = (0..n).map(|i| random_entry(&mut rng, i)).collect();
    let mut opts = options();
    if crlf {
        opts.line_ending = LineEnding::CrLf;
    }
    let written = write_file(Vec::new(), &profile(), &opts, &entries, grouping)
        .unwrap_or_else(|e| panic!("seed {seed}, {n} entries: {e}"));
    let bytes = written.out;
    let what = format!("seed {seed}, {n} entries, {grouping:?}, crlf {crlf}");

    let report = validate(&bytes);
    assert!(
        report.is_valid(),
        "{what}: {:#?}",
        &report.findings[..report.findings.len().min(10)]
    );

    // An independent recount of the lines agrees with the summary and the file control.
    let r = recount(&bytes);
    let s = written.summary;
    assert_eq!(r.lines % 10, 0, "{what}");
    assert_eq!(r.lines, s.lines, "{what}");
    assert_eq!(r.entries, n as u64, "{what}");
    assert_eq!(r.entries, s.totals.entries, "{what}");
    assert_eq!(r.addenda, s.totals.addenda, "{what}");
    assert_eq!(
        r.addenda,
        entries.iter().filter(|e| e.addenda.is_some()).count() as u64
    );
    assert_eq!(r.batches, u64::from(s.batches), "{what}");
    assert_eq!(r.hash, s.totals.entry_hash(), "{what}");
    let debits: u64 = entries
        .iter()
        .filter(|e| e.direction() == tranche_ach::Direction::Debit)
        .map(|e| e.amount_cents)
        .sum();
    let credits: u64 = entries.iter().map(|e| e.amount_cents).sum::<u64>() - debits;
    assert_eq!((r.debits, r.credits), (debits, credits), "{what}");
    let fc = file_control(&bytes);
    assert_eq!(fc.batches, r.batches, "{what}");
    assert_eq!(fc.entries, r.entries + r.addenda, "{what}");
    assert_eq!(
        (fc.hash, fc.debits, fc.credits, fc.lines),
        (r.hash, r.debits, r.credits, r.lines),
        "{what}"
    );
    let hash: u64 = entries
        .iter()
        .map(|e| e.rdfi_routing.dfi_value())
        .sum::<u64>()
        % 10_000_000_000;
    assert_eq!(r.hash, hash, "{what}");

    // Trace numbers: one per entry, unique, all at the ODFI.
    let mut traces = written.traces.clone();
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), n, "{what}");
    assert!(written
        .traces
        .iter()
        .all(|t| t.to_string().starts_with("02100002")));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file.ach");
    std::fs::write(&path, &bytes).unwrap();
    if let Some(verdict) = achcli(&path) {
        verdict.unwrap_or_else(|e| panic!("{what}: achcli rejects the file: {e}"));
    }
}

#[test]
fn random_files_of_many_sizes_pass_both_validators() {
    for (seed, n) in [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 7),
        (5, 9),
        (6, 10),
        (7, 33),
        (8, 100),
        (9, 517),
        (10, 2_000),
    ] {
        check(seed, n, Grouping::Separate, false);
    }
}

#[test]
fn mixed_batches_and_crlf_pass_both_validators() {
    for (seed, n) in [(11, 1), (12, 50), (13, 400)] {
        check(seed, n, Grouping::Mixed, seed % 2 == 0);
    }
    check(14, 300, Grouping::Separate, true);
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    let mut rng = fastrand::Rng::with_seed(42);
    let entries: Vec<_> = (0..200).map(|i| random_entry(&mut rng, i)).collect();
    let a = write_file(
        Vec::new(),
        &profile(),
        &options(),
        &entries,
        Grouping::Separate,
    )
    .unwrap();
    let b = write_file(
        Vec::new(),
        &profile(),
        &options(),
        &entries,
        Grouping::Separate,
    )
    .unwrap();
    assert_eq!(a.out, b.out);
}

#[test]
#[ignore = "writes a sample file to $ACH_SAMPLE for a look"]
fn sample() {
    let mut rng = fastrand::Rng::with_seed(3);
    let entries: Vec<_> = (0..6).map(|i| random_entry(&mut rng, i)).collect();
    let w = write_file(
        Vec::new(),
        &profile(),
        &options(),
        &entries,
        Grouping::Separate,
    )
    .unwrap();
    std::fs::write(std::env::var("ACH_SAMPLE").unwrap(), w.out).unwrap();
}
