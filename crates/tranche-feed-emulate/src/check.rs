//! Checking what clients receive: the core's final state (replayed from the seed), and
//! each client's view of one target (every shard it serves, through one vector
//! cursor), which finds reorderings as pages arrive and omissions against the final
//! state at the end.

use std::ops::Range;

// rustc's hash: the views see every row the clients receive, and SipHash was most of
// what checking a row cost (ids come from our own emulated cores, not an adversary).
use rustc_hash::FxHashMap as HashMap;

use serde::{Deserialize, Serialize};
use tranche_feed::{
    BrokerId, Cursor, Filter, FirmId, InstrumentId, Order, OrderId, VectorCursor, MAX_SHARDS,
};

use crate::book::{shard_of, Book, BookConfig};
use crate::seen::SeenTable;

/// A 64-bit digest of every field of an order version except its times (`created_at`
/// and `updated_at` are wall-clock stamps a replay cannot reproduce): two versions
/// with equal digests and equal `seq` are the same version.
pub fn digest(order: &Order) -> u64 {
    let fields = [
        order.id.0,
        u64::from(order.firm.0),
        u64::from(order.broker.0),
        u64::from(order.instrument.0),
        u64::from(order.side.code()),
        order.price as u64,
        order.quantity,
        order.filled,
        u64::from(order.status.code()),
        order.seq,
        order.rec,
    ];
    // splitmix64 over the fields, chained.
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for field in fields {
        h = (h ^ field).wrapping_add(0x9E37_79B9_7F4A_7C15);
        h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^= h >> 31;
    }
    h
}

/// What the checker keeps of an order's final version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// Its latest change's sequence number.
    pub seq: u64,
    /// Its record number.
    pub rec: u64,
    /// [`digest`] of that version.
    pub digest: u64,
    /// Its firm (for filters).
    pub firm: FirmId,
    /// Its broker account (for filters).
    pub broker: BrokerId,
    /// Its instrument (for filters).
    pub instrument: InstrumentId,
}

impl Fingerprint {
    /// The fingerprint of `order`.
    pub fn of(order: &Order) -> Fingerprint {
        Fingerprint {
            seq: order.seq,
            rec: order.rec,
            digest: digest(order),
            firm: order.firm,
            broker: order.broker,
            instrument: order.instrument,
        }
    }

    /// Whether the order passes `filter`.
    pub fn matches(&self, filter: Filter) -> bool {
        match filter {
            Filter::All => true,
            Filter::Firm(f) => self.firm == f,
            Filter::Broker(b) => self.broker == b,
            Filter::Instrument(i) => self.instrument == i,
        }
    }

    /// Its position in the feed.
    pub fn position(&self) -> Cursor {
        Cursor::new(self.seq, self.rec)
    }
}

/// One shard's final state as its core left it: every order at its last version.
#[derive(Debug, Clone, Default)]
pub struct ShardExpected {
    orders: HashMap<OrderId, Fingerprint>,
}

impl ShardExpected {
    /// Replays shard `shard` of the run seeded `seed` for its first `events` events:
    /// the state the store holds once they are all applied (times aside).
    pub fn replay(config: &BookConfig, seed: u64, shard: u32, events: u64) -> ShardExpected {
        let mut book = Book::new(config.clone(), seed, shard);
        let mut orders = HashMap::default();
        for stamp in 1..=events {
            let step = book.next(stamp);
            orders.insert(step.order.id, Fingerprint::of(&step.order));
        }
        ShardExpected { orders }
    }

