//! The store: readers' [`Store`] handle and the single [`Writer`].

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::cursor::Cursor;
use crate::disk::{self, Entry, Segment, SnapshotHead};
use crate::error::{ApplyError, StoreError};
use crate::model::{Event, Filter, Order, OrderId};
use crate::state::{FastMap, ReadError, State};
use crate::validate::{next_version, BatchError};
use crate::wake::Signals;

/// The most orders one read returns (a larger `limit` is cut to it). A read holds the
/// lock the writer needs for 512 orders at a time, whatever its limit.
pub const MAX_READ_LIMIT: usize = 10_000;

/// The most events one batch may hold (its log record stays well under the largest
/// record a reader of the log accepts).
pub const MAX_BATCH: usize = 1_000_000;

/// Orders a reader copies per hold of the read lock: a long page is read in slices so
/// that the writer never waits for more than one.
const READ_SLICE: usize = 512;

/// Orders applied per hold of the write lock: a big write is made visible in slices so
/// that readers wait for one slice, never for the whole write.
const APPLY_SLICE: usize = 256;

/// When an applied write is flushed to the disk (`fdatasync`), which is when
/// [`Writer::apply`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Every write is synced before it is acknowledged: an acknowledged batch survives
    /// a power cut. Group writes with [`Writer::apply_group`] to share one sync.
    EveryWrite,
    /// Writes are acknowledged once the operating system has them (they survive the
    /// process being killed) and synced when this long has passed since the last sync,
    /// checked at each write and by [`Writer::sync_if_due`] (call it from a timer so an
    /// idle writer still syncs). A power cut loses at most about this much.
    Interval(Duration),
    /// Never synced except by [`Writer::sync`], snapshots and a clean close: for tests
    /// and emulators.
    Never,
}

/// How a store is opened.
#[derive(Clone, Debug)]
pub struct FeedOptions {
    /// When writes are synced (default: every write).
    pub durability: Durability,
    /// Start a snapshot in the background (and a new log segment) at the next write
    /// once the current segment has grown past this many bytes, or past twice the last
    /// snapshot's size if that is more (so snapshots never write more than half what
    /// the log does), bounding what a restart replays. `None`: only when
    /// [`Writer::snapshot`] or [`Writer::begin_snapshot`] is called. Default 256 MiB.
    pub snapshot_after_bytes: Option<u64>,
    /// Keep zeros written and synced this many bytes ahead of the log's end, so that
    /// syncing a write flushes its data and no file-size change (see the crate docs:
    /// it cuts the sync's p99 by half or more on ext4). Capped at
    /// `snapshot_after_bytes`. Used only where it helps: on ext4, XFS or an overlay,
    /// and not under [`Durability::Never`] (copy-on-write filesystems such as btrfs
    /// or ZFS would write twice, tmpfs has nothing to sync). Default 8 MiB.
    pub zero_ahead: Option<u64>,
}

impl FeedOptions {
    /// How far ahead of the log's end zeros are kept, if at all.
    fn zeros_ahead(&self) -> Option<u64> {
        if self.durability == Durability::Never {
            return None;
        }
        let ahead = self.zero_ahead?;
        Some(
            self.snapshot_after_bytes
                .map_or(ahead, |limit| ahead.min(limit)),
        )
    }
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions {
            durability: Durability::EveryWrite,
            snapshot_after_bytes: Some(256 << 20),
            zero_ahead: Some(8 << 20),
        }
    }
}

/// One page of a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The orders after the cursor, in `(seq, rec)` order, each at its latest version.
    pub orders: Vec<Order>,
    /// Where to read on from: the last order's position, or the cursor given when the
    /// page is empty.
    pub next: Cursor,
}

/// How [`Store::wait_for`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitOutcome {
    /// Orders ready for the filter after the cursor (counted no further than
    /// `min_batch`).
    pub ready: usize,
    /// How many times the writer woke this waiter.
    pub wakeups: u32,
    /// Whether the deadline passed before `min_batch` orders were ready.
    pub timed_out: bool,
}

/// What opening found on disk.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The snapshot loaded, if any.
    pub snapshot: Option<PathBuf>,
    /// Log segments replayed.
    pub segments: usize,
    /// Bytes of a torn tail cut off the last segment (an unacknowledged write).
    pub torn_bytes: u64,
    /// Bytes of zeros cut off the last segment: written ahead of the log's end (see
    /// [`FeedOptions::zero_ahead`]) before a crash, or space whose data never reached
    /// the disk (an unacknowledged write).
    pub zeroed_bytes: u64,
}

