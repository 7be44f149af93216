//! What a client's view holds of each order it received: the newest `seq` and that
//! version's digest, by order id.
//!
//! Every row a client receives is looked up here, and the full-stream clients receive
//! every row the server delivers: in a hash map spread over half a million orders,
//! each lookup was a cache miss, and checking rows was the load process's largest
//! cost (12 % of the whole machine's samples with 50 full-stream clients), taken from
//! the CPU the server shares with it. The emulated cores number each shard's orders
//! from 1 ([`order_id`](crate::book::order_id)), so a view of every order indexes
//! fixed-size chunks by that number instead: new orders fill a chunk in turn and
//! the changes that follow touch recent ones, so the lines are mostly in cache.
//! A filtered view holds a sliver of each chunk's range and keeps the map; so does
//! any id a dense table would not expect (a number past [`DENSE_LIMIT`], a shard past
//! [`MAX_SHARDS`]), so a corrupt id costs a map entry, not memory in proportion to
//! its value.

use griddle::hash_map::Entry;
use tranche_feed::{OrderId, MAX_SHARDS};

use crate::book::{order_id, shard_of, SHARD_SHIFT};

/// A version of an order as received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// Its `seq`.
    pub seq: u64,
    /// Its digest ([`crate::check::digest`]).
    pub digest: u64,
}

/// Orders per chunk: 64 KiB of versions.
const CHUNK: usize = 4096;
/// Order numbers a dense table takes per shard; a chunk is allocated when first
/// touched, so this bounds only the table of chunk pointers (128 KiB a shard).
const DENSE_LIMIT: u64 = 1 << 26;

#[derive(Clone)]
struct Chunk {
    /// One bit per slot: whether it holds a version.
    held: [u64; CHUNK / 64],
    seen: [Seen; CHUNK],
}

impl Chunk {
    fn empty() -> Box<Chunk> {
        Box::new(Chunk {
            held: [0; CHUNK / 64],
            seen: [Seen::default(); CHUNK],
        })
    }

    fn holds(&self, i: usize) -> bool {
        self.held[i / 64] & (1 << (i % 64)) != 0
    }
}

/// See the module's doc.
#[derive(Clone)]
pub(crate) struct SeenTable {
    /// Per shard, per chunk of order numbers; empty for a sparse (filtered) view.
    dense: Vec<Vec<Option<Box<Chunk>>>>,
    dense_len: usize,
    /// Grown incrementally (`griddle`): doubling half a million entries at once
    /// stopped the load's process (its cores' senders too) for about 100 ms, which
    /// counted as the server's latency.
    other: griddle::HashMap<OrderId, Seen, rustc_hash::FxBuildHasher>,
}

impl SeenTable {
    /// An empty table, indexed densely if the view is to hold every order.
    pub fn new(dense: bool) -> SeenTable {
        SeenTable {
            dense: if dense {
                (0..MAX_SHARDS).map(|_| Vec::new()).collect()
            } else {
                Vec::new()
            },
            dense_len: 0,
            other: griddle::HashMap::default(),
        }
    }

    /// The dense slot of `id`, if it has one: (shard, chunk, index in chunk).
    fn dense_slot(&self, id: OrderId) -> Option<(usize, usize, usize)> {
        let shard = shard_of(id);
        let n = id.0 & ((1 << SHARD_SHIFT) - 1);
        (shard < self.dense.len() && n < DENSE_LIMIT).then_some((
            shard,
            n as usize / CHUNK,
            n as usize % CHUNK,
        ))
    }

