//! A full store pauses the night instead of failing it.
//!
//! Retrying a write a few seconds later does not help a full disk: with three attempts
//! 2 s apart every remaining client failed within half a minute. So a write that does
//! not fit ([`StorageError::Full`]) gives its job back without using an attempt
//! (`Outcome::Snooze`), and the steps that write wait at [`StoreSpace::wait_for_room`]
//! before doing their work: the night pauses, holding only the jobs already reserved,
//! and resumes by itself once the disk has room for the write that failed. The state
//! is read by the progress display to tell the operator, once, what is full.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tranche_core::JobContext;
use tranche_storage::{Storage, StorageError, StoreKey};

/// Room wanted beyond the write that failed before the night goes on: a disk with a
/// few kilobytes free is still full for a night of PDFs.
const MARGIN: u64 = 1 << 20;
/// While paused, one job a while tries anyway: an object store cannot tell its free
/// space, and a local one's count of free blocks can disagree with what a privileged
/// writer may use.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// How long a job waits at the gate before it is given back (so a shutdown is not held
/// up by a paused night), and how often the free space is looked at meanwhile.
const HOLD: Duration = Duration::from_secs(5);
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Whether the store has room, shared by the steps (which pause on it) and the
/// progress display (which tells why).
pub(crate) struct StoreSpace {
    store: Arc<dyn Storage>,
    full: Mutex<Option<Paused>>,
    /// A progress display tells the operator; else (a fleet's `tranche worker`) the
    /// log does, once per pause.
    shown_elsewhere: AtomicBool,
}

struct Paused {
    location: String,
    bytes: u64,
    since: Instant,
    probed: Instant,
}

/// The store is full: what the operator is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoreFull {
    /// The store's root: where space must be freed.
    pub(crate) location: String,
    /// The size of the latest write that did not fit.
    pub(crate) bytes: u64,
    /// Free there now, when the store can tell.
    pub(crate) free: Option<u64>,
    pub(crate) since: Instant,
}

impl std::fmt::Debug for StoreSpace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSpace")
            .field("full", &self.full())
            .finish_non_exhaustive()
    }
}

impl StoreSpace {
    /// `store` as the steps use it (recording whether writes fit) and the state it
    /// keeps.
    pub(crate) fn watch(store: Arc<dyn Storage>) -> (Arc<dyn Storage>, Arc<StoreSpace>) {
        let space = Arc::new(StoreSpace {
            store,
            full: Mutex::new(None),
            shown_elsewhere: AtomicBool::new(false),
        });
        (Arc::new(WatchedStore(space.clone())), space)
    }

    /// The caller shows [`full`](Self::full) to the operator: no log lines for it.
    pub(crate) fn show_elsewhere(&self) {
        self.shown_elsewhere.store(true, Ordering::Relaxed);
    }

    fn logged(&self) -> bool {
        !self.shown_elsewhere.load(Ordering::Relaxed)
    }

    /// Whether the night is paused for space, and on what.
    pub(crate) fn full(&self) -> Option<StoreFull> {
        let full = self.full.lock().expect("store space");
        full.as_ref().map(|p| StoreFull {
            location: p.location.clone(),
            bytes: p.bytes,
            free: self.store.free_space(),
            since: p.since,
        })
    }

    /// Wait while the store is full. True: go on (there is room, or this job is the
    /// one that tries); false: give the job back (it waited long enough, or it was
    /// cancelled).
    pub(crate) async fn wait_for_room(&self, ctx: &JobContext) -> bool {
        let deadline = Instant::now() + HOLD;
        loop {
            {
                let mut full = self.full.lock().expect("store space");
                let Some(p) = full.as_mut() else {
                    return true;
                };
                if self.has_room(p.bytes) {
                    return true;
                }
                if p.probed.elapsed() >= PROBE_EVERY {
                    p.probed = Instant::now();
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::select! {
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                _ = ctx.cancelled() => return false,
            }
        }
    }

    fn has_room(&self, bytes: u64) -> bool {
        self.store
            .free_space()
            .is_some_and(|free| free >= bytes.saturating_add(MARGIN))
    }

    fn did_not_fit(&self, location: &str, bytes: u64) {
        let mut full = self.full.lock().expect("store space");
        let now = Instant::now();
        match full.as_mut() {
            Some(p) => {
                p.bytes = bytes;
                p.location = location.to_string();
            }
            None => {
                if self.logged() {
                    tracing::warn!(
                        free = ?self.store.free_space(),
                        "the store at {location} is full ({bytes} bytes did not fit): the steps that write to it wait, and resume by themselves when space is freed there"
                    );
                }
                *full = Some(Paused {
                    location: location.to_string(),
                    bytes,
                    since: now,
                    probed: now,
                })
            }
        }
    }

    /// A write fitted. The pause ends only once there is room for the write that did
    /// not (or when the store cannot tell): a small write squeezing into the last
    /// kilobytes is not the disk having room again.
    fn fitted(&self) {
        let mut full = self.full.lock().expect("store space");
        if let Some(p) = full.as_ref() {
            if self.store.free_space().is_none() || self.has_room(p.bytes) {
                if self.logged() {
                    tracing::warn!(after = ?p.since.elapsed(), "the store at {} has room again", p.location);
                }
                *full = None;
            }
        }
    }
}

/// The store, noting in its [`StoreSpace`] whether writes fit.
struct WatchedStore(Arc<StoreSpace>);

#[async_trait]
impl Storage for WatchedStore {
    async fn put(&self, key: &StoreKey, bytes: Vec<u8>) -> Result<(), StorageError> {
        let space = &self.0;
        let result = space.store.put(key, bytes).await;
        match &result {
            Ok(()) => space.fitted(),
            Err(StorageError::Full {
                location, bytes, ..
            }) => space.did_not_fit(location, *bytes),
            Err(_) => {}
        }
        result
    }

    async fn get(&self, key: &StoreKey) -> Result<Vec<u8>, StorageError> {
        self.0.store.get(key).await
    }

    async fn exists(&self, key: &StoreKey) -> Result<bool, StorageError> {
        self.0.store.exists(key).await
    }

    async fn delete(&self, key: &StoreKey) -> Result<(), StorageError> {
        self.0.store.delete(key).await
    }

    fn locate(&self, key: &StoreKey) -> String {
        self.0.store.locate(key)
    }

    fn free_space(&self) -> Option<u64> {
        self.0.store.free_space()
    }
}
