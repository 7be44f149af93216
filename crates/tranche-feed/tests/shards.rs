//! A feed of several shards read through vector cursors, and a replica's store.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::{options, Book};
use tokio::time::Instant;
use tranche_feed::*;

/// A book whose order ids cannot collide with another shard's.
fn shard_book(seed: u64, shard: usize) -> Book {
    let mut book = Book::new(seed);
    book.next_id = 1_000_000 * (shard as u64 + 1);
    book
}

fn shard_of(order: &Order) -> usize {
    (order.id.0 / 1_000_000 - 1) as usize
}

#[test]
fn a_one_shard_feed_is_the_store_and_a_shard_added_later_joins_an_old_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let mut book0 = shard_book(1, 0);
    let old_cursor = {
        let (store, mut writer) = Store::open(dir.path(), options()).unwrap();
        writer.apply(&book0.batch(30)).unwrap();
        let page = store.read(Cursor::START, Filter::All, 10).unwrap();
        // The same store as a one-shard feed answers the same, with the same cursor.
        let shards = Shards::single(store.clone());
        let mut orders = Vec::new();
        let next = shards
            .read_into(&VectorCursor::START, Filter::All, 10, &mut orders)
            .unwrap();
        assert_eq!(orders, page.orders);
        assert_eq!(next.to_string(), page.next.to_string());
        page.next.to_string()
    };
    {
        // Opened as a one-shard feed: the store in the directory itself.
        let (shards, writers) = Shards::open(dir.path(), 1, options()).unwrap();
        assert_eq!(writers.len(), 1);
        assert_eq!(shards.orders(), book0.orders.len());
    }

    let (shards, mut writers) = Shards::open(dir.path(), 2, options()).unwrap();
    assert!(dir.path().join("shard-1").is_dir());
    let mut book1 = shard_book(2, 1);
    writers[1].apply(&book1.batch(20)).unwrap();
    writers[0].apply(&book0.batch(5)).unwrap();
    let cursor: VectorCursor = old_cursor.parse().unwrap();
    let mut got = Vec::new();
    let mut next = cursor;
    loop {
        let before = got.len();
        next = shards.read_into(&next, Filter::All, 7, &mut got).unwrap();
        if got.len() == before {
            break;
        }
    }
    // Everything of shard 1 (new to the cursor), and of shard 0 only what changed
    // after the cursor's position there.
    let old: Cursor = old_cursor.parse().unwrap();
    let mut want: Vec<Order> = book1.expected(Filter::All);
    want.extend(
        book0
            .expected(Filter::All)
            .into_iter()
            .filter(|o| o.position() > old),
    );
    let key = |o: &Order| (shard_of(o), o.position());
    got.sort_by_key(key);
    want.sort_by_key(key);
    assert_eq!(got, want);
    assert_eq!(next.shards(), 2);
    assert_eq!(next.to_string().len(), 51);
    drop((shards, writers));

    // A shard cannot be dropped: its orders would silently go unserved.
    let error = Shards::open(dir.path(), 1, options()).unwrap_err();
    assert!(
        matches!(&error, StoreError::Layout { problem, .. } if problem.contains("holds shard 1: open at least 2 shards")),
        "{error}"
    );
    assert!(matches!(
        Shards::open(dir.path(), MAX_SHARDS + 1, options()),
        Err(StoreError::Layout { .. })
    ));
}

#[test]
fn cursors_that_do_not_fit_the_feed_are_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, mut writers) = Shards::open(dir.path(), 2, options()).unwrap();
    let mut book = shard_book(3, 1);
    writers[1].apply(&book.batch(10)).unwrap();
    let mut out = Vec::new();
    let three = VectorCursor::from_positions(&[Cursor::START; 3]).unwrap();
    let error = shards
        .read_into(&three, Filter::All, 10, &mut out)
        .unwrap_err();
    assert_eq!(error, ShardReadError::Shards { got: 3, shards: 2 });
    assert!(error
        .to_string()
        .contains("names 3 shards, this feed has 2"));
    let ahead = VectorCursor::from_positions(&[Cursor::START, Cursor::new(11, 1)]).unwrap();
    assert!(matches!(
        shards.read_into(&ahead, Filter::All, 10, &mut out),
        Err(ShardReadError::Ahead { shard: 1, .. })
    ));
    // Too old in shard 1: the oldest cursor served keeps shard 0's position.
    writers[1]
        .apply(&[
            book.change(OrderId(2_000_001)),
            book.change(OrderId(2_000_002)),
        ])
        .unwrap();
    writers[1]
        .evict_terminal_through(Cursor::new(5, u64::MAX))
        .unwrap();
    let old = VectorCursor::from_positions(&[Cursor::START, Cursor::new(2, 2)]).unwrap();
    match shards.read_into(&old, Filter::All, 10, &mut out) {
        Err(ShardReadError::TooOld { shard: 1, oldest }) => {
            assert_eq!(oldest.position(0), Cursor::START);
            assert_eq!(oldest.position(1), Cursor::new(5, u64::MAX));
            shards
                .read_into(&oldest, Filter::All, 10, &mut out)
                .unwrap();
        }
        other => panic!("expected too old in shard 1, got {other:?}"),
    }
    assert!(out.is_empty() || out.iter().all(|o| o.position() > Cursor::new(5, u64::MAX)));
}

