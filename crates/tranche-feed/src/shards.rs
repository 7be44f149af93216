//! A feed of several shards: one store per trading core, read together through one
//! [`VectorCursor`].

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::cursor::Cursor;
use crate::error::StoreError;
use crate::model::{Filter, Order};
use crate::replica::ReplicaWriter;
use crate::state::ReadError;
use crate::store::{FeedOptions, Store, WaitOutcome, Writer, MAX_READ_LIMIT};
use crate::vector::{VectorCursor, MAX_SHARDS};
use crate::wake::Signals;

/// Orders a merged read takes from one shard per hold of its read lock.
const MERGE_SLICE: usize = 256;

/// Why a read across shards cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardReadError {
    /// The cursor's position in some shard is before that shard's eviction floor:
    /// orders changed after it may have been evicted. `oldest` is the cursor with
    /// each such position raised to its shard's floor: resume from it (accepting
    /// that gap) or re-read everything from [`VectorCursor::START`]. HTTP's 410.
    #[error("the cursor is older than the oldest the feed serves in shard {shard}; the oldest cursor served from it is {oldest}")]
    TooOld {
        /// The first shard whose position is too old.
        shard: usize,
        /// The oldest cursor served, nearest to the one given (boxed: a vector
        /// cursor is large, and errors are rare).
        oldest: Box<VectorCursor>,
    },
    /// The cursor's position in a shard is past every change that shard holds: it
    /// comes from another feed, or from changes lost with a crash under a relaxed
    /// durability policy.
    #[error("the cursor's position {position} in shard {shard} is past the newest change that shard holds ({newest})")]
    Ahead {
        /// The shard.
        shard: usize,
        /// The cursor's position in it.
        position: Cursor,
        /// The newest position the shard holds.
        newest: Cursor,
    },
    /// The cursor names more shards than the feed has (a cursor of another feed).
    #[error("the cursor names {got} shards, this feed has {shards} (a cursor of another feed?)")]
    Shards {
        /// Shards the cursor names.
        got: usize,
        /// Shards the feed has.
        shards: usize,
    },
    /// A filtered read of a replica, which keeps no per-key indexes.
    #[error("this server is a read replica without per-key indexes: it serves unfiltered reads only ({filter:?} is read from the primary)")]
    Unfiltered {
        /// The filter asked for.
        filter: Filter,
    },
}

struct Inner {
    stores: RwLock<Vec<Store>>,
    signals: Arc<Signals>,
    dir: PathBuf,
    replica: bool,
}

/// The readers' side of a feed of one or more shards, each a [`Store`] with its own
/// writer, `seq` and `rec`: reads and long polls across all of them by
/// [`VectorCursor`]. Cheap to clone.
///
/// A read ([`Shards::read_into`]) takes up to `limit` orders of the filter across the
/// shards, each shard's in its `(seq, rec)` order, merged oldest change first (by
/// `updated_at`, the time the core made the version), and advances each shard's
/// position only past what it returned. So per shard, a reader gets an order's
/// versions in `seq` order and its pages never go back; across shards there is no
/// global order to keep, and the page holds the changes that have waited longest.
/// With one shard a read is exactly [`Store::read_into`].
///
/// The shards share one set of wake-ups, so [`Shards::wait_for`] sleeps on its filter
/// key's one signal and any shard's write to that key wakes it.
#[derive(Clone)]
pub struct Shards {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Shards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shards")
            .field("dir", &self.inner.dir)
            .field("shards", &self.len())
            .field("replica", &self.inner.replica)
            .finish()
    }
}

/// The directory of shard `shard` of the feed in `dir`: `dir` itself for shard 0 (so
/// a one-shard feed is a plain store, and a store grows shards without moving),
/// `dir/shard-<k>` for the others.
pub fn shard_dir(dir: &Path, shard: usize) -> PathBuf {
    if shard == 0 {
        dir.to_path_buf()
    } else {
        dir.join(format!("shard-{shard}"))
    }
}

