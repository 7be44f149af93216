//! A read replica's side of the store: the writer that applies a primary's order
//! versions, and the measure of how far behind the primary it is.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cursor::Cursor;
use crate::error::StoreError;
use crate::model::Order;
use crate::store::{Recovery, Store, Writer};

/// The only writer of one shard of a replica (opened by [`Shards::open_replica`] or
/// [`Shards::add_replica_shard`]).
///
/// A replica follows a primary's shard by cursor, as an unfiltered reader does: the
/// primary's answers are the versions its store holds, in `(seq, rec)` order, and
/// [`ReplicaWriter::apply`] logs them and upserts them as they are — the path replay
/// takes, without validation. Positions are the primary's, so a replica's cursors
/// are the primary's cursors. Its files are a store's files: a replica's directory
/// can be opened as a primary's ([`Store::open`], `tranche feed serve --dir`).
///
/// [`Shards::open_replica`]: crate::Shards::open_replica
/// [`Shards::add_replica_shard`]: crate::Shards::add_replica_shard
pub struct ReplicaWriter {
    writer: Writer,
    shard: usize,
}

impl std::fmt::Debug for ReplicaWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaWriter")
            .field("shard", &self.shard)
            .field("writer", &self.writer)
            .finish()
    }
}

impl ReplicaWriter {
    pub(crate) fn new(writer: Writer, shard: usize) -> ReplicaWriter {
        ReplicaWriter { writer, shard }
    }

    /// The shard it writes.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// A readers' handle on the shard's store.
    pub fn store(&self) -> Store {
        self.writer.store()
    }

    /// What opening found on disk.
    pub fn recovery(&self) -> &Recovery {
        self.writer.recovery()
    }

    /// Where to follow the primary's shard on from: after the newest `seq` applied
    /// (every position with that `seq` or less; there is one per `seq`). The store's
    /// marks are what a restart recovers, so a restarted replica resumes where it
    /// stopped (per the store's [`Durability`](crate::Durability)), even when
    /// eviction has removed the newest order it applied.
    pub fn position(&self) -> Cursor {
        match self.writer.store().marks().0 {
            0 => Cursor::START,
            seq => Cursor::new(seq, u64::MAX),
        }
    }

    /// The primary's eviction floor as this replica knows it (its own floor): sent
    /// with [`position`](ReplicaWriter::position) to read on (see
    /// [`Store::read_for_replica`]).
    pub fn known_floor(&self) -> Cursor {
        self.writer.store().oldest()
    }

    /// Applies one answer of the primary: `orders`, versions of its store after this
    /// replica's [`position`](ReplicaWriter::position) in `(seq, rec)` order, logged
    /// as one record (synced per the durability policy) and made visible; then, if
    /// the primary's eviction `floor` has moved, the same eviction (terminal orders at
    /// or before it dropped, older cursors refused). The primary only answers a
    /// replica below its floor that knows the floor, or reads from the start, so
    /// whatever the replica holds below the floor is what the primary holds there.
    pub fn apply(&mut self, orders: &[Order], floor: Cursor) -> Result<(), StoreError> {
        debug_assert!(orders.windows(2).all(|w| w[0].position() < w[1].position()));
        self.writer.apply_versions(orders)?;
        if floor > self.known_floor() {
            self.writer.move_floor(floor, false)?;
        }
        Ok(())
    }

    /// Forgets every order, durably, to start over from the primary's beginning:
    /// for a replica that fell behind the primary's eviction floor (the orders it
    /// missed may have been evicted, so it cannot tell which of its own are stale),
    /// or finds itself ahead of the primary. Its readers' cursors stay valid.
    pub fn reset(&mut self) -> Result<(), StoreError> {
        self.writer.reset()
    }

    /// Syncs the log now if anything is unsynced.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.writer.sync()
    }

    /// Under [`Durability::Interval`](crate::Durability::Interval), syncs if due.
    pub fn sync_if_due(&mut self) -> Result<bool, StoreError> {
        self.writer.sync_if_due()
    }
}

/// How far one shard of a replica is behind its primary.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardLag {
    /// The shard.
    pub shard: usize,
    /// The newest `seq` the primary last said it had.
    pub primary_seq: u64,
    /// The newest `seq` applied here.
    pub applied_seq: u64,
    /// `primary_seq - applied_seq`: the primary's events not reflected here yet.
    pub seqs_behind: u64,
    /// How long the oldest of those has been known to be missing: from when the
    /// replica heard that the primary had it, to now (0 when caught up). While
    /// disconnected, the time since the replica last heard from the primary (it
    /// cannot know what it misses).
    pub seconds_behind: f64,
    /// Whether the replica is following the primary now.
    pub connected: bool,
    /// Times this shard started over from the primary's beginning.
    pub resyncs: u64,
}

/// How far a replica is behind its primary ([`ReplicaLag::report`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LagReport {
    /// Per shard, shard 0 first.
    pub shards: Vec<ShardLag>,
}

impl LagReport {
    /// The primary's events not reflected in the replica, over all shards.
    pub fn seqs_behind(&self) -> u64 {
        self.shards.iter().map(|s| s.seqs_behind).sum()
    }

