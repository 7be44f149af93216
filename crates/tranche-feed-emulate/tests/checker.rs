//! The checker on views made by hand, over two shards merged as a server of two shards
//! merges them (pages by vector cursor): a right one passes, rows of different shards
//! may come in any order, and a view that lost an order, got two rows of a shard out
//! of order, a repeated version, a cursor that went back in one shard, another firm's
//! order, a row of a shard it does not read or changed contents is caught.

use std::collections::HashMap;

use tranche_feed::{Cursor, Filter, FirmId, Order, OrderId, VectorCursor};
use tranche_feed_emulate::{shard_of, Book, BookConfig, Expected, FeedView};

const SEED: u64 = 9;
const EVENTS: u64 = 5_000;

fn config() -> BookConfig {
    BookConfig {
        firms: 3,
        ..BookConfig::default()
    }
}

/// The final state of two shards of 5,000 events each (every order at its last
/// version) merged oldest change first, as a read of a two-shard feed from the start
/// returns it, and the final state as the checker knows it.
fn final_state() -> (Vec<Order>, Expected) {
    let mut merged = Vec::new();
    for shard in 0..2u32 {
        let mut book = Book::new(config(), SEED, shard);
        let mut orders: HashMap<OrderId, Order> = HashMap::new();
        for i in 1..=EVENTS {
            // Interleaved stamps: shard 0 even, shard 1 odd.
            let step = book.next(2 * i + u64::from(shard));
            orders.insert(step.order.id, step.order);
        }
        merged.extend(orders.into_values());
    }
    merged.sort_by_key(|o| (o.updated_at, shard_of(o.id)));
    let expected = Expected::replay(&config(), SEED, &[EVENTS, EVENTS]);
    (merged, expected)
}

/// The cursor after `rows` read from `from`: each shard's position moved to its last
/// row.
fn after(from: VectorCursor, rows: &[Order]) -> VectorCursor {
    let mut next = from;
    for order in rows {
        let shard = shard_of(order.id);
        next.set(shard, next.position(shard).max(order.position()));
    }
    // A server spells out every shard.
    VectorCursor::from_positions(&[next.position(0), next.position(1)]).unwrap()
}

/// Feeds `orders` (those of the view's filter) to a view in pages of 100, each page's
/// next cursor moving each shard past its rows in the page.
fn feed(view: &mut FeedView, orders: &[Order]) {
    let filter = view.filter();
    let mine: Vec<Order> = orders
        .iter()
        .copied()
        .filter(|o| filter.matches(o))
        .collect();
    for page in mine.chunks(100) {
        let next = after(view.cursor(), page);
        view.accept(&next, page);
    }
}

#[test]
fn a_right_view_passes_and_reaches_the_end_of_both_shards() {
    let (orders, expected) = final_state();
    for filter in [Filter::All, Filter::Firm(FirmId(2))] {
        let mut view = FeedView::new(filter, 0..2);
        feed(&mut view, &orders);
        view.accept(&view.cursor(), &[]); // an empty answer
        let verdict = view.compare(&expected);
        assert!(verdict.expected > 200, "{verdict:?}");
        assert_eq!((verdict.omissions, verdict.mismatches), (0, 0));
        assert_eq!(
            (view.reorderings, view.misfiltered),
            (0, 0),
            "{:?}",
            view.problems
        );
        let end = expected.end_cursor(filter, 0..2);
        assert!(view.reached(&end));
        assert_eq!(view.cursor(), end);
        assert_eq!(view.empty_pages, 1);
        // Both shards were read.
        assert!(end.position(0) > Cursor::START && end.position(1) > Cursor::START);
    }
}

#[test]
fn rows_of_different_shards_may_come_in_any_order() {
    let (mut orders, expected) = final_state();
    // Shard 1's rows first, then shard 0's: each shard still ascends.
    orders.sort_by_key(|o| std::cmp::Reverse(shard_of(o.id)));
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &orders);
    assert_eq!(view.reorderings, 0, "{:?}", view.problems);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 0));
}

#[test]
fn a_lost_order_is_an_omission_naming_its_shard() {
    let (mut orders, expected) = final_state();
    let at = orders.iter().position(|o| shard_of(o.id) == 1).unwrap() + 1_000;
    let lost = orders.remove(at);
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &orders);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (1, 0));
    assert_eq!(view.reorderings, 0);
    let said = view.describe_differences(&expected);
    assert!(
        said[0].contains(&format!("order {} (shard {}", lost.id, shard_of(lost.id))),
        "{said:?}"
    );
}

#[test]
fn a_missed_last_version_is_an_omission() {
    let (orders, expected) = final_state();
    // An order of shard 1 that changed after its insert: the view got an older
    // version only.
    let changed = orders
        .iter()
        .position(|o| o.seq != o.rec && shard_of(o.id) == 1)
        .unwrap();
    let mut older = orders.clone();
    older[changed].seq -= 1; // not a real version: its seq is below the final one
    older[changed].filled = 0;
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &older);
    let verdict = view.compare(&expected);
    assert_eq!(verdict.omissions, 1, "{verdict:?}");
}

