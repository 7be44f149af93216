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

/// When each attempt handed to a remote worker started, and its queue: completions
/// carry only the lease, and the run-time histogram needs both.
#[derive(Default)]
pub struct Started {
    map: Mutex<HashMap<LeaseRef, (Arc<str>, Instant)>>,
}

impl Started {
    /// Attempts of workers that died are never completed here; past this many
    /// entries the stale ones are dropped.
    const PRUNE_AT: usize = 200_000;
    const STALE: Duration = Duration::from_secs(3600);

    pub fn insert(&self, lease: LeaseRef, queue: Arc<str>, at: Instant) {
        let mut map = self.map.lock().expect("started lock");
        if map.len() >= Self::PRUNE_AT {
            map.retain(|_, (_, t)| t.elapsed() < Self::STALE);
        }
        map.insert(lease, (queue, at));
    }

    pub fn take(&self, lease: &LeaseRef) -> Option<(Arc<str>, Instant)> {
        self.map.lock().expect("started lock").remove(lease)
    }

    pub fn queue_of(&self, lease: &LeaseRef) -> Option<Arc<str>> {
        self.map
            .lock()
            .expect("started lock")
            .get(lease)
            .map(|(q, _)| q.clone())
    }
}
