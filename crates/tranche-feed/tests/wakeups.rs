//! Per-key wake-ups of long-polling readers, and readers polling while a core writes.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{options, Book};
use tokio::time::Instant;
use tranche_feed::*;

/// Yields until `filter` has `n` waiters, failing after many rounds.
async fn until_waiting(store: &Store, filter: Filter, n: usize) {
    tranche_test_support::poll_until(
        &format!("{n} waiters on {filter:?}"),
        Duration::from_secs(10),
        || {
            let waiting = store.waiting(filter);
            if waiting == n {
                Ok(())
            } else {
                Err(format!("{waiting} waiting"))
            }
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_woken_only_by_writes_touching_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(20);
    let a_order = book.insert_for(1);
    writer.apply(&[a_order, book.insert_for(2)]).unwrap();
    let cursor = store.newest();
    let deadline = Instant::now() + Duration::from_secs(5);
    let firm_a = Filter::Firm(FirmId(1));
    let firm_b = Filter::Firm(FirmId(2));

    let wait = |filter, min_batch| {
        let store = store.clone();
        tokio::spawn(async move { store.wait_for(filter, cursor, min_batch, deadline).await })
    };
    let on_a = wait(firm_a, 1);
    let on_b = wait(firm_b, 1);
    let on_all = wait(Filter::All, 4);
    until_waiting(&store, firm_a, 1).await;
    until_waiting(&store, firm_b, 1).await;
    until_waiting(&store, Filter::All, 1).await;

    // Three orders of firm B in one write: B's waiter is woken once; A's is not.
    let b_write = [book.insert_for(2), book.insert_for(2), book.insert_for(2)];
    writer.apply(&b_write).unwrap();
    let b = on_b.await.unwrap().unwrap();
    assert_eq!(
        b,
        WaitOutcome {
            ready: 1,
            wakeups: 1,
            timed_out: false
        }
    );
    assert_eq!(store.waiting(firm_a), 1);
    assert_eq!(store.signals_sent(firm_a), 0);
    assert_eq!(store.signals_sent(Filter::All), 1);

    // A write touching firm A (and B) wakes A's waiter once.
    let change = book.change(a_order.order_id());
    writer.apply(&[change, book.insert_for(2)]).unwrap();
    let a = on_a.await.unwrap().unwrap();
    assert_eq!(
        a,
        WaitOutcome {
            ready: 1,
            wakeups: 1,
            timed_out: false
        }
    );
    // The unfiltered waiter was woken by both writes and had its 4 by the second.
    let all = on_all.await.unwrap().unwrap();
    assert_eq!(
        all,
        WaitOutcome {
            ready: 4,
            wakeups: 2,
            timed_out: false
        }
    );
    // Unused wake-ups are dropped with their last waiter.
    assert_eq!(store.waiting(firm_a), 0);
    assert_eq!(store.signals_sent(Filter::All), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_returns_at_its_deadline_with_what_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
    let mut book = Book::new(21);
    let start = Instant::now();
    let deadline = start + Duration::from_millis(100);
    let filter = Filter::Firm(FirmId(3));
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.wait_for(filter, Cursor::START, 5, deadline).await })
    };
    until_waiting(&store, filter, 1).await;
    writer
        .apply(&[book.insert_for(3), book.insert_for(3), book.insert_for(1)])
        .unwrap();
    let outcome = waiter.await.unwrap().unwrap();
    assert_eq!(
        outcome,
        WaitOutcome {
            ready: 2,
            wakeups: 1,
            timed_out: true
        }
    );
    assert!(Instant::now() >= deadline);

    // Enough already there: no wait at all.
    let now = store
        .wait_for(filter, Cursor::START, 2, Instant::now())
        .await
        .unwrap();
    assert_eq!(now.ready, 2);
    assert!(!now.timed_out);
    // A cursor the store cannot serve is an error, not a wait.
    let ahead = Cursor::new(1_000, 1);
    assert!(matches!(
        store.wait_for(filter, ahead, 1, deadline).await,
        Err(ReadError::Ahead { .. })
    ));
}

/// A seeded book written in batches while long-polling readers (unfiltered and
/// filtered) follow it: each ends with exactly the core's final state for its filter,
/// having seen positions only in increasing order and each order's versions in
/// increasing `seq`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_polling_during_writes_end_with_the_cores_final_state() {
    for seed in [31, 32, 33] {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut writer) = Store::open(
            dir.path(),
            FeedOptions {
                durability: Durability::Never,
                snapshot_after_bytes: Some(64 << 10),
                zero_ahead: None,
            },
        )
        .unwrap();
        let mut book = Book::new(seed);
        let mut rng = fastrand::Rng::with_seed(seed);
        let batches: Vec<Vec<Event>> = (0..300)
            .map(|_| {
                let size = rng.usize(1..=40);
                book.batch(size)
            })
            .collect();

        let filters = [
            Filter::All,
            Filter::Firm(FirmId(2)),
            Filter::Broker(BrokerId(31)),
            Filter::Instrument(InstrumentId(7)),
        ];
        let mut readers = Vec::new();
        for filter in filters {
            let expected = book.expected(filter);
            let store = store.clone();
            readers.push(tokio::spawn(async move {
                let end = expected.last().map_or(Cursor::START, Order::position);
                let mut seen: HashMap<OrderId, Order> = HashMap::new();
                let mut cursor = Cursor::START;
                while cursor < end {
                    let deadline = Instant::now() + Duration::from_secs(20);
                    let outcome = store.wait_for(filter, cursor, 1, deadline).await.unwrap();
                    assert!(
                        !outcome.timed_out,
                        "{filter:?}: nothing after {cursor:?} within 20 s, expected up to {end:?}"
                    );
                    let page = store.read(cursor, filter, 17).unwrap();
                    for order in &page.orders {
                        assert!(order.position() > cursor, "{filter:?}: reordered");
                        assert!(filter.matches(order));
                        cursor = order.position();
                        if let Some(before) = seen.insert(order.id, *order) {
                            assert!(before.seq < order.seq, "{filter:?}: a version twice");
                        }
                    }
                    assert_eq!(page.next, cursor);
                }
                let expected: HashMap<OrderId, Order> =
                    expected.into_iter().map(|o| (o.id, o)).collect();
                assert_eq!(seen, expected, "{filter:?}");
            }));
        }
        let writing = tokio::task::spawn_blocking(move || {
            for batch in &batches {
                writer.apply(batch).unwrap();
            }
            writer
        });
        let writer = writing.await.unwrap();
        for reader in readers {
            reader.await.unwrap();
        }
        drop(writer);
        // And the same state comes back from disk.
        let (reopened, _w) = Store::open(dir.path(), options()).unwrap();
        assert_eq!(
            common::read_all(&reopened, Cursor::START, Filter::All, 100),
            book.expected(Filter::All)
        );
        drop(store);
    }
}
