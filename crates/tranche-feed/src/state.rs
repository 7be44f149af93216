//! The in-memory current state: every order once, at its latest version, in
//! `(seq, rec)` order, with one index per firm, broker account and instrument.

use std::collections::HashMap;
use std::hash::Hash;
use std::ops::ControlFlow;

use crate::cursor::Cursor;
use crate::model::{Filter, Order, OrderId};
use crate::positions::{live, Positions};
use crate::validate::Marks;

/// A hash map on rustc's hash (`rustc-hash`): the keys are small integer ids from the
/// exchange's own cores, not from an adversary, and SipHash cost a noticeable share
/// of the apply path.
pub(crate) type FastMap<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Every order held, by id: the one map that grows with the book. It grows
/// incrementally (`griddle`): a doubling of a few hundred thousand orders at once
/// stopped the writer, and every reader waiting on it, for 20–130 ms on this project's
/// host (most of it faulting in the new table), where each insert now carries a few
/// entries over.
pub(crate) type OrderMap = griddle::HashMap<OrderId, Order, rustc_hash::FxBuildHasher>;

/// Why a cursor cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The cursor is before the eviction floor: orders changed after it may have been
    /// evicted, so reading on could miss them. Resume from `oldest` (accepting that
    /// gap) or re-read everything from [`Cursor::START`]. The HTTP layer answers 410.
    #[error("cursor {cursor} is older than the oldest the store can serve ({oldest})")]
    TooOld {
        /// The cursor given.
        cursor: Cursor,
        /// The oldest cursor the store serves (besides `Cursor::START`).
        oldest: Cursor,
    },
    /// The cursor is past every change the store holds: it comes from another store,
    /// or from changes lost with a crash under a relaxed durability policy.
    #[error("cursor {cursor} is past the newest change the store holds ({newest})")]
    Ahead {
        /// The cursor given.
        cursor: Cursor,
        /// The newest position in the store.
        newest: Cursor,
    },
}

#[derive(Default)]
pub(crate) struct State {
    /// Every order at its latest version.
    orders: OrderMap,
    /// Their positions, in order (see [`Positions`] for why not a tree).
    by_pos: Positions,
    firms: FastMap<crate::FirmId, Positions>,
    brokers: FastMap<crate::BrokerId, Positions>,
    instruments: FastMap<crate::InstrumentId, Positions>,
    pub marks: Marks,
    pub floor: Cursor,
    /// A replica's state keeps no per-key index: it serves unfiltered reads only, and
    /// each upsert then touches one list of positions instead of four.
    pub unindexed: bool,
    /// The highest `seq` a replica had before it started over: its readers' cursors
    /// up to it are not from ahead of the store while it catches up again.
    pub kept_seq: u64,
}

fn kill_position<K: Hash + Eq>(
    index: &mut FastMap<K, Positions>,
    key: K,
    old: Cursor,
    orders: &OrderMap,
) {
    if let Some(positions) = index.get_mut(&key) {
        positions.kill(old, orders);
        if positions.live() == 0 {
            index.remove(&key);
        }
    }
}

impl State {
    /// The latest version of an order.
    pub fn get(&self, id: OrderId) -> Option<&Order> {
        self.orders.get(&id)
    }

    /// How many orders the store holds.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// The position of the newest order version (`START` when empty).
    pub fn newest(&self) -> Cursor {
        self.by_pos.newest(&self.orders).unwrap_or(Cursor::START)
    }

    /// The position of the newest order version passing `filter`, raised to the floor
    /// (a cursor below it is too old), or `START` when there is neither.
    pub fn newest_of(&self, filter: Filter) -> Cursor {
        self.positions(filter)
            .and_then(|positions| positions.newest(&self.orders))
            .unwrap_or(Cursor::START)
            .max(self.floor)
    }

