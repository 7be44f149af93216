//! A seeded trading core for the tests: it emits realistic events (orders amended or
//! filled one to three times, then filled or cancelled) and keeps its own view of every
//! order's current state, computed independently of the store.

#![allow(dead_code)]

use std::collections::HashMap;

use tranche_feed::*;

pub struct Book {
    pub rng: fastrand::Rng,
    pub seq: u64,
    pub rec: u64,
    now: u64,
    pub next_id: u64,
    open: Vec<OrderId>,
    changes_left: HashMap<OrderId, u32>,
    /// The core's view: every order's current state.
    pub orders: HashMap<OrderId, Order>,
    pub firms: u32,
}

impl Book {
    pub fn new(seed: u64) -> Book {
        Book {
            rng: fastrand::Rng::with_seed(seed),
            seq: 0,
            rec: 0,
            now: 1_700_000_000_000_000_000,
            next_id: 1000,
            open: Vec::new(),
            changes_left: HashMap::new(),
            orders: HashMap::new(),
            firms: 5,
        }
    }

    /// Continues after what a reopened store holds.
    pub fn resume(&mut self, store: &Store) {
        let (seq, rec) = store.marks();
        assert_eq!((seq, rec), (self.seq, self.rec));
    }

    fn tick(&mut self) -> u64 {
        self.now += self.rng.u64(1..5_000);
        self.now
    }

    /// An insert for firm `firm` (random broker and instrument).
    pub fn insert_for(&mut self, firm: u32) -> Event {
        self.seq += 1;
        self.rec += 1;
        self.next_id += 1;
        let id = OrderId(self.next_id);
        let new = NewOrder {
            seq: self.seq,
            rec: self.rec,
            id,
            firm: FirmId(firm),
            broker: BrokerId(firm * 10 + self.rng.u32(1..=3)),
            instrument: InstrumentId(self.rng.u32(1..=12)),
            side: if self.rng.bool() {
                Side::Buy
            } else {
                Side::Sell
            },
            price: self.rng.i64(9_000..11_000),
            quantity: self.rng.u64(1..=20) * 100,
            created_at: self.tick(),
        };
        self.orders.insert(
            id,
            Order {
                id,
                firm: new.firm,
                broker: new.broker,
                instrument: new.instrument,
                side: new.side,
                price: new.price,
                quantity: new.quantity,
                filled: 0,
                status: Status::New,
                created_at: new.created_at,
                updated_at: new.created_at,
                seq: new.seq,
                rec: new.rec,
            },
        );
        self.open.push(id);
        self.changes_left.insert(id, self.rng.u32(1..=3));
        Event::Insert(new)
    }

    pub fn insert(&mut self) -> Event {
        let firm = self.rng.u32(1..=self.firms);
        self.insert_for(firm)
    }

    /// A change to open order `id`: amend or partial fill, or (on its last change)
    /// fill or cancel.
    pub fn change(&mut self, id: OrderId) -> Event {
        let mut order = self.orders[&id];
        let left = self.changes_left[&id];
        self.seq += 1;
        let now = self.tick();
        if left <= 1 {
            if self.rng.u8(..100) < 60 {
                order.filled = order.quantity;
                order.status = Status::Filled;
            } else {
                order.status = Status::Cancelled;
            }
            self.open.retain(|o| *o != id);
            self.changes_left.remove(&id);
        } else {
            if self.rng.bool() && order.quantity - order.filled > 1 {
                order.filled += self.rng.u64(1..order.quantity - order.filled);
                order.status = Status::PartiallyFilled;
            } else {
                order.price += self.rng.i64(-50..=50);
                order.quantity += self.rng.u64(0..=5) * 100;
                if order.filled == 0 {
                    order.status = Status::Amended;
                }
            }
            self.changes_left.insert(id, left - 1);
        }
        order.updated_at = now;
        order.seq = self.seq;
        self.orders.insert(id, order);
        Event::Change(OrderChange {
            seq: order.seq,
            id,
            price: order.price,
            quantity: order.quantity,
            filled: order.filled,
            status: order.status,
            updated_at: order.updated_at,
        })
    }

    /// One realistic event: mostly changes once the book has open orders.
    pub fn event(&mut self) -> Event {
        if self.open.len() < 20 || self.rng.u8(..100) < 35 {
            self.insert()
        } else {
            let id = self.open[self.rng.usize(..self.open.len())];
            self.change(id)
        }
    }

    pub fn batch(&mut self, size: usize) -> Vec<Event> {
        (0..size).map(|_| self.event()).collect()
    }

    /// The core's orders in feed order, optionally filtered.
    pub fn expected(&self, filter: Filter) -> Vec<Order> {
        let mut orders: Vec<Order> = self
            .orders
            .values()
            .filter(|o| filter.matches(o))
            .copied()
            .collect();
        orders.sort_by_key(|o| o.position());
        orders
    }
}

/// Everything after `cursor` for `filter`, page by page.
pub fn read_all(store: &Store, cursor: Cursor, filter: Filter, page: usize) -> Vec<Order> {
    let mut out = Vec::new();
    let mut cursor = cursor;
    loop {
        let next = store.read_into(cursor, filter, page, &mut out).unwrap();
        if next == cursor {
            return out;
        }
        cursor = next;
    }
}

pub fn options() -> FeedOptions {
    FeedOptions {
        durability: Durability::EveryWrite,
        snapshot_after_bytes: None,
        zero_ahead: Some(64 << 10),
    }
}
