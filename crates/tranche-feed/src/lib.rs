//! The order-state feed's store (issue 17): the current state of every order an
//! exchange's trading cores report, served to clients that poll by cursor.
//!
//! A core sends [`Event`]s: an [`Event::Insert`] for a new order (its `rec` grows with
//! each insert) and an [`Event::Change`] for an amendment, fill or cancellation (every
//! event's `seq` grows). The store keeps each order once, at its latest version, at
//! position `(seq, rec)` of its latest change: when an order changes, its old position
//! is removed and it goes to the end. So a client reading from its [`Cursor`] receives
//! every order that changed since, once, at its current version, in `(seq, rec)`
//! order, and nothing it has not seen can land behind its cursor.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tranche_feed::*;
//! let dir = tempfile::tempdir()?;
//! let (store, mut writer) = Store::open(dir.path(), FeedOptions::default())?;
//! let new = NewOrder {
//!     seq: 1, rec: 1, id: OrderId(7), firm: FirmId(1), broker: BrokerId(10),
//!     instrument: InstrumentId(100), side: Side::Buy, price: 101_25, quantity: 500,
//!     created_at: 1_700_000_000_000_000_000,
//! };
//! let fill = OrderChange {
//!     seq: 2, id: OrderId(7), price: 101_25, quantity: 500, filled: 200,
//!     status: Status::PartiallyFilled, updated_at: 1_700_000_000_000_000_500,
//! };
//! writer.apply(&[Event::Insert(new), Event::Change(fill)])?;
//! let page = store.read(Cursor::START, Filter::Firm(FirmId(1)), 100)?;
//! assert_eq!(page.orders.len(), 1); // once, at its latest version
//! assert_eq!(page.orders[0].filled, 200);
//! assert_eq!(page.next, Cursor::new(2, 1));
//! let resumed: Cursor = page.next.to_string().parse()?; // the client's opaque token
//! assert!(store.read(resumed, Filter::All, 100)?.orders.is_empty());
//! # Ok(()) }
//! ```
//!
//! # Design
//!
//! **Indexes.** A hash map holds every order at its latest version, by id. The feed
//! order is a list of positions `(seq, rec, id)`, and each firm, broker account and
//! instrument has one too (`src/positions.rs`). Positions only grow, so
//! moving an order to the end is a push on four lists; the old version's entries stay
//! where they are and are dead from then on (an entry is live while its order's
//! current version is at its position, which a reader checks by id). A read finds its
//! cursor by binary search and scans on, skipping dead entries; a filtered read scans
//! only its key's list. The lists are chunks of at most 1,024 entries, and a chunk is
//! compacted on its own once fewer than half of its entries are live, so no write
//! pays for more than one chunk and nothing pauses for the whole list. This replaced
//! one `BTreeMap` of orders and a `BTreeSet` per key: moving an order was a removal
//! and an insertion in four trees, each walking from the root through cold nodes, the
//! largest item of the server's CPU under the pilot's shape (15–20 %); the lists cut
//! the writer's CPU for a million events by 3.1–3.8× (`examples/throughput.rs`). The
//! trees had been kept because a vector with tombstones needs compaction pauses;
//! chunks bound each compaction to 1,024 entries.
//!
//! **Concurrency.** A `parking_lot::RwLock` guards the indexes. There is one
//! [`Writer`] (held by the ingest task; a lock file keeps out a second one, even from
//! another process) and any number of [`Store`] handles. The writer does all its slow
//! work without the write lock: it validates a batch under a *read* lock (readers go
//! on), encodes and appends it to the log and syncs it with no lock at all, and only
//! then takes the write lock to make it visible — in slices of 256 orders, so a reader
//! never waits for more than one slice. Readers likewise copy out 512 orders
//! per lock hold (a page of up to [`MAX_READ_LIMIT`] is read in slices, resuming from
//! its own last position). A write becomes visible only once it is
//! durable per the policy, so no reader ever sees, and holds a cursor past, a batch
//! a crash could lose.
//!
//! **All-or-nothing batches.** Each event is checked against the order's current
//! version (in the store, or earlier in the same batch or group) and turned into the
//! order's next version; the first bad event refuses the whole batch with a
//! [`BatchError`] naming its index and field. Nothing reaches the log or the indexes
//! before the whole batch passed. [`Writer::apply_group`] commits several batches with
//! one write and one sync (group commit), each still all-or-nothing on its own.
//!
//! **Wake-ups.** [`Store::wait_for`] sleeps on a `tokio::sync::Notify` of its own
//! filter key — one per firm, per broker account, per instrument, and one for the
//! unfiltered stream — created when the first waiter registers and dropped with the
//! last. After a write the writer signals each key the write touched, once, so a
//! waiter on firm A is never woken by a write touching only firm B (one shared
//! wake-up made filtered readers wake ~4.7× more and doubled p99 in the peers'
//! measurements).
//!
//! **Durability.** An append-only log in segments (`log-<first seq>.log`), one record
//! per batch: `length u32 | crc32 u32 | payload`, the payload holding the versions of
//! the orders the batch produced (78 bytes each, a fixed little-endian layout). Logging
//! resulting versions rather than events makes replay a plain upsert with no
//! validation, idempotent over what a snapshot already holds. The layout is written by
//! hand rather than with bincode or postcard: every field is fixed-width, so encoding
//! is a handful of copies into a reused buffer (no serde dispatch, no varints, no
//! allocation), and the format is documented here rather than by a crate's version.
//! [`Durability`] says when writes are synced. On ext4 and XFS a thread keeps zeros
//! written and synced a few MiB ahead of the log's end ([`FeedOptions::zero_ahead`]),
//! so that a sync flushes the batch's blocks and no change of the file's size, which
//! would take a journal commit too (the sync's p99 here: 1.5–2.6 ms → 0.3–0.9 ms).
//! On open, a record cut short or failing its checksum at the end of the last segment
//! is a torn write — an unacknowledged batch — and is cut off, as is a zero-filled
//! tail (zeros written ahead); damage anywhere else is [`StoreError::Corrupt`] naming the
//! file and offset. A snapshot ([`Writer::begin_snapshot`], or automatically as the
//! log grows) starts a new segment at the next sequence number `S + 1` and copies the
//! orders to `snapshot-<S>.snap` on a thread of its own, slice by slice, while writes
//! and reads go on (a checksum over the whole file; written under a temporary name,
//! synced, renamed); then the segments before `S + 1` are deleted. The copy is fuzzy
//! (writes continue under it) and the log from `S + 1` makes it exact: a restart
//! loads the newest snapshot and replays the log after it as upserts that keep the
//! newer version of each order. Cursors are positions, not file offsets, so every
//! cursor stays valid across restarts and snapshots.
//!
//! **Eviction.** The store holds current state. [`Writer::evict_terminal_through`]
//! drops finished orders at or before a floor (open orders stay whatever their age)
//! and makes the floor the oldest cursor served: an older cursor gets
//! [`ReadError::TooOld`] carrying it (the HTTP layer's 410); [`Cursor::START`] always
//! reads everything held.
//!
//! Ids are numbers (`u64` orders, `u32` firms, brokers and instruments), as a trading
//! core numbers them; mapping member codes to numbers is the ingest layer's.
//!
//! # Shards
//!
//! An exchange with several trading cores, each numbering its own events, has one
//! store per core: a *shard*. [`Shards::open`] opens `K` of them (shard 0 in the
//! directory itself, shard `k` in `shard-<k>`, see [`shard_dir`]), each with its own
//! writer, `seq`, `rec`, log and group commit, sharing one set of wake-ups. Readers
//! see one feed: a [`VectorCursor`] holds a position per shard in one opaque token,
//! and [`Shards::read_into`] merges the shards without a global sequence.
//!
//! - **One page, several shards.** A read takes up to `limit` orders of its filter:
//!   from each shard a prefix of what follows that shard's position, in `(seq, rec)`
//!   order, merged by `updated_at` (a k-way merge of the shards' heads: the page holds
//!   the changes that have waited longest, whichever core made them). Each shard's
//!   position moves past what was returned from it, and no further. So per shard a
//!   reader gets an order's versions in `seq` order and never goes back; a client
//!   that fell behind gets each changed order once, at its latest version. Merging by
//!   `updated_at` rather than round-robin keeps delivery fair when a page is full (a
//!   busy shard cannot make a quiet one's changes wait behind its backlog), and costs
//!   `K` comparisons per order; `created_at` would rank a fresh fill of an old order
//!   before an older new order. The shards are read a slice at a time under their
//!   read locks into per-thread buffers, so a merged read allocates nothing once
//!   warm, and at most a slice per shard is read and not returned. With one shard a
//!   read is the store's own.
//! - **Cursors.** A one-shard cursor is the store's 21-byte [`Cursor`], so a
//!   one-shard feed is exactly a store and every cursor it gave stays valid; more
//!   shards are version 2 (`6 + 16K` bytes with a CRC-32). A shard the cursor does
//!   not name reads from its beginning: a shard added later (open with more shards;
//!   removing one is refused) joins old cursors. A cursor naming more shards than the
//!   feed has, or ahead in a shard, is refused ([`ShardReadError`]); one older than a
//!   shard's floor is refused with the oldest cursor served, each too-old position
//!   raised to its shard's floor.
//! - **Long polls.** The shards' writers signal one shared wake-up per filter key, so
//!   [`Shards::wait_for`] registers once and wakes on a write to its key in any shard
//!   (writes are numbered by the shared wake-ups, not per writer, so two shards'
//!   writes never share a number and swallow each other's signal).
//!
//! # Replicas
//!
//! A read replica holds a copy of a primary's shards and serves unfiltered reads.
//! It follows each primary shard as an unfiltered reader does, by cursor: the primary
//! answers with versions its store holds, in position order, and
//! [`ReplicaWriter::apply`] logs them and upserts them as they are (replay's path, no
//! validation), so positions, cursors and files are the primary's. A replica's store
//! keeps no per-key index (an upsert pushes on one list instead of four) and refuses
//! filtered reads ([`ShardReadError::Unfiltered`]). It resumes after its newest `seq`
//! applied, which a restart recovers. Evictions follow: each answer carries the
//! primary's floor, which the replica adopts. Reading from below the floor is
//! allowed to a replica that knows that floor ([`Store::read_for_replica`]: a pass
//! from the start, paged); a replica whose floor has been overtaken may hold orders
//! that ended and were evicted unseen, so it starts over ([`ReplicaWriter::reset`],
//! crash-safe behind a marker file). [`ReplicaLag`] measures how far behind it is.
//! The network side is in `tranche-feed-tcp`.

#![deny(missing_docs)]

mod cursor;
mod disk;
mod error;
mod model;
mod positions;
mod replica;
mod shards;
mod state;
mod store;
mod validate;
mod vector;
mod wake;
mod zeroing;

pub use cursor::{Cursor, CursorError, CURSOR_BYTES, CURSOR_CHARS};
pub use error::{ApplyError, StoreError};
pub use model::{
    BrokerId, Event, Filter, FirmId, InstrumentId, NewOrder, Order, OrderChange, OrderId, Side,
    Status,
};
pub use replica::{LagReport, ReplicaLag, ReplicaWriter, ShardLag};
pub use shards::{shard_dir, ShardReadError, Shards};
pub use state::ReadError;
pub use store::{
    Durability, FeedOptions, Page, Recovery, SnapshotInfo, Store, WaitOutcome, Writer, MAX_BATCH,
    MAX_READ_LIMIT,
};
pub use validate::{BatchError, MAX_PRICE, MAX_QUANTITY};
pub use vector::{
    VectorCursor, VectorCursorBytes, MAX_SHARDS, MAX_VECTOR_CURSOR_BYTES, MAX_VECTOR_CURSOR_CHARS,
};
