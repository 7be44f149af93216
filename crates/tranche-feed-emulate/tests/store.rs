//! The book against the real store: every event it makes is accepted, and the final
//! state replayed from the seed is exactly what the store holds.

use tranche_feed::{Cursor, FeedOptions, Filter, Order, Store, MAX_READ_LIMIT};
use tranche_feed_emulate::{Book, BookConfig, ShardExpected};

fn everything(store: &Store) -> Vec<Order> {
    let mut out = Vec::new();
    let mut cursor = Cursor::START;
    loop {
        let page = store.read(cursor, Filter::All, MAX_READ_LIMIT).unwrap();
        if page.orders.is_empty() {
            return out;
        }
        cursor = page.next;
        out.extend(page.orders);
    }
}

#[test]
fn the_store_accepts_every_event_and_holds_the_replayed_final_state() {
    let config = BookConfig {
        resting_orders: 500,
        burst_every: 3_000,
        burst_length: 500,
        ..BookConfig::default()
    };
    for shard in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
        let mut book = Book::new(config.clone(), 42, shard);
        let events = 20_000u64;
        let mut sent = 0;
        let mut batch = Vec::new();
        // Batches of changing sizes: the book does not depend on them.
        while sent < events {
            let size = (1 + sent % 97).min(events - sent);
            batch.clear();
            for _ in 0..size {
                batch.push(book.next(1_700_000_000_000_000_000 + sent).event);
                sent += 1;
            }
            writer
                .apply(&batch)
                .unwrap_or_else(|e| panic!("shard {shard}, batch ending at {sent}: {e}"));
        }
        let held = everything(&store);
        assert!(held.len() > 5_000, "{}", held.len());
        let from_store = ShardExpected::from_orders(&held);
        let replayed = ShardExpected::replay(&config, 42, shard, events);
        assert_eq!(replayed.len(), from_store.len());
        for order in &held {
            assert_eq!(
                replayed.get(order.id),
                from_store.get(order.id),
                "order {}",
                order.id
            );
        }
        assert_eq!(
            replayed.last_position(Filter::All),
            held.last().unwrap().position()
        );
    }
}