    /// The final state made of these orders (each at its last version).
    pub fn from_orders<'a>(orders: impl IntoIterator<Item = &'a Order>) -> ShardExpected {
        ShardExpected {
            orders: orders
                .into_iter()
                .map(|o| (o.id, Fingerprint::of(o)))
                .collect(),
        }
    }

    /// How many orders.
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    /// One order's final version.
    pub fn get(&self, id: OrderId) -> Option<&Fingerprint> {
        self.orders.get(&id)
    }

    /// The position of the last order of `filter`: a client of that filter whose
    /// cursor reached it has had the chance to see everything.
    pub fn last_position(&self, filter: Filter) -> Cursor {
        self.orders
            .values()
            .filter(|f| f.matches(filter))
            .map(Fingerprint::position)
            .max()
            .unwrap_or(Cursor::START)
    }

    /// [`ShardExpected::last_position`] of every filter at once, in one pass.
    pub fn ends(&self) -> Ends {
        let mut ends = Ends::default();
        for f in self.orders.values() {
            let p = f.position();
            let raise = |slot: &mut Cursor| *slot = (*slot).max(p);
            raise(&mut ends.all);
            raise(ends.firms.entry(f.firm).or_insert(Cursor::START));
            raise(ends.brokers.entry(f.broker).or_insert(Cursor::START));
            raise(
                ends.instruments
                    .entry(f.instrument)
                    .or_insert(Cursor::START),
            );
        }
        ends
    }

    /// The orders, each at its final version.
    pub fn iter(&self) -> impl Iterator<Item = (&OrderId, &Fingerprint)> {
        self.orders.iter()
    }
}

/// The last position of each filter's orders in one shard's final state
/// ([`ShardExpected::ends`]).
#[derive(Debug, Clone, Default)]
pub struct Ends {
    all: Cursor,
    firms: HashMap<FirmId, Cursor>,
    brokers: HashMap<BrokerId, Cursor>,
    instruments: HashMap<InstrumentId, Cursor>,
}

impl Ends {
    /// The last position of `filter`'s orders ([`Cursor::START`] if it has none).
    pub fn get(&self, filter: Filter) -> Cursor {
        let found = match filter {
            Filter::All => Some(&self.all),
            Filter::Firm(f) => self.firms.get(&f),
            Filter::Broker(b) => self.brokers.get(&b),
            Filter::Instrument(i) => self.instruments.get(&i),
        };
        found.copied().unwrap_or(Cursor::START)
    }
}

/// The final state of every shard of a run.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    /// Shard by shard.
    pub shards: Vec<ShardExpected>,
}

impl Expected {
    /// The cursor a client of `filter` reading `served` (a target's shards, in its
    /// cursor's order) has read everything at: each shard's last position of
    /// `filter` ([`Cursor::START`] for a shard the final state lacks).
    pub fn end_cursor(&self, filter: Filter, served: Range<usize>) -> VectorCursor {
        let mut cursor = VectorCursor::START;
        for (i, shard) in served.enumerate() {
            if let Some(expected) = self.shards.get(shard) {
                cursor.set(i, expected.last_position(filter));
            }
        }
        cursor
    }
}

