//! Wake-ups: one per filter key that has a waiter, signalled at most once per applied
//! write.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::model::{Filter, Order};
use crate::state::FastMap;

/// One filter key's wake-up.
#[derive(Default)]
pub(crate) struct Signal {
    pub notify: Notify,
    /// Waiters registered on it now.
    pub waiting: AtomicUsize,
    /// Times it was signalled.
    pub sent: AtomicU64,
    /// The last write that signalled it (so a write signals it once).
    last_write: AtomicU64,
}

/// The wake-ups of the keys someone waits on. Keys nobody waits on have no entry, so
/// a write costs a hash lookup per order and key, and a signal per key waited on.
///
/// The shards of a feed share one `Signals` (so a read across shards waits on one
/// wake-up of its key, whichever shard writes): writes are numbered here rather than
/// by each writer, so that two shards' writes never share a number and one never
/// swallows the other's signal.
#[derive(Default)]
pub(crate) struct Signals {
    map: Mutex<FastMap<Filter, Arc<Signal>>>,
    writes: AtomicU64,
}

/// A waiter's registration; unregisters (and drops an unused signal) when dropped.
pub(crate) struct Registration<'a> {
    signals: &'a Signals,
    filter: Filter,
    pub signal: Arc<Signal>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if self.signal.waiting.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut map = self.signals.map.lock();
            // The map's reference and ours: nobody else can be registering on it.
            if Arc::strong_count(&self.signal) == 2 {
                map.remove(&self.filter);
            }
        }
    }
}

impl Signals {
    /// Registers a waiter on `filter`.
    pub fn register(&self, filter: Filter) -> Registration<'_> {
        let signal = Arc::clone(self.map.lock().entry(filter).or_default());
        signal.waiting.fetch_add(1, Ordering::AcqRel);
        Registration {
            signals: self,
            filter,
            signal,
        }
    }

    /// Waiters on `filter` now.
    pub fn waiting(&self, filter: Filter) -> usize {
        self.map
            .lock()
            .get(&filter)
            .map_or(0, |s| s.waiting.load(Ordering::Acquire))
    }

    /// Times `filter`'s signal was sent while someone waited on it.
    pub fn sent(&self, filter: Filter) -> u64 {
        self.map
            .lock()
            .get(&filter)
            .map_or(0, |s| s.sent.load(Ordering::Acquire))
    }

    /// Wakes the waiters of every key the orders of one write touched, each key once.
    pub fn wake(&self, orders: &[Order]) {
        if orders.is_empty() {
            return;
        }
        let map = self.map.lock();
        if map.is_empty() {
            return;
        }
        // Under the lock: a signal's `last_write` only ever sees increasing numbers.
        let write = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let fire = |filter: Filter| {
            if let Some(signal) = map.get(&filter) {
                if signal.last_write.swap(write, Ordering::AcqRel) != write {
                    signal.sent.fetch_add(1, Ordering::AcqRel);
                    signal.notify.notify_waiters();
                }
            }
        };
        fire(Filter::All);
        if map.len() == 1 && map.contains_key(&Filter::All) {
            return;
        }
        for order in orders {
            fire(Filter::Firm(order.firm));
            fire(Filter::Broker(order.broker));
            fire(Filter::Instrument(order.instrument));
        }
    }
}