/// A firm's own newest cursor: the positions of its newest orders (START in a shard
/// where it has none), never another firm's, read on from as from the feed's newest,
/// and raised to a floor that passed its orders (an open order outlives eviction).
#[test]
fn a_filters_newest_cursor_names_only_its_orders_and_is_never_too_old() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, mut writers) = Shards::open(dir.path(), 2, options()).unwrap();
    let (mut book0, mut book1) = (shard_book(5, 0), shard_book(6, 1));
    let firm1 = Filter::Firm(FirmId(1));
    writers[0]
        .apply(&[
            book0.insert_for(1),
            book0.insert_for(2),
            book0.insert_for(2),
        ])
        .unwrap();
    writers[1].apply(&[book1.insert_for(2)]).unwrap();

    let mine = shards.newest_of(firm1).unwrap();
    assert_eq!(mine.shards(), 2);
    assert_eq!(mine.position(0), Cursor::new(1, 1), "firm 1's one order");
    assert_eq!(
        mine.position(1),
        Cursor::START,
        "firm 1 has none in shard 1"
    );
    assert_ne!(mine, shards.newest());
    let mut out = Vec::new();
    shards.read_into(&mine, firm1, 10, &mut out).unwrap();
    assert!(out.is_empty(), "nothing of firm 1's is newer: {out:?}");

    // What changes from now on reads as from the feed's newest.
    let newest = shards.newest();
    writers[1].apply(&[book1.insert_for(1)]).unwrap();
    writers[0].apply(&[book0.insert_for(2)]).unwrap();
    let mut from_newest = Vec::new();
    shards
        .read_into(&newest, firm1, 10, &mut from_newest)
        .unwrap();
    shards.read_into(&mine, firm1, 10, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out, from_newest);

    // Eviction past firm 1's open order in shard 0: its cursor stays served.
    let floor = Cursor::new(3, u64::MAX);
    writers[0].evict_terminal_through(floor).unwrap();
    let mine = shards.newest_of(firm1).unwrap();
    assert_eq!(mine.position(0), floor);
    shards.check(&mine).unwrap();

    let all = shards.newest_of(Filter::All).unwrap();
    assert_eq!(all, shards.newest());
}

/// The reference for one client: each shard's orders of its filter after its
/// position, straight from that shard's store.
fn reference(shards: &Shards, cursor: &VectorCursor, filter: Filter) -> Vec<Vec<Order>> {
    (0..shards.len())
        .map(|k| {
            let store = shards.shard(k).unwrap();
            common::read_all(&store, cursor.position(k), filter, 500)
        })
        .collect()
}

/// Checks one merged page against the reference taken just before it: from each
/// shard a prefix of its orders, heads taken oldest change first, the cursor moved
/// past exactly what was returned.
fn check_page(
    before: &[Vec<Order>],
    cursor: &VectorCursor,
    page: &[Order],
    next: &VectorCursor,
    limit: usize,
) {
    let available: usize = before.iter().map(Vec::len).sum();
    assert_eq!(
        page.len(),
        available.min(limit),
        "a full page or all there is"
    );
    let mut taken = vec![0; before.len()];
    for order in page {
        let shard = shard_of(order);
        // The oldest head among the shards is the one taken.
        for (k, list) in before.iter().enumerate() {
            if let Some(head) = list.get(taken[k]) {
                assert!(
                    order.updated_at <= head.updated_at,
                    "took {order:?} before the older {head:?}"
                );
            }
        }
        assert_eq!(
            Some(order),
            before[shard].get(taken[shard]),
            "not shard {shard}'s next"
        );
        taken[shard] += 1;
    }
    for (k, list) in before.iter().enumerate() {
        let expected = match taken[k] {
            0 => cursor.position(k),
            n => list[n - 1].position(),
        };
        assert_eq!(next.position(k), expected, "shard {k}'s position");
    }
}