    /// The largest lag in seconds of any shard.
    pub fn seconds_behind(&self) -> f64 {
        self.shards
            .iter()
            .map(|s| s.seconds_behind)
            .fold(0.0, f64::max)
    }

    /// Whether every shard is following the primary now.
    pub fn connected(&self) -> bool {
        !self.shards.is_empty() && self.shards.iter().all(|s| s.connected)
    }
}

/// The primary's newest `seq`s a shard heard of and has not applied yet, kept at
/// most this many (the oldest kept, so the lag in seconds is never understated).
const HEARD: usize = 1024;

#[derive(Default)]
struct ShardState {
    primary_seq: u64,
    applied_seq: u64,
    /// `(seq, when heard)`, `seq` increasing, each above `applied_seq`.
    heard: VecDeque<(u64, Instant)>,
    connected: bool,
    last_heard: Option<Instant>,
    resyncs: u64,
}

/// A replica's lag, updated by its followers and read by whoever reports it (a
/// status endpoint, metrics). Cheap to clone; every clone shares the figures.
#[derive(Clone)]
pub struct ReplicaLag {
    shards: Arc<Mutex<Vec<ShardState>>>,
    started: Instant,
}

impl Default for ReplicaLag {
    fn default() -> ReplicaLag {
        ReplicaLag::new()
    }
}

impl std::fmt::Debug for ReplicaLag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReplicaLag").field(&self.report()).finish()
    }
}

impl ReplicaLag {
    /// No shard known yet.
    pub fn new() -> ReplicaLag {
        ReplicaLag {
            shards: Arc::default(),
            started: Instant::now(),
        }
    }

    fn with<R>(&self, shard: usize, f: impl FnOnce(&mut ShardState) -> R) -> R {
        let mut shards = self.shards.lock();
        if shards.len() <= shard {
            shards.resize_with(shard + 1, ShardState::default);
        }
        f(&mut shards[shard])
    }

    /// The shard's follower is connected (or not) to the primary.
    pub fn set_connected(&self, shard: usize, connected: bool) {
        self.with(shard, |s| s.connected = connected);
    }

    /// The primary said, at `at`, that its shard's newest `seq` is `primary_seq`.
    pub fn heard(&self, shard: usize, primary_seq: u64, at: Instant) {
        self.with(shard, |s| {
            s.last_heard = Some(at);
            s.primary_seq = primary_seq;
            let newer = s.heard.back().is_none_or(|&(seq, _)| primary_seq > seq);
            if primary_seq > s.applied_seq && newer && s.heard.len() < HEARD {
                s.heard.push_back((primary_seq, at));
            }
        });
    }

    /// The shard has applied everything up to `applied_seq`.
    pub fn applied(&self, shard: usize, applied_seq: u64) {
        self.with(shard, |s| {
            s.applied_seq = applied_seq;
            while s.heard.front().is_some_and(|&(seq, _)| seq <= applied_seq) {
                s.heard.pop_front();
            }
        });
    }

    /// The shard started over from the primary's beginning.
    pub fn resynced(&self, shard: usize) {
        self.with(shard, |s| {
            s.resyncs += 1;
            s.applied_seq = 0;
        });
    }

    /// The figures now.
    pub fn report(&self) -> LagReport {
        let now = Instant::now();
        let shards = self.shards.lock();
        LagReport {
            shards: shards
                .iter()
                .enumerate()
                .map(|(shard, s)| {
                    let since = |at: Instant| now.saturating_duration_since(at);
                    let behind = if s.connected {
                        s.heard.front().map_or(Duration::ZERO, |&(_, at)| since(at))
                    } else {
                        since(s.last_heard.unwrap_or(self.started))
                    };
                    ShardLag {
                        shard,
                        primary_seq: s.primary_seq,
                        applied_seq: s.applied_seq,
                        seqs_behind: s.primary_seq.saturating_sub(s.applied_seq),
                        seconds_behind: behind.as_secs_f64(),
                        connected: s.connected,
                        resyncs: s.resyncs,
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_counts_from_when_the_oldest_missing_change_was_heard() {
        let lag = ReplicaLag::new();
        let t0 = Instant::now() - Duration::from_secs(10);
        lag.set_connected(0, true);
        lag.heard(0, 100, t0);
        lag.applied(0, 100);
        let report = lag.report();
        assert_eq!(report.seqs_behind(), 0);
        assert_eq!(report.seconds_behind(), 0.0);
        lag.heard(0, 150, t0 + Duration::from_secs(2));
        lag.heard(0, 200, t0 + Duration::from_secs(4));
        lag.applied(0, 160);
        let report = lag.report();
        assert_eq!(report.shards[0].seqs_behind, 40);
        // 150 is applied; 200 was heard 6 s ago.
        let seconds = report.seconds_behind();
        assert!((6.0..7.0).contains(&seconds), "{seconds}");
        lag.set_connected(1, false);
        let report = lag.report();
        assert!(!report.connected());
        assert_eq!(report.shards.len(), 2);
    }
}