impl Expected {
    /// Replays every shard (`events[shard]` events each), a thread per shard.
    pub fn replay(config: &BookConfig, seed: u64, events: &[u64]) -> Expected {
        let shards = std::thread::scope(|scope| {
            let handles: Vec<_> = events
                .iter()
                .enumerate()
                .map(|(shard, &n)| {
                    scope.spawn(move || ShardExpected::replay(config, seed, shard as u32, n))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a replay does not panic"))
                .collect()
        });
        Expected { shards }
    }
}

/// How one client's view compares with the final state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Orders of the filter in the final state (of the shards the view reads).
    pub expected: u64,
    /// Orders of the final state the view lacks, or holds at an older version.
    pub omissions: u64,
    /// Orders the view holds at the final version's `seq` with other contents, at a
    /// `seq` the final state does not have, or that the final state does not hold for
    /// this filter (in the shards the view reads) at all.
    pub mismatches: u64,
}

/// How many problems of each kind are described in [`FeedView::problems`].
const EXAMPLES: usize = 5;

/// Whether `cursor` is at or past `end` in each of the first `shards` positions.
pub fn reached(cursor: &VectorCursor, end: &VectorCursor, shards: usize) -> bool {
    (0..shards).all(|i| cursor.position(i) >= end.position(i))
}

/// One client's view of one target: the shards it serves (`served`, the run's shard
/// numbers in the order of the target's cursor positions), read through one vector
/// cursor; the latest version of each order it received, and the checks made as
/// pages arrive.
///
/// A page merges the shards, so order is judged per shard: a row's shard is its
/// id's ([`shard_of`]), and a *reordering* is a row whose position is not after
/// everything received before it from that shard (within a page and from one page
/// to the next, from the cursor read from), a version of an order no newer than one
/// already received, or a next cursor behind the page's last row of a shard (or
/// behind the cursor read from). A *misfiltered* row does not pass the client's
/// filter. A row of a shard the target does not serve is described as a problem and
/// counted as a mismatch by [`FeedView::compare`].
#[derive(Debug, Clone)]
pub struct FeedView {
    filter: Filter,
    served: Range<usize>,
    cursor: VectorCursor,
    seen: SeenTable,
    /// Rows received.
    pub rows: u64,
    /// Pages received.
    pub pages: u64,
    /// Pages with no rows.
    pub empty_pages: u64,
    /// Rows (or cursors) out of order.
    pub reorderings: u64,
    /// Rows that do not pass the filter.
    pub misfiltered: u64,
    /// The first few problems, in words.
    pub problems: Vec<String>,
}

impl FeedView {
    /// An empty view of `filter`'s orders in the shards `served` (the run's shard
    /// numbers, in the order of the target's cursor positions: `0..K` for a server
    /// of `K` shards, `k..k + 1` for shard `k`'s own server), reading from the start.
    ///
    /// # Panics
    /// If `served` is empty or holds more than [`MAX_SHARDS`] shards.
    pub fn new(filter: Filter, served: Range<usize>) -> FeedView {
        assert!(
            !served.is_empty() && served.len() <= MAX_SHARDS,
            "a view reads 1 to {MAX_SHARDS} shards, got {served:?}"
        );
        FeedView {
            filter,
            served,
            cursor: VectorCursor::START,
            seen: SeenTable::new(filter == Filter::All),
            rows: 0,
            pages: 0,
            empty_pages: 0,
            reorderings: 0,
            misfiltered: 0,
            problems: Vec::new(),
        }
    }

    /// The filter.
    pub fn filter(&self) -> Filter {
        self.filter
    }

    /// The run's shards it reads, in cursor order.
    pub fn served(&self) -> Range<usize> {
        self.served.clone()
    }

    /// Where the next read starts: the last page's next cursor.
    pub fn cursor(&self) -> VectorCursor {
        self.cursor
    }

    /// Orders held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.seen.len() == 0
    }

    /// Whether its cursor reached `end` in every shard it reads.
    pub fn reached(&self, end: &VectorCursor) -> bool {
        reached(&self.cursor, end, self.served.len())
    }

    fn problem(&mut self, text: impl FnOnce() -> String) {
        if self.problems.len() < EXAMPLES {
            self.problems.push(text());
        }
    }

    /// Takes in one page read from [`FeedView::cursor`]: its rows in the order
    /// received and the cursor it said to read on from. Returns how many
    /// reorderings the page had.
    pub fn accept(&mut self, next: &VectorCursor, orders: &[Order]) -> u64 {
        let before = self.reorderings;
        let width = self.served.len();
        self.pages += 1;
        if orders.is_empty() {
            self.empty_pages += 1;
        }
        // Per shard (cursor position), the last position received from it.
        let mut last = [Cursor::START; MAX_SHARDS];
        for (i, slot) in last.iter_mut().enumerate().take(width) {
            *slot = self.cursor.position(i);
        }
        for order in orders {
            self.rows += 1;
            let shard = shard_of(order.id);
            let position = order.position();
            let mut reordered = false;
            if let Some(i) = shard.checked_sub(self.served.start).filter(|&i| i < width) {
                if position <= last[i] {
                    reordered = true;
                    let after = last[i];
                    self.problem(|| {
                        format!(
                            "order {} of shard {shard} at ({}, {}) received after ({}, {}) of that shard",
                            order.id, position.seq, position.rec, after.seq, after.rec
                        )
                    });
                }
                last[i] = last[i].max(position);
            } else {
                let served = self.served.clone();
                self.problem(|| {
                    format!(
                        "order {} is of shard {shard}, not one of the shards read ({served:?})",
                        order.id
                    )
                });
            }
            if !self.filter.matches(order) {
                self.misfiltered += 1;
                let filter = self.filter;
                self.problem(|| format!("order {} does not pass {filter:?}", order.id));
            }
            if let Err(known_seq) = self.seen.record(order.id, order.seq, || digest(order)) {
                reordered = true;
                self.problem(|| {
                    format!(
                        "order {}: version of seq {} received after seq {}",
                        order.id, order.seq, known_seq
                    )
                });
            }
            if reordered {
                self.reorderings += 1;
            }
        }
        for (i, &last) in last.iter().enumerate().take(width) {
            let position = next.position(i);
            if position < last {
                self.reorderings += 1;
                let shard = self.served.start + i;
                self.problem(|| {
                    format!(
                        "next cursor ({}, {}) of shard {shard} behind its last row or the cursor read from ({}, {})",
                        position.seq, position.rec, last.seq, last.rec
                    )
                });
            }
        }
        self.cursor = *next;
        self.reorderings - before
    }

