//! The writer task commits the batches queued together as one group: one write, one
//! sync, one wake-up per key.

use std::time::Duration;

use tranche_feed::*;
use tranche_feed_service::{spawn_writer, Refused};

fn insert(seq: u64) -> Event {
    Event::Insert(NewOrder {
        seq,
        rec: seq,
        id: OrderId(seq),
        firm: FirmId(1),
        broker: BrokerId(1),
        instrument: InstrumentId(1),
        side: Side::Buy,
        price: 1,
        quantity: 1,
        created_at: 1,
    })
}

// One thread: the ten batches are all queued before the writer task next runs.
#[tokio::test(flavor = "current_thread")]
async fn batches_queued_together_are_one_group_each_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, task) = spawn_writer(writer, None);

    // A waiter that never has enough counts the wake-ups of Filter::All.
    let waiter = tokio::spawn({
        let store = store.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        async move {
            store
                .wait_for(Filter::All, Cursor::START, 1_000, deadline)
                .await
        }
    });
    tranche_test_support::poll_until("the waiter waits", Duration::from_secs(10), || {
        store.waiting(Filter::All) > 0
    })
    .await;

    // Batch 4 reuses seq 3 (not after 4): refused alone, the others applied.
    let batches: Vec<Vec<Event>> = (1..=10)
        .map(|seq| vec![insert(if seq == 5 { 3 } else { seq })])
        .collect();
    let results =
        futures::future::join_all(batches.into_iter().map(|batch| ingest.apply(batch))).await;
    for (i, result) in results.iter().enumerate() {
        if i == 4 {
            assert!(
                matches!(result, Err(Refused::Batch(e)) if e.field == "seq"),
                "{result:?}"
            );
        } else {
            let seq = i as u64 + 1;
            assert_eq!(result, &Ok(Cursor::new(seq, seq)));
        }
    }
    assert_eq!(store.len(), 9);
    assert_eq!(store.signals_sent(Filter::All), 1, "one group, one wake-up");

    waiter.abort();
    drop(ingest);
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn under_interval_durability_the_task_syncs_on_close_and_a_reopen_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = FeedOptions {
        durability: Durability::Interval(Duration::from_millis(5)),
        ..FeedOptions::default()
    };
    let (store, writer) = Store::open(dir.path(), options.clone()).unwrap();
    let (ingest, task) = spawn_writer(writer, Some(Duration::from_millis(5)));
    assert_eq!(ingest.apply(vec![insert(1)]).await, Ok(Cursor::new(1, 1)));
    assert_eq!(ingest.apply(vec![insert(2)]).await, Ok(Cursor::new(2, 2)));
    drop(ingest);
    task.await.unwrap().unwrap();
    drop(store);
    let (store, _writer) = Store::open(dir.path(), options).unwrap();
    assert_eq!(store.len(), 2);
}

#[tokio::test]
async fn submitted_batches_are_applied_in_order_and_hand_their_buffers_back() {
    let dir = tempfile::tempdir().unwrap();
    let (store, writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
    let (ingest, task) = spawn_writer(writer, None);
    // Queued before any is awaited: were they applied out of order, a later seq would
    // land first and refuse the earlier one.
    let mut pending = Vec::new();
    for seq in 1..=20 {
        let mut events = Vec::with_capacity(16);
        events.push(insert(seq));
        pending.push(ingest.submit(events).await.unwrap());
    }
    for (seq, pending) in (1..=20).zip(pending) {
        let (result, events) = pending.wait_reclaim().await;
        assert_eq!(result, Ok(Cursor::new(seq, seq)));
        assert!(events.is_empty());
        assert!(events.capacity() >= 16, "the batch's own buffer comes back");
    }
    assert_eq!(store.len(), 20);
    drop(ingest);
    task.await.unwrap().unwrap();
}