/// The shards present in `dir`: shard 0 and each `shard-<k>` directory.
fn shards_on_disk(dir: &Path) -> Result<Vec<usize>, StoreError> {
    let mut found = vec![0];
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(error) => return Err(crate::disk::io_error("list", dir)(error)),
    };
    for entry in entries {
        let entry = entry.map_err(crate::disk::io_error("list", dir))?;
        let name = entry.file_name();
        if let Some(k) = name
            .to_str()
            .and_then(|n| n.strip_prefix("shard-"))
            .and_then(|n| n.parse::<usize>().ok())
        {
            if k > 0 && entry.path().is_dir() {
                found.push(k);
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

fn layout(dir: &Path, problem: String) -> StoreError {
    StoreError::Layout {
        path: dir.to_path_buf(),
        problem,
    }
}

thread_local! {
    /// One buffer per shard for merged reads, reused by every read on the thread.
    static RUNS: RefCell<Vec<Vec<Order>>> = const { RefCell::new(Vec::new()) };
}

impl Shards {
    /// Opens (or creates) the `shards` shards of the feed in `dir` (see [`shard_dir`]),
    /// each as [`Store::open`] does, sharing their wake-ups; returns the readers' side
    /// and one writer per shard, shard 0 first. Shards can be added (open with more)
    /// but not removed: a `shard-<k>` directory at or past `shards` is an error rather
    /// than orders silently no longer served.
    pub fn open(
        dir: &Path,
        shards: usize,
        options: FeedOptions,
    ) -> Result<(Shards, Vec<Writer>), StoreError> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(layout(
                dir,
                format!("expected 1 to {MAX_SHARDS} shards, got {shards}"),
            ));
        }
        if let Some(&extra) = shards_on_disk(dir)?.iter().find(|&&k| k >= shards) {
            return Err(layout(
                dir,
                format!(
                    "{} holds shard {extra}: open at least {} shards (a shard cannot be \
                     removed, its orders would no longer be served)",
                    shard_dir(dir, extra).display(),
                    extra + 1
                ),
            ));
        }
        let signals = Arc::new(Signals::default());
        let mut stores = Vec::with_capacity(shards);
        let mut writers = Vec::with_capacity(shards);
        for shard in 0..shards {
            let (store, writer) = Store::open_with(
                &shard_dir(dir, shard),
                options.clone(),
                Arc::clone(&signals),
                false,
            )?;
            stores.push(store);
            writers.push(writer);
        }
        Ok((Shards::new(dir, stores, signals, false), writers))
    }

    /// Opens (or creates) a replica's shards in `dir`: shard 0 and every
    /// `shard-<k>` directory there, without per-key indexes; more are added with
    /// [`Shards::add_replica_shard`] as the primary is found to have them.
    pub fn open_replica(
        dir: &Path,
        options: FeedOptions,
    ) -> Result<(Shards, Vec<ReplicaWriter>), StoreError> {
        let present = shards_on_disk(dir)?;
        if let Some((k, _)) = present.iter().enumerate().find(|(i, k)| *i != **k) {
            return Err(layout(
                dir,
                format!(
                    "expected a directory {} (shards are numbered without gaps)",
                    shard_dir(dir, k).display()
                ),
            ));
        }
        if present.len() > MAX_SHARDS {
            return Err(layout(
                dir,
                format!(
                    "expected at most {MAX_SHARDS} shards, found {}",
                    present.len()
                ),
            ));
        }
        let signals = Arc::new(Signals::default());
        let mut stores = Vec::new();
        let mut writers = Vec::new();
        for shard in present {
            let (store, writer) = Store::open_with(
                &shard_dir(dir, shard),
                options.clone(),
                Arc::clone(&signals),
                true,
            )?;
            stores.push(store);
            writers.push(ReplicaWriter::new(writer, shard));
        }
        Ok((Shards::new(dir, stores, signals, true), writers))
    }

    /// A replica's next shard (number [`Shards::len`]), opened (or created) in its
    /// directory and served from now on; returns its writer.
    pub fn add_replica_shard(&self, options: FeedOptions) -> Result<ReplicaWriter, StoreError> {
        if !self.inner.replica {
            return Err(layout(
                &self.inner.dir,
                "expected a replica: a primary's shards are set when it opens".into(),
            ));
        }
        let shard = self.len();
        if shard >= MAX_SHARDS {
            return Err(layout(
                &self.inner.dir,
                format!("expected at most {MAX_SHARDS} shards, the primary has more"),
            ));
        }
        let (store, writer) = Store::open_with(
            &shard_dir(&self.inner.dir, shard),
            options,
            Arc::clone(&self.inner.signals),
            true,
        )?;
        self.inner.stores.write().push(store);
        Ok(ReplicaWriter::new(writer, shard))
    }

    /// One shard: a store opened on its own ([`Store::open`]) served as a feed.
    pub fn single(store: Store) -> Shards {
        let signals = Arc::clone(&store.shared.signals);
        let dir = store.dir().to_path_buf();
        let replica = store.shared.state.read().unindexed;
        Shards::new(&dir, vec![store], signals, replica)
    }

    fn new(dir: &Path, stores: Vec<Store>, signals: Arc<Signals>, replica: bool) -> Shards {
        Shards {
            inner: Arc::new(Inner {
                stores: RwLock::new(stores),
                signals,
                dir: dir.to_path_buf(),
                replica,
            }),
        }
    }

    /// How many shards the feed has.
    pub fn len(&self) -> usize {
        self.inner.stores.read().len()
    }

    /// Whether it has none (a replica before it has opened any: never in practice).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shard `shard`'s store.
    pub fn shard(&self, shard: usize) -> Option<Store> {
        self.inner.stores.read().get(shard).cloned()
    }

    /// Whether this is a replica's feed (no per-key indexes: unfiltered reads only).
    pub fn is_replica(&self) -> bool {
        self.inner.replica
    }

    /// The feed's directory (shard 0's).
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Every shard's newest position: the cursor after everything held now.
    pub fn newest(&self) -> VectorCursor {
        let mut cursor = VectorCursor::START;
        for (shard, store) in self.inner.stores.read().iter().enumerate() {
            cursor.set(shard, store.newest());
        }
        cursor
    }

    /// The cursor after the newest order passing `filter` in every shard (at least
    /// the shard's floor): reading `filter` from it gives what changes from now on, as
    /// from [`Shards::newest`], but it names no position of an order outside `filter`
    /// (a member firm's own cursor, not the feed's). A replica keeps no per-key index:
    /// a filter there is [`ShardReadError::Unfiltered`].
    pub fn newest_of(&self, filter: Filter) -> Result<VectorCursor, ShardReadError> {
        self.check_filter(filter)?;
        let mut cursor = VectorCursor::START;
        for (shard, store) in self.inner.stores.read().iter().enumerate() {
            cursor.set(shard, store.shared.state.read().newest_of(filter));
        }
        Ok(cursor)
    }

    /// The oldest cursor served besides [`VectorCursor::START`]: each shard's floor.
    pub fn oldest(&self) -> VectorCursor {
        let mut cursor = VectorCursor::START;
        for (shard, store) in self.inner.stores.read().iter().enumerate() {
            cursor.set(shard, store.oldest());
        }
        cursor
    }

    /// How many orders the shards hold together.
    pub fn orders(&self) -> usize {
        self.inner.stores.read().iter().map(Store::len).sum()
    }

    fn check_filter(&self, filter: Filter) -> Result<(), ShardReadError> {
        if self.inner.replica && filter != Filter::All {
            return Err(ShardReadError::Unfiltered { filter });
        }
        Ok(())
    }

    /// Refuses a cursor the feed cannot serve (naming more shards than it has, too
    /// old or ahead in some shard); returns it with every shard spelled out.
    fn check_with(stores: &[Store], cursor: &VectorCursor) -> Result<VectorCursor, ShardReadError> {
        if cursor.shards() > stores.len() {
            return Err(ShardReadError::Shards {
                got: cursor.shards(),
                shards: stores.len(),
            });
        }
        let mut full = *cursor;
        let mut too_old = None;
        for (shard, store) in stores.iter().enumerate() {
            let position = cursor.position(shard);
            full.set(shard, position);
            match store.shared.state.read().check(position) {
                Ok(()) => {}
                Err(ReadError::TooOld { oldest, .. }) => {
                    too_old.get_or_insert(shard);
                    full.set(shard, oldest);
                }
                Err(ReadError::Ahead { newest, .. }) => {
                    return Err(ShardReadError::Ahead {
                        shard,
                        position,
                        newest,
                    })
                }
            }
        }
        match too_old {
            Some(shard) => Err(ShardReadError::TooOld {
                shard,
                oldest: Box::new(full),
            }),
            None => Ok(full),
        }
    }

    /// Checks `cursor` against the feed as it is now (see [`ShardReadError`]).
    pub fn check(&self, cursor: &VectorCursor) -> Result<(), ShardReadError> {
        Shards::check_with(&self.inner.stores.read(), cursor).map(|_| ())
    }

    /// Up to `limit` (at most [`MAX_READ_LIMIT`]) orders passing `filter` after
    /// `cursor` across the shards (see [`Shards`] for their order), appended to
    /// `out`; returns the cursor to read on from, naming every shard. Allocates
    /// nothing once the thread's merge buffers have grown.
    pub fn read_into(
        &self,
        cursor: &VectorCursor,
        filter: Filter,
        limit: usize,
        out: &mut Vec<Order>,
    ) -> Result<VectorCursor, ShardReadError> {
        self.check_filter(filter)?;
        let stores = self.inner.stores.read();
        let mut next = Shards::check_with(&stores, cursor)?;
        let limit = limit.min(MAX_READ_LIMIT);
        if let [store] = &stores[..] {
            // Checked above; a floor that moves since is reported by the next read.
            let position = store
                .read_into(next.position(0), filter, limit, out)
                .unwrap_or(next.position(0));
            next.set(0, position);
            return Ok(next);
        }
        RUNS.with_borrow_mut(|runs| {
            merge(&stores, &mut next, filter, limit, runs, out);
        });
        Ok(next)
    }

    /// How many orders pass `filter` after `cursor`, counting no further than `cap`.
    pub fn count_after(
        &self,
        cursor: &VectorCursor,
        filter: Filter,
        cap: usize,
    ) -> Result<usize, ShardReadError> {
        self.check_filter(filter)?;
        let stores = self.inner.stores.read();
        if cursor.shards() > stores.len() {
            return Shards::check_with(&stores, cursor).map(|_| 0);
        }
        // Checked and counted under one hold of each shard's lock (this runs at every
        // wake-up of a long poll); an error is worked out in full by `check_with`.
        let mut ready = 0;
        for (shard, store) in stores.iter().enumerate() {
            let state = store.shared.state.read();
            let position = cursor.position(shard);
            if state.check(position).is_err() {
                drop(state);
                return Shards::check_with(&stores, cursor).map(|_| ready);
            }
            if ready < cap {
                ready += state.count_after(position, filter, cap - ready);
            }
        }
        Ok(ready)
    }

    /// Waits until at least `min_batch` orders passing `filter` are ready after
    /// `cursor` across the shards, or `deadline` passes; then read them with
    /// [`Shards::read_into`]. It sleeps on the filter key's one wake-up, which a write
    /// touching that key in any shard signals, once per write, after the write is
    /// visible; writes touching only other keys do not wake it.
    ///
    /// With a `linger`, the wait has two parts, as the exchange pilot's `get_orders`
    /// (wait, then linger for `min_rows`): until the first order is ready it lasts up
    /// to `deadline` (a long poll, never a storm of empty answers); once some are
    /// ready but fewer than `min_batch`, at most `linger` more, so a batching client
    /// gets bigger pages under load without waiting out `deadline` when its orders
    /// come slowly. A linger that ends is not a timeout (`timed_out` stays false).
    pub async fn wait_for(
        &self,
        filter: Filter,
        cursor: &VectorCursor,
        min_batch: usize,
        deadline: tokio::time::Instant,
        linger: Option<std::time::Duration>,
    ) -> Result<WaitOutcome, ShardReadError> {
        self.check_filter(filter)?;
        let registration = self.inner.signals.register(filter);
        let sleep = tokio::time::sleep_until(deadline);
        tokio::pin!(sleep);
        // Whether the linger has begun, and whether it ends before `deadline`.
        let (mut wakeups, mut lingering, mut cut) = (0, false, false);
        loop {
            let notified = registration.signal.notify.notified();
            tokio::pin!(notified);
            // Registered before the count: a write after the count wakes us.
            notified.as_mut().enable();
            let ready = self.count_after(cursor, filter, min_batch)?;
            if ready >= min_batch {
                return Ok(WaitOutcome {
                    ready,
                    wakeups,
                    timed_out: false,
                });
            }
            if let Some(linger) = linger.filter(|_| ready > 0 && !lingering) {
                lingering = true;
                let until = tokio::time::Instant::now() + linger;
                if until < deadline {
                    sleep.as_mut().reset(until);
                    cut = true;
                }
            }
            tokio::select! {
                biased;
                () = &mut notified => wakeups += 1,
                () = &mut sleep => {
                    let ready = self.count_after(cursor, filter, min_batch)?;
                    let timed_out = ready < min_batch && !cut;
                    return Ok(WaitOutcome { ready, wakeups, timed_out });
                }
            }
        }
    }

    /// Waiters in [`Shards::wait_for`] (or a shard's [`Store::wait_for`]) on
    /// `filter` now.
    pub fn waiting(&self, filter: Filter) -> usize {
        self.inner.signals.waiting(filter)
    }
}

/// One shard's part of a merged read.
#[derive(Clone, Copy, Default)]
struct Run {
    /// Orders of its buffer already taken.
    taken: usize,
    /// Where its next slice is read from (its buffer's last position).
    read_to: Cursor,
    /// Whether the shard has nothing after `read_to` (or its floor moved past it).
    exhausted: bool,
}

/// The k-way merge of [`Shards::read_into`]: repeatedly takes the shard head with the
/// oldest `updated_at` (the lower shard on a tie), refilling a shard's buffer a slice
/// at a time, so at most one slice per shard is read and not returned.
fn merge(
    stores: &[Store],
    next: &mut VectorCursor,
    filter: Filter,
    limit: usize,
    buffers: &mut Vec<Vec<Order>>,
    out: &mut Vec<Order>,
) {
    let shards = stores.len();
    if buffers.len() < shards {
        buffers.resize_with(shards, Vec::new);
    }
    let mut runs = [Run::default(); MAX_SHARDS];
    for (shard, run) in runs.iter_mut().enumerate().take(shards) {
        run.read_to = next.position(shard);
        buffers[shard].clear();
    }
    let mut taken = 0;
    while taken < limit {
        let mut best: Option<(usize, u64)> = None;
        for shard in 0..shards {
            let run = &mut runs[shard];
            let buffer = &mut buffers[shard];
            if run.taken == buffer.len() {
                if run.exhausted {
                    continue;
                }
                buffer.clear();
                run.taken = 0;
                let want = (limit - taken).min(MERGE_SLICE);
                let state = stores[shard].shared.state.read();
                // The floor may have moved since the check: stop before a gap (the
                // next read from this position reports it).
                if state.check(run.read_to).is_err() {
                    run.exhausted = true;
                    continue;
                }
                state.read(run.read_to, filter, want, buffer);
                drop(state);
                if buffer.len() < want {
                    run.exhausted = true;
                }
                match buffer.last() {
                    Some(last) => run.read_to = last.position(),
                    None => continue,
                }
            }
            let head = buffer[run.taken].updated_at;
            if best.is_none_or(|(_, oldest)| head < oldest) {
                best = Some((shard, head));
            }
        }
        let Some((shard, _)) = best else { break };
        let order = buffers[shard][runs[shard].taken];
        runs[shard].taken += 1;
        next.set(shard, order.position());
        out.push(order);
        taken += 1;
    }
}