    /// The final versions of the orders of the view's filter in the shards it reads.
    fn wanted<'a>(
        &'a self,
        expected: &'a Expected,
    ) -> impl Iterator<Item = (&'a OrderId, &'a Fingerprint)> + 'a {
        let filter = self.filter;
        self.served
            .clone()
            .filter_map(|shard| expected.shards.get(shard))
            .flat_map(|shard| shard.orders.iter())
            .filter(move |(_, want)| want.matches(filter))
    }

    /// Whether the final state holds `id` for the view's filter in a shard it reads.
    fn expects(&self, expected: &Expected, id: OrderId) -> bool {
        let shard = shard_of(id);
        self.served.contains(&shard)
            && expected
                .shards
                .get(shard)
                .and_then(|s| s.orders.get(&id))
                .is_some_and(|want| want.matches(self.filter))
    }

    /// Compares the view with the final state of the shards it reads, for its
    /// filter.
    pub fn compare(&self, expected: &Expected) -> Verdict {
        let mut verdict = Verdict::default();
        for (id, want) in self.wanted(expected) {
            verdict.expected += 1;
            match self.seen.get(*id) {
                None => verdict.omissions += 1,
                Some(got) if got.seq < want.seq => verdict.omissions += 1,
                Some(got) if got.seq == want.seq && got.digest == want.digest => {}
                Some(_) => verdict.mismatches += 1,
            }
        }
        for id in self.seen.ids() {
            if !self.expects(expected, id) {
                verdict.mismatches += 1;
            }
        }
        verdict
    }

    /// The first few orders [`FeedView::compare`] counted, in words.
    pub fn describe_differences(&self, expected: &Expected) -> Vec<String> {
        let mut out = Vec::new();
        let mut ids: Vec<_> = self.wanted(expected).collect();
        ids.sort_by_key(|(id, want)| (shard_of(**id), want.position()));
        for (id, want) in ids {
            if out.len() >= EXAMPLES {
                break;
            }
            let shard = shard_of(*id);
            match self.seen.get(*id) {
                None => out.push(format!(
                    "order {id} (shard {shard}, final at seq {}) never received",
                    want.seq
                )),
                Some(got) if got.seq < want.seq => out.push(format!(
                    "order {id} (shard {shard}): last received seq {}, final seq {}",
                    got.seq, want.seq
                )),
                Some(got) if got.seq == want.seq && got.digest == want.digest => {}
                Some(got) => out.push(format!(
                    "order {id} (shard {shard}): received seq {} differs from the final version (seq {})",
                    got.seq, want.seq
                )),
            }
        }
        for id in self.seen.ids() {
            if out.len() >= EXAMPLES {
                break;
            }
            if !self.expects(expected, id) {
                out.push(format!(
                    "order {id} (shard {}) received but not in the final state for {:?}",
                    shard_of(id),
                    self.filter
                ));
            }
        }
        out
    }
}