    /// Records version `seq` (digest computed on demand) of order `id`, unless a
    /// version at least as new is held: then returns that version's `seq`.
    pub fn record(
        &mut self,
        id: OrderId,
        seq: u64,
        digest: impl FnOnce() -> u64,
    ) -> Result<(), u64> {
        let slot = match self.dense_slot(id) {
            Some((shard, chunk, i)) => {
                let chunks = &mut self.dense[shard];
                if chunks.len() <= chunk {
                    chunks.resize_with(chunk + 1, || None);
                }
                let chunk = chunks[chunk].get_or_insert_with(Chunk::empty);
                if !chunk.holds(i) {
                    chunk.held[i / 64] |= 1 << (i % 64);
                    self.dense_len += 1;
                    chunk.seen[i] = Seen {
                        seq,
                        digest: digest(),
                    };
                    return Ok(());
                }
                &mut chunk.seen[i]
            }
            None => match self.other.entry(id) {
                Entry::Occupied(held) => held.into_mut(),
                Entry::Vacant(slot) => {
                    slot.insert(Seen {
                        seq,
                        digest: digest(),
                    });
                    return Ok(());
                }
            },
        };
        if seq <= slot.seq {
            return Err(slot.seq);
        }
        *slot = Seen {
            seq,
            digest: digest(),
        };
        Ok(())
    }

    /// The version held of `id`.
    pub fn get(&self, id: OrderId) -> Option<Seen> {
        match self.dense_slot(id) {
            Some((shard, chunk, i)) => self.dense[shard]
                .get(chunk)
                .and_then(|c| c.as_ref())
                .filter(|c| c.holds(i))
                .map(|c| c.seen[i]),
            None => self.other.get(&id).copied(),
        }
    }

    /// Orders held.
    pub fn len(&self) -> usize {
        self.dense_len + self.other.len()
    }

    /// The ids of the orders held.
    pub fn ids(&self) -> impl Iterator<Item = OrderId> + '_ {
        let dense = self.dense.iter().enumerate().flat_map(|(shard, chunks)| {
            chunks.iter().enumerate().flat_map(move |(c, chunk)| {
                chunk.iter().flat_map(move |chunk| {
                    (0..CHUNK)
                        .filter(|&i| chunk.holds(i))
                        .map(move |i| order_id(shard as u32, (c * CHUNK + i) as u64))
                })
            })
        });
        dense.chain(self.other.keys().copied())
    }
}

impl std::fmt::Debug for SeenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeenTable")
            .field("dense", &!self.dense.is_empty())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::order_id;

    fn both() -> [SeenTable; 2] {
        [SeenTable::new(true), SeenTable::new(false)]
    }

    #[test]
    fn keeps_the_newest_version_and_refuses_older_or_equal_ones() {
        for mut table in both() {
            let id = order_id(1, 5_000);
            assert_eq!(table.record(id, 10, || 1), Ok(()));
            assert_eq!(table.record(id, 12, || 2), Ok(()));
            assert_eq!(table.record(id, 12, || 3), Err(12));
            assert_eq!(table.record(id, 11, || 4), Err(12));
            assert_eq!(table.get(id), Some(Seen { seq: 12, digest: 2 }));
            assert_eq!(table.len(), 1);
        }
    }

    #[test]
    fn ids_dense_or_not_come_back_once_each() {
        for mut table in both() {
            let far = OrderId((3 << SHARD_SHIFT) | DENSE_LIMIT);
            let beyond_shards = OrderId(((MAX_SHARDS as u64) << SHARD_SHIFT) | 7);
            let mut ids = vec![
                order_id(0, 1),
                order_id(0, 4_097),
                order_id(2, 9),
                far,
                beyond_shards,
            ];
            for (n, &id) in ids.iter().enumerate() {
                table.record(id, n as u64 + 1, || 0).expect("new");
            }
            let zero = order_id(0, 2);
            table.record(zero, 0, || 9).expect("new");
            assert_eq!(table.get(zero), Some(Seen { seq: 0, digest: 9 }));
            assert_eq!(table.record(zero, 0, || 9), Err(0));
            ids.push(zero);
            let mut got: Vec<OrderId> = table.ids().collect();
            got.sort();
            ids.sort();
            assert_eq!(got, ids);
            assert_eq!(table.len(), ids.len());
            assert_eq!(table.get(order_id(0, 3)), None);
            assert_eq!(table.get(order_id(5, 1)), None);
        }
    }

    #[test]
    fn a_corrupt_id_costs_a_map_entry_not_a_table_of_its_size() {
        let mut table = SeenTable::new(true);
        table.record(OrderId(u64::MAX >> 1), 3, || 0).expect("new");
        assert!(table.dense.iter().all(Vec::is_empty));
        assert_eq!(table.other.len(), 1);
    }
}