#[test]
fn two_rows_of_a_shard_out_of_order_are_a_reordering() {
    let (orders, expected) = final_state();
    // Two rows of shard 0, consecutive in that shard, swap places in the merged
    // feed (rows of shard 1 may sit between them).
    let of_zero: Vec<usize> = orders
        .iter()
        .enumerate()
        .filter(|(_, o)| shard_of(o.id) == 0)
        .map(|(i, _)| i)
        .collect();
    let (a, b) = (of_zero[500], of_zero[501]);
    let mut swapped = orders.clone();
    swapped.swap(a, b);
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &swapped);
    assert_eq!(view.reorderings, 1, "{:?}", view.problems);
    // Every order still arrived: out of order, not lost.
    assert_eq!(view.compare(&expected).omissions, 0);
    assert!(
        view.problems[0].contains("of shard 0") && view.problems[0].contains("received after"),
        "{:?}",
        view.problems
    );
}

#[test]
fn a_version_no_newer_than_one_held_is_a_reordering() {
    let (orders, _) = final_state();
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &orders);
    let last_of_one = orders
        .iter()
        .filter(|o| shard_of(o.id) == 1)
        .map(|o| o.seq)
        .max()
        .unwrap();
    let order = *orders.iter().find(|o| shard_of(o.id) == 1).unwrap();
    let newer = Order {
        seq: last_of_one + 1,
        ..order
    };
    assert_eq!(view.accept(&after(view.cursor(), &[newer]), &[newer]), 0);
    // The same version again, at a later position of its shard.
    let again = Order {
        rec: newer.rec + 1,
        ..newer
    };
    assert_eq!(view.accept(&after(view.cursor(), &[again]), &[again]), 1);
    assert!(
        view.problems.last().unwrap().contains("after seq"),
        "{:?}",
        view.problems
    );
}

#[test]
fn a_cursor_that_goes_back_in_one_shard_is_a_reordering() {
    let (orders, _) = final_state();
    let mut view = FeedView::new(Filter::All, 0..2);
    let page = &orders[..40];
    let mut next = after(VectorCursor::START, page);
    // Shard 1's position one row back; shard 0's right.
    let ones: Vec<&Order> = page.iter().filter(|o| shard_of(o.id) == 1).collect();
    next.set(1, ones[ones.len() - 2].position());
    assert_eq!(view.accept(&next, page), 1);
    assert!(
        view.problems[0].contains("of shard 1 behind"),
        "{:?}",
        view.problems
    );
    // Reading on from the cursor given, shard 1's last row comes again: out of order
    // too (a repeated version); shard 0 is unaffected.
    let again = *ones[ones.len() - 1];
    assert_eq!(view.accept(&after(view.cursor(), &[again]), &[again]), 1);
    // A cursor that goes back with no rows at all.
    let mut back = view.cursor();
    back.set(0, Cursor::START);
    assert_eq!(view.accept(&back, &[]), 1);
}

#[test]
fn another_firms_order_is_misfiltered_and_a_mismatch() {
    let (orders, expected) = final_state();
    let mine: Vec<Order> = orders
        .iter()
        .copied()
        .filter(|o| o.firm == FirmId(1))
        .collect();
    let foreign = orders
        .iter()
        .copied()
        .rfind(|o| o.firm != FirmId(1) && shard_of(o.id) == 0)
        .unwrap();
    let mut page = mine.clone();
    let last_of_zero = orders
        .iter()
        .filter(|o| shard_of(o.id) == 0)
        .map(|o| o.seq)
        .max()
        .unwrap();
    page.push(Order {
        seq: last_of_zero + 1,
        ..foreign
    });
    let mut view = FeedView::new(Filter::Firm(FirmId(1)), 0..2);
    view.accept(&after(VectorCursor::START, &page), &page);
    assert_eq!(view.misfiltered, 1);
    assert_eq!(view.reorderings, 0, "{:?}", view.problems);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 1));
}

#[test]
fn a_row_of_a_shard_the_target_does_not_serve_is_a_mismatch() {
    // Shard 1 on a server of its own: its view reads shard 1 alone, by a one-shard
    // cursor.
    let (orders, expected) = final_state();
    let ones: Vec<Order> = orders
        .iter()
        .copied()
        .filter(|o| shard_of(o.id) == 1)
        .collect();
    let mut view = FeedView::new(Filter::All, 1..2);
    let mut cursor = VectorCursor::START;
    for page in ones.chunks(100) {
        cursor = VectorCursor::from(page.last().unwrap().position());
        view.accept(&cursor, page);
    }
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 0));
    assert!(view.reached(&expected.end_cursor(Filter::All, 1..2)));
    assert_eq!(view.reorderings, 0, "{:?}", view.problems);
    // A row of shard 0 there.
    let stray = *orders.iter().find(|o| shard_of(o.id) == 0).unwrap();
    view.accept(&cursor, &[stray]);
    assert!(
        view.problems
            .last()
            .unwrap()
            .contains("not one of the shards read"),
        "{:?}",
        view.problems
    );
    assert_eq!(view.compare(&expected).mismatches, 1);
}

#[test]
fn changed_contents_at_the_final_seq_are_a_mismatch() {
    let (mut orders, expected) = final_state();
    let at = orders.iter().rposition(|o| shard_of(o.id) == 1).unwrap();
    orders[at].price += 1;
    let mut view = FeedView::new(Filter::All, 0..2);
    feed(&mut view, &orders);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 1));
}
