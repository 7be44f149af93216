//! A list of order positions in `(seq, rec)` order, appended to at the end and
//! pruned lazily: the store's order of all versions, and each firm's, broker's and
//! instrument's.
//!
//! Why not a `BTreeMap`: a write moves an order to the end of four orders (the whole
//! store and its three keys), and in a tree that is a removal somewhere in the middle
//! and an insertion for each, both walking the tree from its root (the apply path's
//! largest cost in a profile of the pilot's shape: 15–20 % of the server's CPU).
//! Positions only grow, so here a write pushes an entry at the end and leaves the old
//! version's entry in place; an entry is live while the order's current version is at
//! its position, which the reader checks against the orders by id. Entries live in
//! chunks of at most [`CHUNK`]; a chunk whose live entries fall below half is
//! compacted on its own, so no write ever pays for the whole list, and readers find
//! a cursor by binary search over the chunks and within one.
//!
//! An entry out of order (a snapshot and a log replayed on open may give versions
//! older than the newest) is inserted into its chunk, which splits past twice
//! [`CHUNK`].

use std::ops::ControlFlow;

use crate::cursor::Cursor;
use crate::model::OrderId;
use crate::state::OrderMap;

/// Entries per chunk before a new one is started.
const CHUNK: usize = 1024;
/// A chunk this small is not compacted: its dead entries cost less than the work.
const COMPACT_FROM: usize = 64;

/// Whether the entry `(pos, id)` is the current version of its order.
pub(crate) fn live(orders: &OrderMap, pos: Cursor, id: OrderId) -> bool {
    orders.get(&id).is_some_and(|order| order.position() == pos)
}

#[derive(Default)]
struct Chunk {
    /// Ascending by position.
    entries: Vec<(Cursor, OrderId)>,
    /// How many of them are live.
    live: usize,
}

/// See the module's doc.
#[derive(Default)]
pub(crate) struct Positions {
    /// Ascending, none empty.
    chunks: Vec<Chunk>,
    /// Each chunk's last position, side by side: the binary search for a position's
    /// chunk then reads one small array rather than a line of every chunk it visits.
    lasts: Vec<Cursor>,
    live: usize,
}

impl Positions {
    /// How many live entries it holds.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Adds the live entry `(pos, id)`.
    pub fn push(&mut self, pos: Cursor, id: OrderId) {
        self.live += 1;
        if self.lasts.last().is_none_or(|&newest| newest < pos) {
            match self.chunks.last_mut() {
                Some(chunk) if chunk.entries.len() < CHUNK => {
                    chunk.entries.push((pos, id));
                    chunk.live += 1;
                    *self.lasts.last_mut().expect("a last per chunk") = pos;
                }
                _ => {
                    let mut entries = Vec::with_capacity(CHUNK);
                    entries.push((pos, id));
                    self.chunks.push(Chunk { entries, live: 1 });
                    self.lasts.push(pos);
                }
            }
            return;
        }
        let at = self.chunk_of(pos).unwrap_or(self.chunks.len() - 1);
        let chunk = &mut self.chunks[at];
        let i = chunk.entries.partition_point(|&(p, _)| p < pos);
        chunk.entries.insert(i, (pos, id));
        chunk.live += 1;
        if chunk.entries.len() > 2 * CHUNK {
            let tail = chunk.entries.split_off(CHUNK);
            // The halves share the count by size: it only decides when a chunk is
            // compacted, which recounts.
            let tail_live = chunk.live * tail.len() / (tail.len() + chunk.entries.len());
            chunk.live -= tail_live;
            let head_last = chunk.entries[CHUNK - 1].0;
            self.lasts.insert(at, head_last);
            self.chunks.insert(
                at + 1,
                Chunk {
                    entries: tail,
                    live: tail_live,
                },
            );
        }
    }

    /// The entry at `pos` (which must have been pushed, and not killed since) is no
    /// longer live (`orders` already says so): counts it out, and compacts its chunk
    /// once fewer than half of the chunk's entries are live.
    pub fn kill(&mut self, pos: Cursor, orders: &OrderMap) {
        let Some(at) = self.chunk_of(pos) else {
            return;
        };
        let chunk = &mut self.chunks[at];
        debug_assert!(chunk.entries.binary_search_by(|(p, _)| p.cmp(&pos)).is_ok());
        self.live = self.live.saturating_sub(1);
        chunk.live = chunk.live.saturating_sub(1);
        // The chunk's count only decides when to look: a compaction recounts.
        let small = chunk.entries.len() < COMPACT_FROM;
        if chunk.live * 2 >= chunk.entries.len() || (small && chunk.live > 0) {
            return;
        }
        chunk.entries.retain(|&(p, id)| live(orders, p, id));
        chunk.live = chunk.entries.len();
        match chunk.entries.last() {
            None => {
                self.chunks.remove(at);
                self.lasts.remove(at);
            }
            Some(&(last, _)) => {
                self.lasts[at] = last;
                self.merge_around(at);
            }
        }
    }

    /// Merges a chunk with a neighbour when both fit in one, so that compacted chunks
    /// do not leave the list fragmented.
    fn merge_around(&mut self, at: usize) {
        let len = |c: &Chunk| c.entries.len();
        let into = if at + 1 < self.chunks.len()
            && len(&self.chunks[at]) + len(&self.chunks[at + 1]) <= CHUNK
        {
            at
        } else if at > 0 && len(&self.chunks[at - 1]) + len(&self.chunks[at]) <= CHUNK {
            at - 1
        } else {
            return;
        };
        let next = self.chunks.remove(into + 1);
        self.lasts.remove(into);
        let chunk = &mut self.chunks[into];
        chunk.entries.extend(next.entries);
        chunk.live += next.live;
    }

