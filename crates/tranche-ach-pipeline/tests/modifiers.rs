//! A bank allows 36 file ID modifiers per submission date. Cancels spread over every
//! file of a day, wave after wave, release and rebuild every file again and again; a
//! file released before it was sent gives its modifier back, so the day still goes out
//! whole. When the modifiers are truly spent, the status says so and what to do.

use crate::support;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tranche_ach_ledger::{CancelOutcome, FileState, State};

use support::*;

/// Files in the day: 27 full ones, as a payroll day of 135,000 entries in the default
/// 5,000-entry files makes.
const FILES: u64 = 27;

/// Entries per file: 100 in CI (2,700 entries, so 1 % of the entries is one cancel per
/// file); `TRANCHE_ACH_DAY_CAP=5000` runs the day at its real size.
fn cap() -> u32 {
    std::env::var("TRANCHE_ACH_DAY_CAP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_over_every_file_never_strand_a_day() {
    for (percent, seed) in [(1, 1), (5, 2), (20, 3)] {
        a_day_of_cancels(percent, seed).await;
    }
}

/// Four waves of cancels, each hitting every packaged file, between the passes of the
/// next-day window's packaging phase and the last one racing its first submission.
async fn a_day_of_cancels(percent: u64, seed: u64) {
    let cap = cap();
    let h = Harness::embedded(cap, HashMap::new()).await;
    let all: Vec<_> = (0..FILES * u64::from(cap))
        .map(|i| entry(&format!("P{percent}-{i:05}"), "first", false, i))
        .collect();
    h.ledger.import(all.clone()).await.unwrap();
    let aimed = (FILES * u64::from(cap) * percent / 100) as usize;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut outcomes: BTreeMap<String, CancelOutcome> = BTreeMap::new();

    // Up to four waves (one when a wave would leave files untouched), each spread over
    // every packaged file, aiming together at `percent` of the day's entries.
    let slots = [(15, 30), (16, 0), (16, 30), (17, 0)];
    let waves = (aimed / FILES as usize).clamp(1, slots.len());
    for (wave, &(hh, mm)) in slots.iter().enumerate() {
        h.tick(at(hh, mm)).await;
        if wave >= waves {
            continue;
        }
        let target = (aimed - outcomes.len()) / (waves - wave);
        let packaged = h.files(Some(FileState::Packaged)).await;
        assert!(!packaged.is_empty(), "{percent} %: wave {wave}: no file");
        let share = target.div_ceil(packaged.len());
        let mut victims = Vec::new();
        for f in &packaged {
            let detail = h.ledger.file(&f.file.file_id).await.unwrap().unwrap();
            let mut ids = detail.entry_ids;
            rng.shuffle(&mut ids);
            victims.extend(ids.into_iter().take(share));
        }
        for id in victims.into_iter().take(target) {
            let out = h.ledger.cancel(&id, "wave").await.unwrap();
            outcomes.insert(id, out);
        }
    }
    // The last wave's files are rebuilt and sent from 17:30 on, with more cancels
    // racing the uploads: some land, some are too late.
    let packaged = h.files(Some(FileState::Packaged)).await;
    let mut racing = Vec::new();
    for f in &packaged {
        let detail = h.ledger.file(&f.file.file_id).await.unwrap().unwrap();
        racing.push(detail.entry_ids[rng.usize(..detail.entry_ids.len())].clone());
    }
    let ledger = h.ledger.clone();
    let cancels = tokio::spawn(async move {
        let mut out = Vec::new();
        for id in racing {
            for _ in 0..40 {
                tokio::task::yield_now().await;
            }
            let o = ledger.cancel(&id, "racing").await.unwrap();
            out.push((id, o));
        }
        out
    });
    let tick = h.payments.tick(at(17, 30)).await.unwrap();
    for (id, o) in cancels.await.unwrap() {
        outcomes.entry(id).or_insert(o);
    }
    h.settle(&tick).await;
    h.tick(at(18, 0)).await;
    h.tick(at(18, 30)).await;

    let files = h.files(None).await;
    let retaken = files
        .iter()
        .filter(|f| f.file.file_id.matches('-').count() > 2);
    eprintln!(
        "{percent} % of {} entries: {} cancels, {} files recorded ({} released, {} taking a modifier back)",
        all.len(),
        outcomes.len(),
        files.len(),
        files
            .iter()
            .filter(|f| f.state == FileState::Released)
            .count(),
        retaken.count()
    );
    assert!(
        files.len() > 36,
        "{percent} %: the waves should have rebuilt more files than a day has modifiers"
    );
    let cancelled: BTreeSet<&String> = outcomes
        .iter()
        .filter(|(_, o)| !matches!(o, CancelOutcome::TooLate { .. }))
        .map(|(id, _)| id)
        .collect();
    assert!(
        cancelled.len() >= aimed,
        "{percent} %: {} cancels landed, {aimed} aimed",
        cancelled.len()
    );

    // Every entry not cancelled is in exactly one submitted file (the ledger), and in
    // exactly one file at the bank, each valid, none holding a cancelled entry.
    let submitted = h.submitted_entries().await;
    let mut at_bank: HashMap<String, String> = HashMap::new();
    let delivered = outbox_files(&h.outbox("first"));
    assert!(
        delivered.len() <= 36,
        "{} names at the bank",
        delivered.len()
    );
    for (name, bytes) in &delivered {
        let report = tranche_ach::validate(bytes);
        assert!(
            report.is_valid(),
            "{percent} %: {name}: {:?}",
            report.findings
        );
        for (id, _, _) in detail_records(bytes) {
            assert!(
                !cancelled.contains(&id),
                "{percent} %: {name} holds cancelled {id}"
            );
            if let Some(other) = at_bank.insert(id.clone(), name.clone()) {
                panic!("{percent} %: {id} is in {other} and {name}");
            }
        }
    }
    for e in &all {
        let id = &e.entry_id;
        if cancelled.contains(id) {
            assert_eq!(h.state(id).await, State::Cancelled, "{percent} %: {id}");
        } else {
            assert!(
                submitted.contains_key(id) && at_bank.contains_key(id),
                "{percent} %: {id} was never sent ({:?})",
                h.state(id).await
            );
        }
    }
    let status = h.payments.status(day()).await.unwrap();
    for b in &status.banks {
        assert!(b.problems.is_empty(), "{percent} %: {:?}", b.problems);
    }
    h.stop().await;
}

/// More files than modifiers: 36 go out, and the status names the bank, the date and
/// the entries waiting, and says what the operator can do — no job fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spent_modifiers_are_named_in_the_status() {
    let h = Harness::embedded(10, HashMap::new()).await;
    let all: Vec<_> = (0..400)
        .map(|i| entry(&format!("M-{i:05}"), "first", false, i))
        .collect();
    h.ledger.import(all).await.unwrap();
    h.tick(at(15, 30)).await;
    let problems = |s: &tranche_ach_pipeline::DayStatus| {
        s.banks
            .iter()
            .find(|b| b.bank == "first")
            .unwrap()
            .problems
            .clone()
    };
    let status = h.payments.status(day()).await.unwrap();
    let said = problems(&status).join("\n");
    assert_eq!(h.files(Some(FileState::Packaged)).await.len(), 36);
    for part in [
        "first",
        "2026-03-03",
        "36 on packaged files",
        "accepted entries wait",
    ] {
        assert!(said.contains(part), "{part:?} in {said:?}");
    }

    h.tick(at(17, 30)).await;
    h.tick(at(18, 0)).await;
    assert_eq!(h.files(Some(FileState::Submitted)).await.len(), 36);
    let status = h.payments.status(day()).await.unwrap();
    let said = problems(&status).join("\n");
    let first = status.banks.iter().find(|b| b.bank == "first").unwrap();
    let waiting = first
        .entries
        .iter()
        .find(|t| t.state == "accepted")
        .unwrap()
        .entries;
    assert!(waiting > 0);
    for part in [
        "36 of 36 on files sent".to_string(),
        format!("{waiting} accepted entries wait"),
        "cancel them".to_string(),
    ] {
        assert!(said.contains(&part), "{part:?} in {said:?}");
    }
    h.stop().await;
}
