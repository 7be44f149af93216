//! The checker on views made by hand: a right one passes, and a view that lost an
//! order, got rows out of order, a cursor that went back or another firm's order is
//! caught.

use std::collections::HashMap;

use tranche_feed::{Cursor, Filter, FirmId, Order, OrderId};
use tranche_feed_emulate::{Book, BookConfig, ShardExpected, ShardView};

/// The final state of 5,000 events (every order at its last version) in feed order,
/// and the state as the checker knows it.
fn final_state() -> (Vec<Order>, ShardExpected) {
    let config = BookConfig {
        firms: 3,
        ..BookConfig::default()
    };
    let mut book = Book::new(config.clone(), 9, 0);
    let mut orders: HashMap<OrderId, Order> = HashMap::new();
    for stamp in 1..=5_000 {
        let step = book.next(stamp);
        orders.insert(step.order.id, step.order);
    }
    let mut orders: Vec<Order> = orders.into_values().collect();
    orders.sort_by_key(Order::position);
    let expected = ShardExpected::replay(&config, 9, 0, 5_000);
    (orders, expected)
}

/// Feeds `orders` (those of `filter`) to a view in pages of 100, each page's next
/// cursor its last row's position.
fn feed(view: &mut ShardView, orders: &[Order]) {
    let filter = view.filter();
    let mine: Vec<Order> = orders
        .iter()
        .copied()
        .filter(|o| filter.matches(o))
        .collect();
    for page in mine.chunks(100) {
        view.accept(page.last().unwrap().position(), page);
    }
}

#[test]
fn a_right_view_passes() {
    let (orders, expected) = final_state();
    for filter in [Filter::All, Filter::Firm(FirmId(2))] {
        let mut view = ShardView::new(filter);
        feed(&mut view, &orders);
        view.accept(view.cursor(), &[]); // an empty answer
        let verdict = view.compare(&expected);
        assert!(verdict.expected > 100, "{verdict:?}");
        assert_eq!((verdict.omissions, verdict.mismatches), (0, 0));
        assert_eq!(
            (view.reorderings, view.misfiltered),
            (0, 0),
            "{:?}",
            view.problems
        );
        assert_eq!(view.cursor(), expected.last_position(filter));
        assert_eq!(view.empty_pages, 1);
    }
}

#[test]
fn a_lost_order_is_an_omission() {
    let (mut orders, expected) = final_state();
    let lost = orders.remove(1_234);
    let mut view = ShardView::new(Filter::All);
    feed(&mut view, &orders);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (1, 0));
    assert_eq!(view.reorderings, 0);
    let said = view.describe_differences(&expected);
    assert!(said[0].contains(&format!("order {} ", lost.id)), "{said:?}");
}

#[test]
fn a_missed_last_version_is_an_omission() {
    let (orders, expected) = final_state();
    // An order that changed after its insert: the view got an older version only.
    let changed = orders.iter().position(|o| o.seq != o.rec).unwrap();
    let mut older = orders.clone();
    older[changed].seq -= 1; // not a real version: its seq is below the final one
    older[changed].filled = 0;
    older.sort_by_key(Order::position);
    let mut view = ShardView::new(Filter::All);
    feed(&mut view, &older);
    let verdict = view.compare(&expected);
    assert_eq!(verdict.omissions, 1, "{verdict:?}");
}

#[test]
fn rows_out_of_order_are_reorderings() {
    let (orders, expected) = final_state();
    let mut swapped = orders.clone();
    swapped.swap(500, 501);
    let mut view = ShardView::new(Filter::All);
    feed(&mut view, &swapped);
    assert_eq!(view.reorderings, 1, "{:?}", view.problems);
    // Every order still arrived: out of order, not lost.
    assert_eq!(view.compare(&expected).omissions, 0);
    assert!(
        view.problems[0].contains("received after"),
        "{:?}",
        view.problems
    );

    // A version no newer than one already held, at a position after the cursor.
    let mut view = ShardView::new(Filter::All);
    feed(&mut view, &orders);
    let newer = Order {
        seq: orders.last().unwrap().seq + 1,
        ..orders[10]
    };
    assert_eq!(view.accept(newer.position(), &[newer]), 0);
    let again = Order {
        rec: newer.rec + 1,
        ..newer
    };
    assert_eq!(view.accept(again.position(), &[again]), 1);
    assert!(
        view.problems.last().unwrap().contains("after seq"),
        "{:?}",
        view.problems
    );
}

#[test]
fn a_cursor_that_goes_back_is_a_reordering() {
    let (orders, _) = final_state();
    let mut view = ShardView::new(Filter::All);
    let page = &orders[..10];
    let behind = Cursor::new(page[8].seq, page[8].rec);
    assert_eq!(view.accept(behind, page), 1);
    // Reading on from the cursor given, the last row comes again: out of order too.
    assert_eq!(view.accept(page[9].position(), &page[9..]), 1);
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
        .find(|o| o.firm != FirmId(1))
        .unwrap();
    let mut page = mine.clone();
    page.push(Order {
        seq: mine.last().unwrap().seq + 1,
        ..foreign
    });
    let mut view = ShardView::new(Filter::Firm(FirmId(1)));
    view.accept(page.last().unwrap().position(), &page);
    assert_eq!(view.misfiltered, 1);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 1));
}

#[test]
fn changed_contents_at_the_final_seq_are_a_mismatch() {
    let (mut orders, expected) = final_state();
    orders[77].price += 1;
    let mut view = ShardView::new(Filter::All);
    feed(&mut view, &orders);
    let verdict = view.compare(&expected);
    assert_eq!((verdict.omissions, verdict.mismatches), (0, 1));
}
