use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tranche_core::Backend;
use tranche_types::LeaseRef;

use crate::config::ServerConfig;
use crate::intake::Intake;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    backend: Arc<dyn Backend>,
    config: ServerConfig,
    intake: Intake,
    started: Started,
}

impl AppState {
    pub fn new(backend: Arc<dyn Backend>, config: ServerConfig) -> Self {
        AppState(Arc::new(Inner {
            intake: Intake::new(config.queue_limits.clone()),
            backend,
            config,
            started: Started::default(),
        }))
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.0.backend
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    pub fn intake(&self) -> &Intake {
        &self.0.intake
    }

    pub fn started(&self) -> &Started {
        &self.0.started
    }
}

/// Attempts handed to remote workers: when each started and its queue (completions
/// carry only the lease, and the run-time histogram needs both), and when to ask the
/// backend whether its lease expired (a dead worker never says so itself).
#[derive(Default)]
pub struct Started {
    map: Mutex<HashMap<LeaseRef, Handed>>,
}

struct Handed {
    queue: Arc<str>,
    at: Instant,
    lease: Duration,
    /// Pushed back by each heartbeat; brought forward when the worker is told it lost
    /// the lease.
    check_at: Instant,
}

impl Started {
    /// Attempts whose job vanished are never completed here; past this many entries the
    /// stale ones are dropped.
    const PRUNE_AT: usize = 200_000;
    const STALE: Duration = Duration::from_secs(3600);

    pub fn insert(&self, lease: LeaseRef, queue: Arc<str>, at: Instant, length: Duration) {
        let mut map = self.map.lock().expect("started lock");
        if map.len() >= Self::PRUNE_AT {
            map.retain(|_, h| h.at.elapsed() < Self::STALE);
        }
        let check_at = at + length;
        map.insert(
            lease,
            Handed {
                queue,
                at,
                lease: length,
                check_at,
            },
        );
    }

    /// Leases a heartbeat just renewed until `now + length`.
    pub fn extend(&self, leases: &[LeaseRef], now: Instant, length: Duration) {
        let mut map = self.map.lock().expect("started lock");
        for l in leases {
            if let Some(h) = map.get_mut(l) {
                h.lease = length;
                h.check_at = now + length;
            }
        }
    }

    /// The attempt was refused as no longer holding its job: find out why soon.
    pub fn lost(&self, lease: &LeaseRef) -> Option<Arc<str>> {
        let mut map = self.map.lock().expect("started lock");
        map.get_mut(lease).map(|h| {
            h.check_at = Instant::now();
            h.queue.clone()
        })
    }

    pub fn take(&self, lease: &LeaseRef) -> Option<(Arc<str>, Instant)> {
        self.map
            .lock()
            .expect("started lock")
            .remove(lease)
            .map(|h| (h.queue, h.at))
    }

    /// Up to `max` attempts whose check time has passed by `margin`; each is re-armed a
    /// lease length later, in case the backend says it is still held.
    pub fn due(&self, now: Instant, margin: Duration, max: usize) -> Vec<(LeaseRef, Arc<str>)> {
        let mut map = self.map.lock().expect("started lock");
        let mut out = Vec::new();
        for (lease, h) in map.iter_mut() {
            if out.len() == max {
                break;
            }
            if h.check_at + margin <= now {
                h.check_at = now + h.lease;
                out.push((*lease, h.queue.clone()));
            }
        }
        out
    }

    pub fn forget(&self, lease: &LeaseRef) {
        self.map.lock().expect("started lock").remove(lease);
    }
}
