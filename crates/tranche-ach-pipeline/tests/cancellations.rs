//! Cancellations always win: fired while passes package and upload, over many seeded
//! interleavings, no cancelled entry is ever in a submitted file, and every other
//! entry is in exactly one.

use crate::support;

use std::collections::{BTreeSet, HashMap};

use tranche_ach_ledger::{CancelOutcome, FileState, State};

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_racing_packaging_and_submission_never_lose() {
    let mut seen = [0; 3];
    for seed in 1..=6u64 {
        let kinds = one_interleaving(seed).await;
        for (s, k) in seen.iter_mut().zip(kinds) {
            *s += k;
        }
    }
    // The seeds spread the cancels over every phase: before packaging, between
    // packaging and upload (the file is rebuilt), and after the upload began.
    assert!(
        seen.iter().all(|&n| n > 0),
        "cancels per phase over all seeds: {seen:?}"
    );
}

/// One seeded race; how many cancels landed before packaging, after it, too late.
async fn one_interleaving(seed: u64) -> [usize; 3] {
    let h = Harness::embedded(150, HashMap::new()).await;
    // Same-day entries of `first` only: one window, sd1, packages and submits them.
    let all: Vec<_> = (0..900)
        .map(|i| entry(&format!("S{seed}-{i:05}"), "first", true, i))
        .collect();
    h.ledger.import(all.clone()).await.unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    let victims: Vec<String> = (0..120)
        .map(|_| all[rng.usize(..all.len())].entry_id.clone())
        .collect();

    // The cancels run while one tick at 08:30 packages (its plan, groupers, reduce and
    // writers) and submits (its uploads); each waits a seeded number of yields first so
    // that seeds spread them over different steps.
    let ledger = h.ledger.clone();
    let pauses: Vec<u32> = victims.iter().map(|_| rng.u32(0..1_200)).collect();
    let cancels = tokio::spawn(async move {
        let mut outcomes = Vec::new();
        for (id, pause) in victims.into_iter().zip(pauses) {
            for _ in 0..pause {
                tokio::task::yield_now().await;
            }
            let out = ledger.cancel(&id, "raced").await.unwrap();
            outcomes.push((id, out));
        }
        outcomes
    });
    let tick = h.payments.tick(at(8, 30)).await.unwrap();
    let outcomes = cancels.await.unwrap();
    h.settle(&tick).await;
    // Files released by cancels are packaged again and submitted by a later tick.
    h.tick(at(9, 0)).await;
    h.tick(at(9, 30)).await;

    let kinds = |f: fn(&CancelOutcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
    let phases = [
        kinds(|o| matches!(o, CancelOutcome::Cancelled { file_id: None, .. })),
        kinds(|o| {
            matches!(
                o,
                CancelOutcome::Cancelled {
                    file_id: Some(_),
                    ..
                }
            )
        }),
        kinds(|o| matches!(o, CancelOutcome::TooLate { .. })),
    ];
    eprintln!(
        "seed {seed}: {} cancels before packaging, {} after (file rebuilt), {} too late",
        phases[0], phases[1], phases[2]
    );
    let submitted = h.submitted_entries().await;
    let mut too_late = BTreeSet::new();
    for (id, out) in &outcomes {
        match out {
            CancelOutcome::TooLate { file_id, .. } => {
                too_late.insert(id.clone());
                assert_eq!(
                    submitted.get(id),
                    Some(file_id),
                    "seed {seed}: {id} was too late to cancel, so it went in {file_id}"
                );
            }
            CancelOutcome::Cancelled { .. } | CancelOutcome::AlreadyCancelled(_) => {
                assert!(
                    !submitted.contains_key(id),
                    "seed {seed}: cancelled {id} is in submitted file {}",
                    submitted[id]
                );
                assert_eq!(h.state(id).await, State::Cancelled, "seed {seed}: {id}");
            }
        }
    }
    let cancelled: BTreeSet<&String> = outcomes
        .iter()
        .filter(|(id, _)| !too_late.contains(id))
        .map(|(id, _)| id)
        .collect();
    for e in &all {
        if !cancelled.contains(&e.entry_id) {
            assert!(
                submitted.contains_key(&e.entry_id),
                "seed {seed}: {} was never submitted ({:?})",
                e.entry_id,
                h.state(&e.entry_id).await
            );
        }
    }
    // The bytes at the bank agree: no cancelled entry in any delivered file.
    for (name, bytes) in outbox_files(&h.outbox("first")) {
        for (id, _, _) in detail_records(&bytes) {
            assert!(
                !cancelled.contains(&id),
                "seed {seed}: {name} delivered cancelled {id}"
            );
        }
    }
    assert!(
        h.files(Some(FileState::Packaged)).await.is_empty(),
        "seed {seed}: a file was left packaged"
    );
    h.stop().await;
    phases
}
