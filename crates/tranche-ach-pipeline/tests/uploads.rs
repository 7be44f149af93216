//! Uploads a crash interrupts: the file reaches the bank once, whether the crash came
//! after the bytes arrived or before; and a file whose window ended unsubmitted goes
//! to the next window. The faults are injected around a real outbox (a crash between
//! the upload and its record cannot be had from a real server on cue).

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tranche_ach_delivery::{Delivery, DeliveryError, Outbox};
use tranche_ach_ledger::FileState;

use support::*;

/// Where the first delivery fails: after its bytes arrived (the connection dropped
/// before the bank's answer) or before.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drop {
    AfterArrival,
    BeforeArrival,
}

struct Flaky {
    inner: Outbox,
    drop: Drop,
    calls: AtomicU32,
    arrivals: AtomicU32,
}

fn dropped(location: String) -> DeliveryError {
    DeliveryError::Failed {
        location,
        doing: "uploading".into(),
        transient: true,
        source: "connection reset by peer".into(),
    }
}

#[async_trait]
impl Delivery for Flaky {
    async fn deliver(&self, name: &str, bytes: &[u8]) -> Result<(), DeliveryError> {
        let first = self.calls.fetch_add(1, Ordering::SeqCst) == 0;
        if first && self.drop == Drop::BeforeArrival {
            return Err(dropped(self.location()));
        }
        self.inner.deliver(name, bytes).await?;
        self.arrivals.fetch_add(1, Ordering::SeqCst);
        if first {
            return Err(dropped(self.location()));
        }
        Ok(())
    }
    async fn find(&self, name: &str) -> Result<Option<String>, DeliveryError> {
        self.inner.find(name).await
    }
    fn location(&self) -> String {
        self.inner.location()
    }
}