/// A snapshot written by [`Writer::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its file.
    pub path: PathBuf,
    /// Orders in it.
    pub orders: u64,
    /// The newest sequence number it covers.
    pub seq: u64,
}

pub(crate) struct Shared {
    pub(crate) state: RwLock<State>,
    pub(crate) signals: Arc<Signals>,
    dir: PathBuf,
}

/// A handle for readers: cheap to clone, shareable across threads and tasks.
#[derive(Clone)]
pub struct Store {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.shared.dir)
            .finish_non_exhaustive()
    }
}

/// The only writer of a store (a lock file keeps a second one out, in this process or
/// another). Not `Clone`: ingest funnels every batch through it, which is what lets it
/// group writes and validate without locks held against readers.
pub struct Writer {
    shared: Arc<Shared>,
    options: FeedOptions,
    segment: Segment,
    _lock: fs::File,
    recovery: Recovery,
    broken: bool,
    unsynced: bool,
    last_sync: Instant,
    snapshotting: Option<SnapshotThread>,
    last_snapshot_bytes: u64,
    // Reused across writes so the apply path does not allocate once warmed up.
    buf: Vec<u8>,
    pending: Vec<Order>,
    overlay: FastMap<OrderId, usize>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("dir", &self.shared.dir)
            .field("segment", &self.segment.path)
            .finish_non_exhaustive()
    }
}

type SnapshotThread = std::thread::JoinHandle<Result<SnapshotInfo, StoreError>>;

