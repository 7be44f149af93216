//! The payment day against a ledger that fails on cue (`FaultyLedger`): a write refused
//! before it reached the database, or committed with its reply lost, is retried by its
//! step and settles — every entry in exactly one submitted file, every file at its bank
//! exactly once.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tranche_ach_ledger::faults::{Fault, FaultyLedger, LedgerOp};
use tranche_ach_ledger::{FileState, Ledger};

use support::*;

async fn a_day_meeting(op: LedgerOp, fault: Fault) {
    let faulty: Arc<Mutex<Option<Arc<FaultyLedger>>>> = Arc::default();
    let handle = faulty.clone();
    let h = Harness::with_ledger(rules_text(20), HashMap::new(), move |inner| {
        let wrapped = FaultyLedger::new(inner);
        *handle.lock().unwrap() = Some(wrapped.clone());
        wrapped as Arc<dyn Ledger>
    })
    .await;
    let faulty = faulty.lock().unwrap().clone().unwrap();
    let day: Vec<_> = (0..50)
        .map(|i| entry(&format!("F{i:03}"), "first", true, i))
        .collect();
    h.ledger.import(day).await.unwrap();
    faulty.inject(op, [fault]);

    h.tick(at(8, 30)).await;

    let what = format!("{op:?} meeting {fault:?}");
    assert_eq!(faulty.pending(op), 0, "{what}: the fault was never met");
    let files = h.files(None).await;
    assert_eq!(files.len(), 3, "{what}: 50 entries, 20 a file: {files:?}");
    assert!(
        files.iter().all(|f| f.state == FileState::Submitted),
        "{what}: {files:?}"
    );
    let entries = h.submitted_entries().await;
    assert_eq!(
        entries.len(),
        50,
        "{what}: every entry in one submitted file"
    );
    assert_eq!(
        outbox_files(&h.outbox("first")).len(),
        3,
        "{what}: the three files at the bank"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packaging_write_refused_or_with_its_reply_lost_is_retried_once_committed() {
    a_day_meeting(LedgerOp::Package, Fault::Refuse).await;
    a_day_meeting(LedgerOp::Package, Fault::LoseReply).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_begun_or_recorded_with_its_reply_lost_sends_the_file_once() {
    a_day_meeting(LedgerOp::BeginSubmission, Fault::Refuse).await;
    a_day_meeting(LedgerOp::BeginSubmission, Fault::LoseReply).await;
    a_day_meeting(LedgerOp::MarkSubmitted, Fault::Refuse).await;
    a_day_meeting(LedgerOp::MarkSubmitted, Fault::LoseReply).await;
}