async fn interrupted(drop: Drop) {
    let outbox = tempfile::tempdir().unwrap();
    let flaky = Arc::new(Flaky {
        inner: Outbox::new(outbox.path()).unwrap(),
        drop,
        calls: AtomicU32::new(0),
        arrivals: AtomicU32::new(0),
    });
    let mut deliveries: HashMap<String, Arc<dyn Delivery>> = HashMap::new();
    deliveries.insert("first".into(), flaky.clone());
    let h = Harness::embedded(1_000, deliveries).await;
    let day: Vec<_> = (0..50)
        .map(|i| entry(&format!("U{i:03}"), "first", true, i))
        .collect();
    h.ledger.import(day).await.unwrap();
    h.tick(at(8, 30)).await;

    let files = h.files(None).await;
    assert_eq!(files.len(), 1);
    assert_eq!(
        files[0].state,
        FileState::Submitted,
        "the retried upload settled it"
    );
    let delivered = outbox_files(outbox.path());
    assert_eq!(delivered.len(), 1);
    assert_eq!(
        flaky.arrivals.load(Ordering::SeqCst),
        1,
        "the file reached the bank exactly once"
    );
    let calls = flaky.calls.load(Ordering::SeqCst);
    match drop {
        // The retry found the file there and recorded it without sending it again.
        Drop::AfterArrival => assert_eq!(calls, 1),
        // The retry found nothing there, reset the submission and sent it.
        Drop::BeforeArrival => assert_eq!(calls, 2),
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_after_the_bytes_arrived_is_not_sent_again() {
    interrupted(Drop::AfterArrival).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_before_the_bytes_arrived_is_sent_once() {
    interrupted(Drop::BeforeArrival).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_whose_window_ended_goes_to_the_next_window() {
    let h = Harness::embedded(1_000, HashMap::new()).await;
    let day: Vec<_> = (0..40)
        .map(|i| entry(&format!("W{i:03}"), "first", true, i))
        .collect();
    h.ledger.import(day).await.unwrap();
    // Packaged for sd1 at 07:00, but no engine ticked during sd1's submission.
    h.tick(at(7, 0)).await;
    let before = h.files(None).await;
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].file.window, "sd1");
    // 11:00: sd1 ended at 10:30; sd2 packages from 10:45.
    let tick = h.tick(at(11, 0)).await;
    assert_eq!(tick.released_late, vec![before[0].file.file_id.clone()]);
    h.tick(at(12, 45)).await;
    let files = h.files(Some(FileState::Submitted)).await;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].file.window, "sd2");
    assert_eq!(files[0].entries, 40);
    assert_eq!(h.submitted_entries().await.len(), 40);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_says_what_a_tick_would_do_and_does_nothing() {
    let h = Harness::embedded(100, HashMap::new()).await;
    h.ledger.import(entries("D", 600)).await.unwrap();
    let plan = h.payments.dry_run(at(7, 0)).await.unwrap();
    assert_eq!(plan.scopes.len(), 1);
    let s = &plan.scopes[0];
    assert!(s.package && !s.submit);
    let same_day = entries("D", 600).iter().filter(|e| e.same_day).count() as u64;
    assert_eq!(s.eligible, same_day);
    assert_eq!(s.files.iter().sum::<u64>(), same_day);
    assert!(s.files.iter().all(|n| *n <= 100));
    assert!(h.files(None).await.is_empty(), "a dry run records no file");
    assert!(
        h.client.list_runs(10).await.unwrap().is_empty(),
        "a dry run enqueues nothing"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_a_dead_packager_claimed_wait_until_its_claims_lapse() {
    let h = Harness::embedded(1_000, HashMap::new()).await;
    let day: Vec<_> = (0..30)
        .map(|i| entry(&format!("C{i:03}"), "first", true, i))
        .collect();
    h.ledger.import(day).await.unwrap();
    // A packager that claimed one of the entries and died: its chunk is left alone
    // until the claim lapses.
    let seq = h.ledger.entry("C007").await.unwrap().unwrap().seq;
    let keys = vec![tranche_ach_pipeline::naming::claim_key(
        "first",
        support::day(),
        true,
        seq,
    )];
    let ttl = std::time::Duration::from_millis(300);
    let claimed = std::time::Instant::now();
    h.client
        .claim_locks(tranche_types::LockRequest {
            owner: "ach-pass:dead:1",
            keys: &keys,
            ttl,
        })
        .await
        .unwrap();
    h.tick(at(7, 0)).await;
    if claimed.elapsed() < ttl {
        assert!(
            h.files(None).await.is_empty(),
            "the one chunk is held elsewhere"
        );
    }
    // Later ticks (each a slot of its own) package the entries once the claim lapsed.
    let mut minute = 0;
    tranche_test_support::poll_until_async(
        "the claim lapses and a later tick packages",
        std::time::Duration::from_secs(20),
        async || {
            minute += 1;
            h.tick(at(7, 0) + chrono::Duration::minutes(minute)).await;
            !h.files(None).await.is_empty()
        },
    )
    .await;
    assert!(claimed.elapsed() >= ttl, "packaged before the claim lapsed");
    let files = h.files(None).await;
    assert_eq!(files.iter().map(|f| f.entries).sum::<u64>(), 30);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_would_begin_after_the_cut_off_does_not_begin() {
    use tranche_ach_pipeline::tasks::{Scope, UploadArgs, QUEUE};
    use tranche_types::{EnqueueItem, EnqueueRequest, JobSpec};

    let h = Harness::embedded(1_000, HashMap::new()).await;
    let entries: Vec<_> = (0..20)
        .map(|i| entry(&format!("K{i:03}"), "first", true, i))
        .collect();
    h.ledger.import(entries).await.unwrap();
    h.tick(at(7, 0)).await;
    let file = h.files(None).await.remove(0);
    // Decided at 10:29, two minutes ago (waiting behind pacing and retries): its moment
    // is 10:31, after sd1's 10:30 cut-off.
    let scope = Scope {
        bank: "first".into(),
        window: "sd1".into(),
        date: day(),
    };
    let decided = tranche_types::Timestamp(h.client.clock().now().0 - 120_000_000);
    let args = UploadArgs {
        scope: scope.clone(),
        file_id: file.file.file_id.clone(),
        at: at(10, 29),
        decided,
    };
    let spec = JobSpec::new(
        tranche_ach_pipeline::naming::upload_kind("first"),
        serde_json::to_string(&args).unwrap(),
    )
    .queue(QUEUE);
    let enqueued = h
        .client
        .enqueue(EnqueueRequest {
            run: scope.run(),
            items: vec![EnqueueItem::Job(spec)],
            on_done: None,
        })
        .await
        .unwrap();
    let id = enqueued[0].ids[0];
    let record = tranche_test_support::poll_until_async(
        "the upload ends",
        std::time::Duration::from_secs(30),
        async || {
            let job = h.client.job(id).await.unwrap().unwrap();
            job.state.is_terminal().then_some(job)
        },
    )
    .await;
    assert_eq!(
        record.result.as_deref(),
        Some("\"window_closed\""),
        "{record:?}"
    );
    assert_eq!(
        h.files(None).await[0].state,
        FileState::Packaged,
        "nothing was begun"
    );
    assert!(
        outbox_files(&h.outbox("first")).is_empty(),
        "nothing was sent"
    );
    h.stop().await;
}

/// An outbox on a disk that is full: the uploads wait without spending attempts (each
/// given back, not failed), the operator can see where and what, and once space is
/// freed every file goes out by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_outbox_waits_without_spending_attempts_and_resumes() {
    let Some(disk) = tranche_test_support::SmallDisk::mount("1m") else {
        return;
    };
    let outbox: Arc<dyn Delivery> = Arc::new(Outbox::new(disk.path().join("first")).unwrap());
    let filler = disk.fill_but("filler", 2_000);
    let h = Harness::embedded(100, HashMap::from([("first".to_string(), outbox)])).await;
    let all: Vec<_> = (0..300)
        .map(|i| entry(&format!("FULL-{i:04}"), "first", false, i))
        .collect();
    h.ledger.import(all).await.unwrap();
    h.tick(at(15, 30)).await;
    assert_eq!(h.files(Some(FileState::Packaged)).await.len(), 3);

    let tick = h.payments.tick(at(17, 30)).await.unwrap();
    // Each of the three files tried twice: once, and again after being given back.
    tranche_test_support::poll_until(
        "six uploads that did not fit",
        Duration::from_secs(60),
        || {
            h.payments
                .full_destinations()
                .first()
                .is_some_and(|d| d.tries >= 6)
        },
    )
    .await;
    let full = &h.payments.full_destinations()[0];
    assert_eq!(full.bank, "first");
    assert!(full.location.ends_with("/first"), "{full:?}");
    let uploads = h
        .client
        .list_jobs(
            &tranche_types::JobFilter {
                kind: Some(tranche_ach_pipeline::naming::upload_kind("first")),
                ..Default::default()
            },
            None,
            100,
        )
        .await
        .unwrap()
        .jobs;
    assert!(!uploads.is_empty());
    for j in &uploads {
        assert!(
            j.attempt <= 1 && j.error.is_none(),
            "waiting for space spent an attempt: {j:?}"
        );
    }
    assert!(outbox_files(&disk.path().join("first")).is_empty());

    std::fs::remove_file(filler).unwrap();
    h.settle(&tick).await;
    assert_eq!(h.files(Some(FileState::Submitted)).await.len(), 3);
    assert_eq!(outbox_files(&disk.path().join("first")).len(), 3);
    assert!(h.payments.full_destinations().is_empty());
    h.stop().await;
}