    /// Puts `order` at the end of the order and of its indexes, removing its previous
    /// version. A version not newer than the one held is ignored (replay of a log
    /// record a snapshot already covers).
    pub fn upsert(&mut self, order: Order) {
        let pos = order.position();
        let old = match self.orders.entry(order.id) {
            griddle::hash_map::Entry::Occupied(mut held) => {
                if held.get().position() >= pos {
                    return;
                }
                Some(std::mem::replace(held.get_mut(), order))
            }
            griddle::hash_map::Entry::Vacant(slot) => {
                slot.insert(order);
                None
            }
        };
        self.by_pos.push(pos, order.id);
        if let Some(old) = &old {
            self.by_pos.kill(old.position(), &self.orders);
        }
        if !self.unindexed {
            self.firms
                .entry(order.firm)
                .or_default()
                .push(pos, order.id);
            self.brokers
                .entry(order.broker)
                .or_default()
                .push(pos, order.id);
            self.instruments
                .entry(order.instrument)
                .or_default()
                .push(pos, order.id);
            if let Some(old) = &old {
                let at = old.position();
                kill_position(&mut self.firms, old.firm, at, &self.orders);
                kill_position(&mut self.brokers, old.broker, at, &self.orders);
                kill_position(&mut self.instruments, old.instrument, at, &self.orders);
            }
        }
        self.marks.seq = self.marks.seq.max(order.seq);
        self.marks.rec = self.marks.rec.max(order.rec);
    }

    /// Removes one order from every index.
    pub fn remove(&mut self, id: OrderId) {
        let Some(old) = self.orders.remove(&id) else {
            return;
        };
        let at = old.position();
        self.by_pos.kill(at, &self.orders);
        if !self.unindexed {
            kill_position(&mut self.firms, old.firm, at, &self.orders);
            kill_position(&mut self.brokers, old.broker, at, &self.orders);
            kill_position(&mut self.instruments, old.instrument, at, &self.orders);
        }
    }

    /// The ids of the terminal orders at or before `floor`.
    pub fn terminal_through(&self, floor: Cursor) -> Vec<OrderId> {
        let mut ids = Vec::new();
        self.by_pos.through(floor, |pos, id| {
            if let Some(order) = self.orders.get(&id) {
                if order.position() == pos && order.status.is_terminal() {
                    ids.push(id);
                }
            }
        });
        ids
    }

    /// Forgets every order (a replica starting over from its primary); the marks stay,
    /// so that its readers' cursors are not taken for cursors of another feed.
    pub fn clear(&mut self, floor: Cursor) {
        self.orders.clear();
        self.by_pos = Positions::default();
        self.firms.clear();
        self.brokers.clear();
        self.instruments.clear();
        self.floor = floor;
    }

    /// Refuses a cursor the store cannot serve.
    pub fn check(&self, cursor: Cursor) -> Result<(), ReadError> {
        if cursor != Cursor::START && cursor < self.floor {
            return Err(ReadError::TooOld {
                cursor,
                oldest: self.floor,
            });
        }
        if cursor.seq > self.marks.seq.max(self.kept_seq) {
            return Err(ReadError::Ahead {
                cursor,
                newest: self.newest(),
            });
        }
        Ok(())
    }

    fn positions(&self, filter: Filter) -> Option<&Positions> {
        match filter {
            Filter::All => Some(&self.by_pos),
            Filter::Firm(f) => self.firms.get(&f),
            Filter::Broker(b) => self.brokers.get(&b),
            Filter::Instrument(i) => self.instruments.get(&i),
        }
    }

    /// Appends to `out` up to `limit` orders passing `filter` after `cursor`, in order.
    pub fn read(&self, cursor: Cursor, filter: Filter, limit: usize, out: &mut Vec<Order>) {
        let Some(positions) = self.positions(filter).filter(|_| limit > 0) else {
            return;
        };
        let mut left = limit;
        positions.after(cursor, |pos, id| match self.orders.get(&id) {
            Some(order) if order.position() == pos => {
                out.push(*order);
                left -= 1;
                if left == 0 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            }
            _ => ControlFlow::Continue(()),
        });
    }

    /// How many orders pass `filter` after `cursor`, counting no further than `cap`.
    pub fn count_after(&self, cursor: Cursor, filter: Filter, cap: usize) -> usize {
        let Some(positions) = self.positions(filter).filter(|_| cap > 0) else {
            return 0;
        };
        let mut count = 0;
        positions.after(cursor, |pos, id| {
            if live(&self.orders, pos, id) {
                count += 1;
                if count == cap {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        });
        count
    }
}