fn join_snapshot(running: SnapshotThread) -> Result<SnapshotInfo, StoreError> {
    match running.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// The snapshot thread's work: see [`Writer::begin_snapshot`].
fn write_snapshot(
    shared: &Shared,
    dir: &Path,
    head: SnapshotHead,
    until: Cursor,
) -> Result<SnapshotInfo, StoreError> {
    let seq = head.marks.seq;
    let path = dir.join(disk::snapshot_name(seq));
    let tmp = path.with_extension("tmp");
    let mut after = Cursor::START;
    let orders = disk::write_snapshot(&tmp, head, |chunk| {
        if after >= until {
            return;
        }
        shared.state.read().read(after, Filter::All, 4096, chunk);
        chunk.retain(|order| order.position() <= until);
        if let Some(last) = chunk.last() {
            after = last.position();
        }
    })?;
    fs::rename(&tmp, &path).map_err(disk::io_error("rename", &tmp))?;
    disk::sync_dir(dir)?;
    for entry in fs::read_dir(dir).map_err(disk::io_error("list", dir))? {
        let entry = entry.map_err(disk::io_error("list", dir))?;
        match disk::parse_name(&entry.file_name().to_string_lossy()) {
            Some((true, start)) if start <= seq => disk::remove(&entry.path())?,
            Some((false, older)) if older != seq => disk::remove(&entry.path())?,
            _ => {}
        }
    }
    disk::sync_dir(dir)?;
    Ok(SnapshotInfo { path, orders, seq })
}

/// The marker of a replica's start-over (see [`Writer::reset`]).
const RESYNC: &str = "RESYNC";

/// Removes every log segment and snapshot in `dir`.
fn remove_data_files(dir: &Path) -> Result<(), StoreError> {
    for entry in fs::read_dir(dir).map_err(disk::io_error("list", dir))? {
        let entry = entry.map_err(disk::io_error("list", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if disk::parse_name(&name).is_some() || name.ends_with(".tmp") {
            disk::remove(&entry.path())?;
        }
    }
    disk::sync_dir(dir)
}

fn evict(state: &mut State, floor: Cursor) -> usize {
    state.floor = floor;
    let ids = state.terminal_through(floor);
    for id in &ids {
        state.remove(*id);
    }
    ids.len()
}

impl Store {
    /// Opens (or creates) the store in `dir`: loads the newest snapshot, replays the
    /// log after it, cuts a torn tail off the last log segment, and returns the
    /// readers' handle and the writer.
    pub fn open(dir: &Path, options: FeedOptions) -> Result<(Store, Writer), StoreError> {
        Store::open_with(dir, options, Arc::default(), false)
    }

    /// [`Store::open`] with the wake-ups of the feed the store is a shard of, and
    /// without per-key indexes for a replica.
    pub(crate) fn open_with(
        dir: &Path,
        options: FeedOptions,
        signals: Arc<Signals>,
        unindexed: bool,
    ) -> Result<(Store, Writer), StoreError> {
        fs::create_dir_all(dir).map_err(disk::io_error("create", dir))?;
        let lock_path = dir.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(disk::io_error("open", &lock_path))?;
        match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(StoreError::Locked { path: lock_path });
            }
            Err(errno) => {
                return Err(StoreError::Io {
                    action: "lock",
                    path: lock_path,
                    source: errno.into(),
                });
            }
        }

        // A replica's start-over that a crash interrupted: finish it (its files are
        // removed before the marker, so none of the old state may come back).
        let resync = dir.join(RESYNC);
        if resync.exists() {
            remove_data_files(dir)?;
            disk::remove(&resync)?;
            disk::sync_dir(dir)?;
        }
        let mut snapshots = Vec::new();
        let mut segments = Vec::new();
        for entry in fs::read_dir(dir).map_err(disk::io_error("list", dir))? {
            let entry = entry.map_err(disk::io_error("list", dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                disk::remove(&entry.path())?;
            } else if let Some((is_log, n)) = disk::parse_name(&name) {
                if is_log {
                    segments.push(n);
                } else {
                    snapshots.push(n);
                }
            }
        }
        snapshots.sort_unstable();
        segments.sort_unstable();

        let mut state = State::default();
        state.unindexed = unindexed;
        let mut recovery = Recovery::default();
        let mut covered = 0;
        let mut last_snapshot_bytes = 0;
        if let Some(&seq) = snapshots.last() {
            let path = dir.join(disk::snapshot_name(seq));
            let head = disk::read_snapshot(&path, |order| {
                state.upsert(order);
                last_snapshot_bytes += disk::ORDER_BYTES as u64;
            })?;
            // A snapshot may hold versions newer than where it began: keep the higher.
            state.marks.seq = state.marks.seq.max(head.marks.seq);
            state.marks.rec = state.marks.rec.max(head.marks.rec);
            state.floor = head.floor;
            covered = head.marks.seq;
            recovery.snapshot = Some(path);
        }
        let mut segment = None;
        for (i, &start) in segments.iter().enumerate() {
            let path = dir.join(disk::segment_name(start));
            let last = i + 1 == segments.len();
            let replayed = disk::replay_segment(&path, last, |offset, entry| {
                match entry {
                    Entry::Orders(bytes) => {
                        for order in disk::orders_of(bytes) {
                            let order = order.ok_or_else(|| StoreError::Corrupt {
                                path: path.clone(),
                                offset,
                                problem: "expected an order, got an unknown side or status code"
                                    .into(),
                            })?;
                            if order.seq > covered {
                                state.upsert(order);
                            }
                        }
                    }
                    Entry::Floor(floor) => {
                        if floor > state.floor {
                            evict(&mut state, floor);
                        }
                    }
                }
                Ok(())
            })?;
            recovery.segments += 1;
            if last {
                recovery.torn_bytes = replayed.torn;
                recovery.zeroed_bytes = replayed.zeroed;
                segment = Some(Segment::reopen(
                    path,
                    start,
                    replayed.valid_len,
                    options.zeros_ahead(),
                )?);
            }
        }
        let segment = match segment {
            Some(segment) => segment,
            None => Segment::create(dir, state.marks.seq + 1, options.zeros_ahead())?,
        };
        // Leftovers of a crash during a snapshot: older snapshots, and segments whose
        // successor starts within what the snapshot covers.
        if let Some((_, older)) = snapshots.split_last() {
            for &seq in older {
                disk::remove(&dir.join(disk::snapshot_name(seq)))?;
            }
        }
        for pair in segments.windows(2) {
            if pair[1] <= covered + 1 {
                disk::remove(&dir.join(disk::segment_name(pair[0])))?;
            }
        }

        let shared = Arc::new(Shared {
            state: RwLock::new(state),
            signals,
            dir: dir.to_path_buf(),
        });
        let writer = Writer {
            shared: Arc::clone(&shared),
            options,
            segment,
            _lock: lock,
            recovery,
            broken: false,
            unsynced: false,
            last_sync: Instant::now(),
            snapshotting: None,
            last_snapshot_bytes,
            buf: Vec::new(),
            pending: Vec::new(),
            overlay: FastMap::default(),
        };
        Ok((Store { shared }, writer))
    }

    /// Up to `limit` (at most [`MAX_READ_LIMIT`]) orders passing `filter` whose
    /// position is after `cursor`, in `(seq, rec)` order, each at its latest version,
    /// and the cursor to read on from.
    pub fn read(&self, cursor: Cursor, filter: Filter, limit: usize) -> Result<Page, ReadError> {
        let mut orders = Vec::with_capacity(limit.min(MAX_READ_LIMIT));
        let next = self.read_into(cursor, filter, limit, &mut orders)?;
        Ok(Page { orders, next })
    }

    /// [`Store::read`] into a buffer of the caller's (appended to, not cleared); returns
    /// the cursor to read on from.
    pub fn read_into(
        &self,
        cursor: Cursor,
        filter: Filter,
        limit: usize,
        out: &mut Vec<Order>,
    ) -> Result<Cursor, ReadError> {
        let mut left = limit.min(MAX_READ_LIMIT);
        let mut next = cursor;
        self.shared.state.read().check(cursor)?;
        while left > 0 {
            let state = self.shared.state.read();
            // The floor may have moved since the last slice: stop before a gap (the
            // next read from `next` reports it).
            if state.check(next).is_err() {
                break;
            }
            let before = out.len();
            state.read(next, filter, left.min(READ_SLICE), out);
            drop(state);
            let got = out.len() - before;
            match out.last() {
                Some(last) if got > 0 => next = last.position(),
                _ => break,
            }
            if got < left.min(READ_SLICE) {
                break;
            }
            left -= got;
        }
        Ok(next)
    }

    /// A replica's read of its primary: every order after `cursor` (up to `limit`, at
    /// most [`MAX_READ_LIMIT`]), as [`Store::read_into`] with [`Filter::All`], except
    /// that a cursor before the eviction floor is served if `known_floor` is that
    /// floor. A replica that knows the floor has adopted it and holds nothing the
    /// floor's eviction removed, so it can read on from below it (a pass from the
    /// start, paged); once the floor has moved past what it knows, orders it holds may
    /// have ended and been evicted unseen, and the read is [`ReadError::TooOld`].
    pub fn read_for_replica(
        &self,
        cursor: Cursor,
        known_floor: Cursor,
        limit: usize,
        out: &mut Vec<Order>,
    ) -> Result<Cursor, ReadError> {
        let mut left = limit.min(MAX_READ_LIMIT);
        let mut next = cursor;
        while left > 0 {
            let state = self.shared.state.read();
            match state.check(next) {
                Ok(()) => {}
                Err(ReadError::TooOld { .. }) if state.floor == known_floor => {}
                // The floor moved past the cursor since the first slice: stop before
                // the gap (the next read reports it).
                Err(_) if next != cursor => break,
                Err(error) => return Err(error),
            }
            let before = out.len();
            state.read(next, Filter::All, left.min(READ_SLICE), out);
            drop(state);
            let got = out.len() - before;
            match out.last() {
                Some(last) if got > 0 => next = last.position(),
                _ => break,
            }
            if got < left.min(READ_SLICE) {
                break;
            }
            left -= got;
        }
        Ok(next)
    }

    /// How many orders pass `filter` after `cursor`, counting no further than `cap`.
    pub fn count_after(
        &self,
        cursor: Cursor,
        filter: Filter,
        cap: usize,
    ) -> Result<usize, ReadError> {
        let state = self.shared.state.read();
        state.check(cursor)?;
        Ok(state.count_after(cursor, filter, cap))
    }

    /// Waits until at least `min_batch` orders passing `filter` are ready after
    /// `cursor`, or `deadline` passes; then read them with [`Store::read`].
    ///
    /// The waiter sleeps on its filter key's own wake-up (one per firm, broker account,
    /// instrument, and one for [`Filter::All`]), which the writer signals once per
    /// applied write that touched the key, after the write is visible. A write that
    /// touches only other keys does not wake it.
    pub async fn wait_for(
        &self,
        filter: Filter,
        cursor: Cursor,
        min_batch: usize,
        deadline: tokio::time::Instant,
    ) -> Result<WaitOutcome, ReadError> {
        self.wait_with(filter, min_batch, deadline, |cap| {
            self.count_after(cursor, filter, cap)
        })
        .await
    }

    /// A replica's [`Store::wait_for`] one order after `cursor`, with the check of
    /// [`Store::read_for_replica`].
    pub async fn wait_for_replica(
        &self,
        cursor: Cursor,
        known_floor: Cursor,
        deadline: tokio::time::Instant,
    ) -> Result<WaitOutcome, ReadError> {
        self.wait_with(Filter::All, 1, deadline, |cap| {
            let state = self.shared.state.read();
            match state.check(cursor) {
                Err(ReadError::TooOld { .. }) if state.floor == known_floor => {}
                checked => checked?,
            }
            Ok(state.count_after(cursor, Filter::All, cap))
        })
        .await
    }

    /// Waits on `filter`'s wake-up until `count(min_batch)` reaches `min_batch` or
    /// `deadline` passes.
    async fn wait_with(
        &self,
        filter: Filter,
        min_batch: usize,
        deadline: tokio::time::Instant,
        count: impl Fn(usize) -> Result<usize, ReadError>,
    ) -> Result<WaitOutcome, ReadError> {
        let registration = self.shared.signals.register(filter);
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        let mut wakeups = 0;
        loop {
            let notified = registration.signal.notify.notified();
            tokio::pin!(notified);
            // Registered before the count: a write after the count wakes us.
            notified.as_mut().enable();
            let ready = count(min_batch)?;
            if ready >= min_batch {
                return Ok(WaitOutcome {
                    ready,
                    wakeups,
                    timed_out: false,
                });
            }
            tokio::select! {
                biased;
                () = &mut notified => wakeups += 1,
                () = &mut sleep => {
                    let ready = count(min_batch)?;
                    return Ok(WaitOutcome { ready, wakeups, timed_out: ready < min_batch });
                }
            }
        }
    }

    /// Waiters in [`Store::wait_for`] on `filter` now.
    pub fn waiting(&self, filter: Filter) -> usize {
        self.shared.signals.waiting(filter)
    }

    /// How many times `filter`'s wake-up was signalled since its current waiters
    /// registered (0 when nobody waits on it: an unused wake-up is dropped).
    pub fn signals_sent(&self, filter: Filter) -> u64 {
        self.shared.signals.sent(filter)
    }

    /// The latest version of one order.
    pub fn get(&self, id: OrderId) -> Option<Order> {
        self.shared.state.read().get(id).copied()
    }

    /// How many orders the store holds.
    pub fn len(&self) -> usize {
        self.shared.state.read().len()
    }

    /// Whether the store holds no order.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of the newest order version ([`Cursor::START`] when empty).
    pub fn newest(&self) -> Cursor {
        self.shared.state.read().newest()
    }

    /// The oldest cursor the store serves besides [`Cursor::START`]: the eviction
    /// floor ([`Cursor::START`] if nothing was ever evicted).
    pub fn oldest(&self) -> Cursor {
        self.shared.state.read().floor
    }

    /// The highest sequence and record numbers applied: a core resuming after a
    /// restart continues after them.
    pub fn marks(&self) -> (u64, u64) {
        let marks = self.shared.state.read().marks;
        (marks.seq, marks.rec)
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }
}

impl Writer {
    /// A readers' handle on the same store.
    pub fn store(&self) -> Store {
        Store {
            shared: Arc::clone(&self.shared),
        }
    }

    /// What opening found on disk.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Applies one batch all-or-nothing: every event is checked first (an error names
    /// the event's index and field, and nothing is applied), then the batch is logged,
    /// synced per the [`Durability`], made visible to readers and their wake-ups
    /// signalled. Returns the position of the batch's last event (the newest position
    /// for an empty batch).
    pub fn apply(&mut self, events: &[Event]) -> Result<Cursor, ApplyError> {
        let mut results = self.apply_group(&[events])?;
        Ok(results.pop().expect("one result per batch")?)
    }

    /// Applies several batches with one log write and one sync (group commit): each
    /// batch is all-or-nothing on its own, checked against the store and the batches
    /// before it in the group; a refused batch does not affect the others. Returns one
    /// result per batch, or an error of the files: then nothing was made visible or
    /// acknowledged (after a failed sync the writer refuses further writes, and whether
    /// the group survives a reopen is unknown, as for any unacknowledged write).
    ///
    /// Ingest groups by draining whatever batches its connections have queued into
    /// one call, so one sync covers them all however many producers there are.
    pub fn apply_group(
        &mut self,
        batches: &[&[Event]],
    ) -> Result<Vec<Result<Cursor, BatchError>>, StoreError> {
        self.check_usable()?;
        // Before anything of this group is applied, so that a failed snapshot fails a
        // write that applied nothing.
        self.tend_snapshots()?;
        self.pending.clear();
        self.overlay.clear();
        self.buf.clear();
        let mut results = Vec::with_capacity(batches.len());
        {
            let state = self.shared.state.read();
            let mut marks = state.marks;
            let mut newest = state.newest();
            for batch in batches {
                let start = self.pending.len();
                let saved = marks;
                let mut refused = None;
                if batch.len() > MAX_BATCH {
                    refused = Some(BatchError {
                        index: MAX_BATCH,
                        order: batch[MAX_BATCH].order_id(),
                        field: "batch",
                        problem: format!(
                            "expected at most {MAX_BATCH} events in a batch, got {}",
                            batch.len()
                        ),
                    });
                }
                for (index, event) in batch.iter().enumerate() {
                    if refused.is_some() {
                        break;
                    }
                    let id = event.order_id();
                    let current = match self.overlay.get(&id) {
                        Some(&at) => Some(&self.pending[at]),
                        None => state.get(id),
                    };
                    match next_version(index, event, current, &marks) {
                        Ok(order) => {
                            marks.seq = order.seq;
                            marks.rec = marks.rec.max(order.rec);
                            self.overlay.insert(id, self.pending.len());
                            self.pending.push(order);
                        }
                        Err(error) => {
                            refused = Some(error);
                            break;
                        }
                    }
                }
                if let Some(error) = refused {
                    self.pending.truncate(start);
                    marks = saved;
                    self.overlay.clear();
                    for (at, order) in self.pending.iter().enumerate() {
                        self.overlay.insert(order.id, at);
                    }
                    results.push(Err(error));
                } else {
                    if let Some(last) = self.pending[start..].last() {
                        newest = last.position();
                        disk::encode_orders_record(&self.pending[start..], &mut self.buf);
                    }
                    results.push(Ok(newest));
                }
            }
        }
        if self.buf.is_empty() {
            return Ok(results);
        }
        self.write_buf()?;
        for slice in self.pending.chunks(APPLY_SLICE) {
            let mut state = self.shared.state.write();
            for order in slice {
                state.upsert(*order);
            }
        }
        self.shared.signals.wake(&self.pending);
        Ok(results)
    }

    /// A replica's write: `orders` are versions a primary's store holds, read from it
    /// in position order, so they are logged and upserted as they are, without
    /// validation (as replay does). A version not newer than the one held is ignored.
    pub(crate) fn apply_versions(&mut self, orders: &[Order]) -> Result<(), StoreError> {
        self.check_usable()?;
        if orders.is_empty() {
            return Ok(());
        }
        self.tend_snapshots()?;
        self.buf.clear();
        disk::encode_orders_record(orders, &mut self.buf);
        self.write_buf()?;
        for slice in orders.chunks(APPLY_SLICE) {
            let mut state = self.shared.state.write();
            for order in slice {
                state.upsert(*order);
            }
        }
        self.shared.signals.wake(orders);
        Ok(())
    }

    /// A replica's start-over: forgets every order, durably (a marker file makes a
    /// crash half way through finish it on the next open), and starts an empty log.
    /// Readers' cursors stay valid (not taken for cursors from ahead of the store).
    pub(crate) fn reset(&mut self) -> Result<(), StoreError> {
        self.check_usable()?;
        if let Some(running) = self.snapshotting.take() {
            // Its files are about to go: whatever it did no longer matters.
            let _ = running.join();
        }
        let dir = self.shared.dir.clone();
        let marker = dir.join(RESYNC);
        fs::File::create(&marker)
            .and_then(|file| file.sync_all())
            .map_err(disk::io_error("create", &marker))?;
        disk::sync_dir(&dir)?;
        remove_data_files(&dir)?;
        {
            let mut state = self.shared.state.write();
            state.kept_seq = state.kept_seq.max(state.marks.seq);
            state.clear(Cursor::START);
            state.marks = Default::default();
        }
        self.unsynced = false;
        self.last_snapshot_bytes = 0;
        self.segment = Segment::create(&dir, 1, self.options.zeros_ahead())?;
        disk::remove(&marker)?;
        disk::sync_dir(&dir)
    }

    fn check_usable(&self) -> Result<(), StoreError> {
        if self.broken {
            return Err(StoreError::Poisoned {
                path: self.segment.path.clone(),
                source: std::io::Error::other("an earlier write or sync failed"),
            });
        }
        Ok(())
    }

    /// Appends `self.buf` and syncs per the policy; a failure that leaves the log in
    /// doubt breaks the writer.
    fn write_buf(&mut self) -> Result<(), StoreError> {
        match self.segment.append(&self.buf) {
            Ok(()) => {}
            Err(error @ StoreError::Poisoned { .. }) => {
                self.broken = true;
                return Err(error);
            }
            Err(error) => return Err(error),
        }
        self.unsynced = true;
        let due = match self.options.durability {
            Durability::EveryWrite => true,
            Durability::Interval(every) => self.last_sync.elapsed() >= every,
            Durability::Never => false,
        };
        if due {
            // After a failed fsync the kernel may have dropped the dirty pages: what is
            // on disk is unknown, so the writer stops rather than acknowledge.
            self.sync().inspect_err(|_| self.broken = true)?;
        }
        Ok(())
    }

    /// Syncs the log now if anything is unsynced.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if self.unsynced {
            self.segment.sync()?;
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Under [`Durability::Interval`], syncs if the interval has passed since the last
    /// sync and something is unsynced; returns whether it synced.
    pub fn sync_if_due(&mut self) -> Result<bool, StoreError> {
        if let Durability::Interval(every) = self.options.durability {
            if self.unsynced && self.last_sync.elapsed() >= every {
                self.sync()?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether zeros are kept written ahead of the log's end ([`FeedOptions::zero_ahead`]
    /// asked for it and the filesystem is one where it helps).
    pub fn zeroes_ahead(&self) -> bool {
        self.segment.zeroes_ahead()
    }

    /// Bytes in the current log segment.
    pub fn log_bytes(&self) -> u64 {
        self.segment.len
    }

    /// Takes a snapshot and waits for it (after any snapshot already under way): see
    /// [`Writer::begin_snapshot`].
    pub fn snapshot(&mut self) -> Result<SnapshotInfo, StoreError> {
        if let Some(running) = self.snapshotting.take() {
            join_snapshot(running)?;
        }
        self.begin_snapshot()?;
        let running = self.snapshotting.take().expect("a snapshot was begun");
        join_snapshot(running)
    }

    /// Starts a snapshot on a thread of its own, unless one is under way (then
    /// returns `false`). Neither writes nor reads wait for it.
    ///
    /// The writer syncs the log and starts a new segment at the next sequence number
    /// `S + 1`; the thread then copies, slice by slice under the read lock, every
    /// order whose position is at or before the newest position `P` at that moment
    /// into `snapshot-S.snap` (written under a temporary name, synced, renamed), and
    /// deletes the segments before `S + 1` and the older snapshots. Writes go on
    /// meanwhile, so the copy is fuzzy: an order may be copied at a version newer
    /// than `S`, and one that moved past `P` before the copy reached it is left out.
    /// Both are made exact by the log from `S + 1`, which a restart replays over the
    /// snapshot as upserts that keep the newer version. A snapshot's error is returned
    /// by the next write or snapshot.
    pub fn begin_snapshot(&mut self) -> Result<bool, StoreError> {
        self.check_usable()?;
        if self.snapshotting.is_some() {
            return Ok(false);
        }
        let (head, until) = self.prepare_snapshot()?;
        let dir = self.shared.dir.clone();
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("tranche-feed-snapshot".into())
            .spawn(move || write_snapshot(&shared, &dir, head, until));
        match spawned {
            Ok(handle) => {
                self.snapshotting = Some(handle);
                Ok(true)
            }
            Err(source) => Err(StoreError::Io {
                action: "start a snapshot thread for",
                path: self.shared.dir.clone(),
                source,
            }),
        }
    }

    /// The writer's part of a snapshot: sync the log, note where the snapshot begins
    /// and ends, start the segment after it.
    fn prepare_snapshot(&mut self) -> Result<(SnapshotHead, Cursor), StoreError> {
        self.sync()?;
        let (head, until) = {
            let state = self.shared.state.read();
            let head = SnapshotHead {
                marks: state.marks,
                floor: state.floor,
            };
            (head, state.newest())
        };
        let seq = head.marks.seq;
        if self.segment.start != seq + 1 {
            // Its zeros go first: replay takes a zero-filled tail in the last segment
            // only.
            self.segment.finish()?;
            self.segment = Segment::create(&self.shared.dir, seq + 1, self.options.zeros_ahead())?;
        }
        Ok((head, until))
    }

    /// Returns a finished snapshot's error, if any, and starts one if the log is due.
    fn tend_snapshots(&mut self) -> Result<(), StoreError> {
        if self
            .snapshotting
            .as_ref()
            .is_some_and(|running| running.is_finished())
        {
            let running = self.snapshotting.take().expect("checked");
            let info = join_snapshot(running)?;
            self.last_snapshot_bytes = info.orders * disk::ORDER_BYTES as u64;
        }
        if let Some(limit) = self.options.snapshot_after_bytes {
            // Twice the last snapshot's size at least, so that snapshots never write
            // more than half as much as the log does, however many orders are held.
            if self.segment.len > limit.max(2 * self.last_snapshot_bytes) {
                self.begin_snapshot()?;
            }
        }
        Ok(())
    }

    /// Eviction: removes the terminal orders (filled, cancelled, rejected, expired) at
    /// or before `floor`, durably, and makes `floor` the oldest cursor served: a
    /// cursor before it (other than [`Cursor::START`]) gets [`ReadError::TooOld`].
    /// Open orders are kept whatever their age. Returns how many were evicted.
    pub fn evict_terminal_through(&mut self, floor: Cursor) -> Result<usize, StoreError> {
        self.move_floor(floor, true)
    }

    /// [`Writer::evict_terminal_through`]; unless `bounded`, the floor may be past the
    /// newest change (a replica adopting its primary's floor before it has read up
    /// to it).
    pub(crate) fn move_floor(&mut self, floor: Cursor, bounded: bool) -> Result<usize, StoreError> {
        self.check_usable()?;
        let (current, marks) = {
            let state = self.shared.state.read();
            (state.floor, state.marks)
        };
        let newest = Cursor::new(marks.seq, u64::MAX);
        if floor < current || (bounded && floor > newest) {
            return Err(StoreError::Floor {
                requested: floor,
                current,
                newest,
            });
        }
        if floor == current {
            return Ok(0);
        }
        self.buf.clear();
        disk::encode_floor_record(floor, &mut self.buf);
        self.write_buf()?;
        let ids = {
            let mut state = self.shared.state.write();
            state.floor = floor;
            state.terminal_through(floor)
        };
        for slice in ids.chunks(APPLY_SLICE) {
            let mut state = self.shared.state.write();
            for id in slice {
                state.remove(*id);
            }
        }
        Ok(ids.len())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.broken {
            let _ = self.sync();
            // A clean close leaves no zeros (a crash leaves them, and replay skips them).
            let _ = self.segment.finish();
        }
        if let Some(running) = self.snapshotting.take() {
            // Its outcome has no one left to tell; a restart copes with either.
            let _ = running.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;

    fn insert(seq: u64, id: u64, firm: u32) -> Event {
        Event::Insert(NewOrder {
            seq,
            rec: seq,
            id: OrderId(id),
            firm: FirmId(firm),
            broker: BrokerId(firm * 10),
            instrument: InstrumentId(1),
            side: Side::Buy,
            price: 100,
            quantity: 10,
            created_at: seq,
        })
    }

    fn change(seq: u64, id: u64, status: Status) -> Event {
        Event::Change(OrderChange {
            seq,
            id: OrderId(id),
            price: 101,
            quantity: 10,
            filled: if status == Status::Filled { 10 } else { 0 },
            status,
            updated_at: seq,
        })
    }

    #[test]
    fn evicting_nothing_moves_the_floor() {
        let mut state = State::default();
        assert_eq!(evict(&mut state, Cursor::new(5, 1)), 0);
        assert_eq!(state.floor, Cursor::new(5, 1));
    }

    /// The fuzziest a snapshot can be: every later write (moves past its end, new
    /// orders, an eviction) lands before the copy starts. The snapshot plus the log
    /// after it still restore exactly.
    #[test]
    fn a_snapshot_copied_after_later_writes_restores_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let options = FeedOptions {
            durability: Durability::Never,
            snapshot_after_bytes: None,
            zero_ahead: None,
        };
        let (store, mut writer) = Store::open(dir.path(), options.clone()).unwrap();
        let first: Vec<Event> = (1..=100).map(|i| insert(i, i, (i % 3) as u32)).collect();
        writer.apply(&first).unwrap();
        let (head, until) = writer.prepare_snapshot().unwrap();
        assert_eq!(head.marks.seq, 100);
        let mut later = Vec::new();
        for (seq, id) in (101..).zip((1..=100).step_by(4)) {
            later.push(change(seq, id, Status::Filled));
        }
        later.push(insert(200, 500, 1));
        later.push(change(201, 2, Status::Amended));
        writer.apply(&later).unwrap();
        writer
            .evict_terminal_through(Cursor::new(110, u64::MAX))
            .unwrap();
        write_snapshot(&writer.shared, dir.path(), head, until).unwrap();
        let expected = store
            .read(Cursor::START, Filter::All, MAX_READ_LIMIT)
            .unwrap();
        let floor = store.oldest();
        drop(writer);
        drop(store);

        let (store, writer) = Store::open(dir.path(), options).unwrap();
        assert!(writer.recovery().snapshot.is_some());
        assert_eq!(
            store
                .read(Cursor::START, Filter::All, MAX_READ_LIMIT)
                .unwrap(),
            expected
        );
        assert_eq!(store.oldest(), floor);
        assert_eq!(store.marks(), (201, 200));
    }
}
