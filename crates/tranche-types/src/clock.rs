use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Microseconds since the Unix epoch. Stored as an integer everywhere so that backends
/// compare and index it cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(description = "Microseconds since the Unix epoch.")
)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Microseconds since the Unix epoch, as stored.
    pub fn micros(self) -> i64 {
        self.0
    }

    /// `d` later; saturates at the end of `i64` time instead of overflowing.
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_micros().min(i64::MAX as u128) as i64),
        )
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0).max(0) as u64)
    }
}

/// The one door to wall-clock time. Backends and the engine take a clock instead of
/// calling `SystemTime::now`, so lease expiry and schedules are testable without sleeping.
pub trait Clock: Send + Sync + 'static {
    /// The current time on this clock.
    fn now(&self) -> Timestamp;
}

/// Wall-clock time, for production: what backends use unless a test gives them another.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp(d.as_micros() as i64)
    }
}

/// A clock that only moves when told to; shared by clones.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `start` until [`advance`](Self::advance)d.
    pub fn new(start: Timestamp) -> Self {
        ManualClock(Arc::new(AtomicI64::new(start.0)))
    }

    /// Move this clock and every clone of it forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_micros() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}