#[test]
fn merged_reads_deliver_every_order_once_at_its_latest_version_in_shard_order() {
    for seed in 0..6 {
        let shard_count = 2 + (seed as usize % 2);
        let dir = tempfile::tempdir().unwrap();
        let (shards, mut writers) = Shards::open(dir.path(), shard_count, options()).unwrap();
        let mut books: Vec<Book> = (0..shard_count)
            .map(|k| shard_book(seed * 10 + k as u64, k))
            .collect();
        let mut rng = fastrand::Rng::with_seed(seed);
        let filters = [
            Filter::All,
            Filter::Firm(FirmId(2)),
            Filter::Instrument(InstrumentId(3)),
        ];
        // Per client: its cursor, and its view (the last version of each order).
        let mut clients: Vec<(Filter, VectorCursor, HashMap<OrderId, Order>)> = filters
            .iter()
            .map(|&f| (f, VectorCursor::START, HashMap::new()))
            .collect();
        let mut out = Vec::new();
        for _ in 0..200 {
            if rng.bool() {
                let k = rng.usize(..shard_count);
                let size = rng.usize(1..40);
                let batch = books[k].batch(size);
                writers[k].apply(&batch).unwrap();
            } else {
                let (filter, cursor, view) = &mut clients[rng.usize(..filters.len())];
                let limit = rng.usize(1..60);
                let before = reference(&shards, cursor, *filter);
                out.clear();
                let next = shards.read_into(cursor, *filter, limit, &mut out).unwrap();
                check_page(&before, cursor, &out, &next, limit);
                for order in &out {
                    assert!(filter.matches(order), "{order:?} is not {filter:?}'s");
                    if let Some(held) = view.get(&order.id) {
                        assert!(held.seq < order.seq, "a version no newer than one held");
                    }
                    view.insert(order.id, *order);
                }
                // Through its text form, as a client holds it.
                *cursor = next.to_string().parse().unwrap();
            }
        }
        // Each client catches up: its view is every order of its filter at its
        // latest version, across every shard.
        for (filter, cursor, view) in &mut clients {
            loop {
                out.clear();
                let next = shards.read_into(cursor, *filter, 50, &mut out).unwrap();
                for order in &out {
                    view.insert(order.id, *order);
                }
                if out.is_empty() {
                    break;
                }
                *cursor = next;
            }
            let mut want: Vec<Order> = books.iter().flat_map(|b| b.expected(*filter)).collect();
            let mut got: Vec<Order> = view.values().copied().collect();
            want.sort_by_key(|o| o.id);
            got.sort_by_key(|o| o.id);
            assert_eq!(got, want, "seed {seed}, {filter:?}");
        }
        // A client that fell behind receives each changed order once, at its
        // latest version.
        let mut all = Vec::new();
        let mut cursor = VectorCursor::START;
        loop {
            let before = all.len();
            cursor = shards
                .read_into(&cursor, Filter::All, 13, &mut all)
                .unwrap();
            if all.len() == before {
                break;
            }
        }
        let total: usize = books.iter().map(|b| b.orders.len()).sum();
        assert_eq!(all.len(), total, "seed {seed}: each order once");
        for order in &all {
            assert_eq!(books[shard_of(order)].orders[&order.id], *order);
        }
    }
}

