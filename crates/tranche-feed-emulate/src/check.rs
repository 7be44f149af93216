//! Checking what clients receive: the core's final state (replayed from the seed), and
//! each client's view of one shard, which finds reorderings as pages arrive and
//! omissions against the final state at the end.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tranche_feed::{BrokerId, Cursor, Filter, FirmId, InstrumentId, Order, OrderId};

use crate::book::{Book, BookConfig};

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
        let mut orders = HashMap::new();
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
}

/// The final state of every shard of a run.
#[derive(Debug, Clone, Default)]
pub struct Expected {
    /// Shard by shard.
    pub shards: Vec<ShardExpected>,
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

/// How one client's view of one shard compares with the final state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Orders of the filter in the final state.
    pub expected: u64,
    /// Orders of the final state the view lacks, or holds at an older version.
    pub omissions: u64,
    /// Orders the view holds at the final version's `seq` with other contents, at a
    /// `seq` the final state does not have, or that the final state does not hold for
    /// this filter at all.
    pub mismatches: u64,
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    seq: u64,
    digest: u64,
}

/// How many problems of each kind are described in [`ShardView::problems`].
const EXAMPLES: usize = 5;

/// One client's view of one shard: the latest version of each order it received,
/// and the checks made as pages arrive.
///
/// A *reordering* is a row whose position is not after everything received before it
/// (pages must ascend by `(seq, rec)`, within a page and from one page to the next,
/// from the cursor read from), or a version of an order no newer than one already
/// received; a next cursor behind the page's last row counts too. A *misfiltered* row
/// does not pass the client's filter.
#[derive(Debug, Clone)]
pub struct ShardView {
    filter: Filter,
    cursor: Cursor,
    seen: HashMap<OrderId, Seen>,
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

impl ShardView {
    /// An empty view of `filter`'s orders, reading from the start.
    pub fn new(filter: Filter) -> ShardView {
        ShardView {
            filter,
            cursor: Cursor::START,
            seen: HashMap::new(),
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

    /// Where the next read starts: the last page's next cursor.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    /// Orders held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    fn problem(&mut self, text: impl FnOnce() -> String) {
        if self.problems.len() < EXAMPLES {
            self.problems.push(text());
        }
    }

    /// Takes in one page read from [`ShardView::cursor`]: its rows in the order
    /// received and the cursor it said to read on from. Returns how many
    /// reorderings the page had.
    pub fn accept(&mut self, next: Cursor, orders: &[Order]) -> u64 {
        let before = self.reorderings;
        self.pages += 1;
        if orders.is_empty() {
            self.empty_pages += 1;
        }
        let mut last = self.cursor;
        for order in orders {
            self.rows += 1;
            let position = order.position();
            let mut reordered = false;
            if position <= last {
                reordered = true;
                self.problem(|| {
                    format!(
                        "order {} at ({}, {}) received after ({}, {})",
                        order.id, position.seq, position.rec, last.seq, last.rec
                    )
                });
            }
            if !self.filter.matches(order) {
                self.misfiltered += 1;
                let filter = self.filter;
                self.problem(|| format!("order {} does not pass {filter:?}", order.id));
            }
            match self.seen.entry(order.id) {
                Entry::Occupied(mut known) => {
                    let known_seq = known.get().seq;
                    if order.seq <= known_seq {
                        reordered = true;
                        if self.problems.len() < EXAMPLES {
                            self.problems.push(format!(
                                "order {}: version of seq {} received after seq {}",
                                order.id, order.seq, known_seq
                            ));
                        }
                    } else {
                        known.insert(Seen {
                            seq: order.seq,
                            digest: digest(order),
                        });
                    }
                }
                Entry::Vacant(slot) => {
                    slot.insert(Seen {
                        seq: order.seq,
                        digest: digest(order),
                    });
                }
            }
            if reordered {
                self.reorderings += 1;
            }
            last = last.max(position);
        }
        if next < last {
            self.reorderings += 1;
            self.problem(|| {
                format!(
                    "next cursor ({}, {}) behind the page's last row ({}, {})",
                    next.seq, next.rec, last.seq, last.rec
                )
            });
        }
        self.cursor = next;
        self.reorderings - before
    }

    /// Compares the view with the shard's final state for the view's filter.
    pub fn compare(&self, expected: &ShardExpected) -> Verdict {
        let mut verdict = Verdict::default();
        for (id, want) in &expected.orders {
            if !want.matches(self.filter) {
                continue;
            }
            verdict.expected += 1;
            match self.seen.get(id) {
                None => verdict.omissions += 1,
                Some(got) if got.seq < want.seq => verdict.omissions += 1,
                Some(got) if got.seq == want.seq && got.digest == want.digest => {}
                Some(_) => verdict.mismatches += 1,
            }
        }
        for id in self.seen.keys() {
            if !expected
                .orders
                .get(id)
                .is_some_and(|want| want.matches(self.filter))
            {
                verdict.mismatches += 1;
            }
        }
        verdict
    }

    /// The first few orders [`ShardView::compare`] counted, in words.
    pub fn describe_differences(&self, expected: &ShardExpected) -> Vec<String> {
        let mut out = Vec::new();
        let mut ids: Vec<_> = expected
            .orders
            .iter()
            .filter(|(_, want)| want.matches(self.filter))
            .collect();
        ids.sort_by_key(|(_, want)| want.position());
        for (id, want) in ids {
            if out.len() >= EXAMPLES {
                break;
            }
            match self.seen.get(id) {
                None => out.push(format!(
                    "order {id} (final at seq {}) never received",
                    want.seq
                )),
                Some(got) if got.seq < want.seq => out.push(format!(
                    "order {id}: last received seq {}, final seq {}",
                    got.seq, want.seq
                )),
                Some(got) if got.seq == want.seq && got.digest == want.digest => {}
                Some(got) => out.push(format!(
                    "order {id}: received seq {} differs from the final version (seq {})",
                    got.seq, want.seq
                )),
            }
        }
        for id in self.seen.keys() {
            if out.len() >= EXAMPLES {
                break;
            }
            if !expected
                .orders
                .get(id)
                .is_some_and(|want| want.matches(self.filter))
            {
                out.push(format!(
                    "order {id} received but not in the final state for {:?}",
                    self.filter
                ));
            }
        }
        out
    }
}
