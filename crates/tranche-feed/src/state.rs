//! The in-memory current state: every order once, at its latest version, in
//! `(seq, rec)` order, with one index per firm, broker account and instrument.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::ops::Bound;

use crate::cursor::Cursor;
use crate::model::{Filter, Order, OrderId};
use crate::validate::Marks;

/// A multiplicative hash (the one rustc uses) for the small integer keys of the
/// indexes: ids come from the exchange's own cores, not from an adversary, and SipHash
/// cost a noticeable share of the apply path.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const K: u64 = 0x517c_c1b7_2722_0a95;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map on [`IdHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// One secondary index: the positions of one key's orders.
type Positions = BTreeSet<Cursor>;

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
    by_pos: BTreeMap<Cursor, Order>,
    by_id: FastMap<OrderId, Cursor>,
    firms: FastMap<crate::FirmId, Positions>,
    brokers: FastMap<crate::BrokerId, Positions>,
    instruments: FastMap<crate::InstrumentId, Positions>,
    pub marks: Marks,
    pub floor: Cursor,
    /// A replica's state keeps no per-key index: it serves unfiltered reads only, and
    /// each upsert then touches two trees instead of five.
    pub unindexed: bool,
    /// The highest `seq` a replica had before it started over: its readers' cursors
    /// up to it are not from ahead of the store while it catches up again.
    pub kept_seq: u64,
}

fn after(cursor: Cursor) -> (Bound<Cursor>, Bound<Cursor>) {
    (Bound::Excluded(cursor), Bound::Unbounded)
}

fn move_position<K: Hash + Eq>(
    index: &mut FastMap<K, Positions>,
    key: K,
    old: Option<Cursor>,
    new: Cursor,
) {
    let positions = index.entry(key).or_default();
    if let Some(old) = old {
        positions.remove(&old);
    }
    positions.insert(new);
}

fn drop_position<K: Hash + Eq>(index: &mut FastMap<K, Positions>, key: K, old: Cursor) {
    if let Some(positions) = index.get_mut(&key) {
        positions.remove(&old);
        if positions.is_empty() {
            index.remove(&key);
        }
    }
}

impl State {
    /// The latest version of an order.
    pub fn get(&self, id: OrderId) -> Option<&Order> {
        self.by_id.get(&id).and_then(|pos| self.by_pos.get(pos))
    }

    /// How many orders the store holds.
    pub fn len(&self) -> usize {
        self.by_pos.len()
    }

    /// The position of the newest order version (`START` when empty).
    pub fn newest(&self) -> Cursor {
        self.by_pos
            .last_key_value()
            .map(|(pos, _)| *pos)
            .unwrap_or(Cursor::START)
    }

    /// Puts `order` at the end of the order and of its indexes, removing its previous
    /// version. A version not newer than the one held is ignored (replay of a log
    /// record a snapshot already covers).
    pub fn upsert(&mut self, order: Order) {
        let pos = order.position();
        let old = match self.by_id.entry(order.id) {
            std::collections::hash_map::Entry::Occupied(mut held) => {
                if *held.get() >= pos {
                    return;
                }
                Some(std::mem::replace(held.get_mut(), pos))
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(pos);
                None
            }
        };
        if let Some(old) = old {
            self.by_pos.remove(&old);
        }
        self.by_pos.insert(pos, order);
        if !self.unindexed {
            move_position(&mut self.firms, order.firm, old, pos);
            move_position(&mut self.brokers, order.broker, old, pos);
            move_position(&mut self.instruments, order.instrument, old, pos);
        }
        self.marks.seq = self.marks.seq.max(order.seq);
        self.marks.rec = self.marks.rec.max(order.rec);
    }

    /// Removes one order from every index.
    pub fn remove(&mut self, id: OrderId) {
        let Some(pos) = self.by_id.remove(&id) else {
            return;
        };
        if let Some(order) = self.by_pos.remove(&pos).filter(|_| !self.unindexed) {
            drop_position(&mut self.firms, order.firm, pos);
            drop_position(&mut self.brokers, order.broker, pos);
            drop_position(&mut self.instruments, order.instrument, pos);
        }
    }

    /// The ids of the terminal orders at or before `floor`.
    pub fn terminal_through(&self, floor: Cursor) -> Vec<OrderId> {
        self.by_pos
            .range(..=floor)
            .filter(|(_, order)| order.status.is_terminal())
            .map(|(_, order)| order.id)
            .collect()
    }

    /// Forgets every order (a replica starting over from its primary); the marks stay,
    /// so that its readers' cursors are not taken for cursors of another feed.
    pub fn clear(&mut self, floor: Cursor) {
        self.by_pos.clear();
        self.by_id.clear();
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

    fn index(&self, filter: Filter) -> Option<&Positions> {
        match filter {
            Filter::All => None,
            Filter::Firm(f) => self.firms.get(&f),
            Filter::Broker(b) => self.brokers.get(&b),
            Filter::Instrument(i) => self.instruments.get(&i),
        }
    }

    /// Appends to `out` up to `limit` orders passing `filter` after `cursor`, in order.
    pub fn read(&self, cursor: Cursor, filter: Filter, limit: usize, out: &mut Vec<Order>) {
        match filter {
            Filter::All => out.extend(
                self.by_pos
                    .range(after(cursor))
                    .take(limit)
                    .map(|(_, order)| *order),
            ),
            keyed => {
                if let Some(positions) = self.index(keyed) {
                    out.extend(
                        positions
                            .range(after(cursor))
                            .take(limit)
                            .map(|pos| self.by_pos[pos]),
                    );
                }
            }
        }
    }

    /// How many orders pass `filter` after `cursor`, counting no further than `cap`.
    pub fn count_after(&self, cursor: Cursor, filter: Filter, cap: usize) -> usize {
        match filter {
            Filter::All => self.by_pos.range(after(cursor)).take(cap).count(),
            keyed => self.index(keyed).map_or(0, |positions| {
                positions.range(after(cursor)).take(cap).count()
            }),
        }
    }
}