/// Yields until `filter` has `n` waiters, failing after many rounds.
async fn until_waiting(shards: &Shards, filter: Filter, n: usize) {
    for _ in 0..10_000 {
        if shards.waiting(filter) == n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!(
        "expected {n} waiters on {filter:?}, got {}",
        shards.waiting(filter)
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_read_is_woken_by_a_write_to_its_key_in_either_shard() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, mut writers) = Shards::open(dir.path(), 2, options()).unwrap();
    let mut books = [shard_book(7, 0), shard_book(8, 1)];
    let firm = Filter::Firm(FirmId(1));
    for (k, writer) in writers.iter_mut().enumerate() {
        writer.apply(&[books[k].insert_for(1)]).unwrap();
    }
    for writer_shard in [1, 0] {
        let cursor = shards.newest();
        let waiter = {
            let shards = shards.clone();
            let deadline = Instant::now() + Duration::from_secs(30);
            tokio::spawn(async move { shards.wait_for(firm, &cursor, 1, deadline, None).await })
        };
        until_waiting(&shards, firm, 1).await;
        // Another firm's write, in either shard, does not wake it.
        writers[0].apply(&[books[0].insert_for(2)]).unwrap();
        writers[1].apply(&[books[1].insert_for(2)]).unwrap();
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        writers[writer_shard]
            .apply(&[books[writer_shard].insert_for(1)])
            .unwrap();
        let outcome = waiter.await.unwrap().unwrap();
        assert_eq!(
            outcome,
            WaitOutcome {
                ready: 1,
                wakeups: 1,
                timed_out: false
            },
            "woken once, by shard {writer_shard}'s write"
        );
    }
    // Two shards' writes numbered alike each still wake their waiter.
    let cursor = shards.newest();
    let waiter = {
        let shards = shards.clone();
        let deadline = Instant::now() + Duration::from_secs(30);
        tokio::spawn(async move {
            shards
                .wait_for(Filter::All, &cursor, 2, deadline, None)
                .await
        })
    };
    until_waiting(&shards, Filter::All, 1).await;
    writers[0].apply(&[books[0].insert_for(3)]).unwrap();
    writers[1].apply(&[books[1].insert_for(3)]).unwrap();
    let outcome = waiter.await.unwrap().unwrap();
    assert_eq!(outcome.ready, 2);
    assert!(!outcome.timed_out);
}

#[test]
fn a_replica_applies_versions_serves_unfiltered_reads_only_and_resumes_after_a_restart() {
    let primary_dir = tempfile::tempdir().unwrap();
    let replica_dir = tempfile::tempdir().unwrap();
    let (primary, mut writer) = Store::open(primary_dir.path(), options()).unwrap();
    let mut book = Book::new(11);
    writer.apply(&book.batch(200)).unwrap();

    let follow = |replica: &mut ReplicaWriter, primary: &Store| loop {
        let floor = primary.oldest();
        let mut orders = Vec::new();
        primary
            .read_for_replica(replica.position(), replica.known_floor(), 5, &mut orders)
            .unwrap();
        replica.apply(&orders, floor).unwrap();
        if orders.is_empty() {
            return;
        }
    };
    {
        let (shards, mut writers) = Shards::open_replica(replica_dir.path(), options()).unwrap();
        assert!(shards.is_replica());
        follow(&mut writers[0], &primary);
        writer.apply(&book.batch(100)).unwrap();
        follow(&mut writers[0], &primary);
        let mut out = Vec::new();
        shards
            .read_into(&VectorCursor::START, Filter::All, MAX_READ_LIMIT, &mut out)
            .unwrap();
        assert_eq!(out, book.expected(Filter::All));
        let error = shards
            .read_into(&VectorCursor::START, Filter::Firm(FirmId(1)), 10, &mut out)
            .unwrap_err();
        assert_eq!(
            error,
            ShardReadError::Unfiltered {
                filter: Filter::Firm(FirmId(1))
            }
        );
        assert!(error.to_string().contains("unfiltered reads only"));
    }
    // Reopened: it resumes from where it was, and the primary's eviction follows.
    writer.apply(&book.batch(100)).unwrap();
    let (shards, mut writers) = Shards::open_replica(replica_dir.path(), options()).unwrap();
    assert_eq!(writers[0].position().seq, 300);
    follow(&mut writers[0], &primary);
    let floor = primary.newest();
    assert!(writer.evict_terminal_through(floor).unwrap() > 0);
    follow(&mut writers[0], &primary);
    assert_eq!(shards.oldest().position(0), floor);
    let everything = |store: &Store| {
        store
            .read(Cursor::START, Filter::All, MAX_READ_LIMIT)
            .unwrap()
    };
    assert_eq!(everything(&shards.shard(0).unwrap()), everything(&primary));

    // Starting over forgets everything, even across a crash half way (the marker),
    // and reads the primary again in pages from below its floor.
    assert!(primary.len() > 5 && primary.oldest() > Cursor::START);
    writers[0].reset().unwrap();
    assert!(shards.shard(0).unwrap().is_empty());
    follow(&mut writers[0], &primary);
    assert_eq!(everything(&shards.shard(0).unwrap()), everything(&primary));
    assert_eq!(shards.oldest().position(0), floor);
    // A replica whose floor is not the primary's may hold orders the primary has
    // evicted unseen: it is refused below the floor.
    assert!(matches!(
        primary.read_for_replica(Cursor::new(3, 3), Cursor::START, 10, &mut Vec::new()),
        Err(ReadError::TooOld { .. })
    ));
    drop((shards, writers));
    std::fs::write(replica_dir.path().join("RESYNC"), b"").unwrap();
    let (shards, writers) = Shards::open_replica(replica_dir.path(), options()).unwrap();
    assert!(shards.shard(0).unwrap().is_empty());
    assert_eq!(writers[0].position(), Cursor::START);
    assert!(!replica_dir.path().join("RESYNC").exists());
}