    /// The chunk whose range holds `pos`: the first whose last entry is at or after it.
    fn chunk_of(&self, pos: Cursor) -> Option<usize> {
        let at = self.lasts.partition_point(|&last| last < pos);
        (at < self.chunks.len()).then_some(at)
    }

    /// Hands each entry after `cursor` (live or not), in order, to `f` until it breaks.
    pub fn after(&self, cursor: Cursor, mut f: impl FnMut(Cursor, OrderId) -> ControlFlow<()>) {
        let first = self.lasts.partition_point(|&last| last <= cursor);
        for (n, chunk) in self.chunks[first..].iter().enumerate() {
            let from = if n == 0 {
                chunk.entries.partition_point(|&(p, _)| p <= cursor)
            } else {
                0
            };
            for &(pos, id) in &chunk.entries[from..] {
                if f(pos, id).is_break() {
                    return;
                }
            }
        }
    }

    /// Hands each entry at or before `cursor` (live or not), from the oldest, to `f`.
    pub fn through(&self, cursor: Cursor, mut f: impl FnMut(Cursor, OrderId)) {
        for chunk in &self.chunks {
            for &(pos, id) in &chunk.entries {
                if pos > cursor {
                    return;
                }
                f(pos, id);
            }
        }
    }

    /// The newest live entry's position.
    pub fn newest(&self, orders: &OrderMap) -> Option<Cursor> {
        self.chunks
            .iter()
            .rev()
            .flat_map(|c| c.entries.iter().rev())
            .find(|&&(pos, id)| live(orders, pos, id))
            .map(|&(pos, _)| pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BrokerId, FirmId, InstrumentId, Side, Status};

    fn order(id: u64, seq: u64) -> crate::Order {
        crate::Order {
            id: OrderId(id),
            firm: FirmId(1),
            broker: BrokerId(1),
            instrument: InstrumentId(1),
            side: Side::Buy,
            status: Status::New,
            price: 1,
            quantity: 1,
            filled: 0,
            created_at: 0,
            updated_at: 0,
            seq,
            rec: id,
        }
    }

    fn collect(positions: &Positions, orders: &OrderMap, after: Cursor) -> Vec<u64> {
        let mut out = Vec::new();
        positions.after(after, |pos, id| {
            if live(orders, pos, id) {
                out.push(orders[&id].seq);
            }
            ControlFlow::Continue(())
        });
        out
    }

    /// Random moves of orders to the end, and removals, against a model: the live
    /// entries in order are always the current versions in seq order, and the dead
    /// ones are compacted away.
    #[test]
    fn matches_a_model_through_moves_removals_and_compactions() {
        let mut rng = fastrand::Rng::with_seed(3);
        let mut orders: OrderMap = OrderMap::default();
        let mut positions = Positions::default();
        let mut seq = 0;
        for step in 0..60_000u64 {
            seq += 1;
            let id = rng.u64(0..3_000);
            if rng.u8(..10) == 0 {
                if let Some(old) = orders.remove(&OrderId(id)) {
                    positions.kill(old.position(), &orders);
                }
                continue;
            }
            let new = order(id, seq);
            let old = orders.insert(OrderId(id), new);
            positions.push(new.position(), OrderId(id));
            if let Some(old) = old {
                positions.kill(old.position(), &orders);
            }
            if step % 5_000 == 0 || step == 59_999 {
                let mut expected: Vec<u64> = orders.values().map(|o| o.seq).collect();
                expected.sort_unstable();
                assert_eq!(collect(&positions, &orders, Cursor::START), expected);
                assert_eq!(positions.live(), orders.len());
                let lasts: Vec<Cursor> = positions
                    .chunks
                    .iter()
                    .map(|c| c.entries.last().unwrap().0)
                    .collect();
                assert_eq!(positions.lasts, lasts);
                let entries: usize = positions.chunks.iter().map(|c| c.entries.len()).sum();
                assert!(
                    entries <= 2 * orders.len() + positions.chunks.len() * COMPACT_FROM,
                    "{entries} entries for {} orders",
                    orders.len()
                );
                let mid = expected[expected.len() / 2];
                let from = Cursor::new(mid, u64::MAX);
                let later: Vec<u64> = expected.iter().copied().filter(|&s| s > mid).collect();
                assert_eq!(collect(&positions, &orders, from), later);
            }
        }
        assert_eq!(
            positions.newest(&orders),
            orders.values().map(|o| o.position()).max()
        );
    }

    #[test]
    fn entries_out_of_order_are_inserted_in_place() {
        let mut orders: OrderMap = OrderMap::default();
        let mut positions = Positions::default();
        let mut seqs: Vec<u64> = (1..=5_000).collect();
        fastrand::Rng::with_seed(9).shuffle(&mut seqs);
        for &seq in &seqs {
            let o = order(seq, seq);
            orders.insert(o.id, o);
            positions.push(o.position(), o.id);
        }
        assert_eq!(
            collect(&positions, &orders, Cursor::START),
            (1..=5_000).collect::<Vec<_>>()
        );
        assert!(positions
            .chunks
            .iter()
            .all(|c| c.entries.len() <= 2 * CHUNK));
    }
}
