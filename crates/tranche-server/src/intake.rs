//! Bounded intake: a submission to a queue that already holds its limit of available
//! jobs is refused with 429 and Retry-After, so a runaway producer cannot grow the
//! backlog without bound.
//!
//! Depths are counted by the backend (O(min(depth, limit))) at most every
//! [`Intake::FRESH`] per queue; in between, jobs this server accepted are added to the
//! cached figure, so bursts are seen at once. Jobs drained by workers in between are
//! not, which only errs on the side of refusing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tranche_core::Client;
use tranche_types::BackendError;

use crate::config::QueueLimits;

pub struct Intake {
    limits: QueueLimits,
    depths: Mutex<HashMap<String, (Instant, u64)>>,
}

/// A queue at or over its limit.
#[derive(Debug)]
pub struct Full {
    pub queue: String,
    pub depth: u64,
    pub limit: u64,
}

impl Intake {
    const FRESH: Duration = Duration::from_millis(500);

    pub fn new(limits: QueueLimits) -> Self {
        Intake {
            limits,
            depths: Mutex::new(HashMap::new()),
        }
    }

    /// Refuse when any of `queues` (with how many jobs are about to go in) is full.
    pub async fn admit(
        &self,
        backend: &Client,
        incoming: &HashMap<&str, u64>,
    ) -> Result<Result<(), Full>, BackendError> {
        for queue in incoming.keys() {
            let Some(limit) = self.limits.limit(queue) else {
                continue;
            };
            let cached = self
                .depths
                .lock()
                .expect("intake lock")
                .get(*queue)
                .filter(|(at, _)| at.elapsed() < Self::FRESH)
                .map(|(_, d)| *d);
            let depth = match cached {
                Some(d) => d,
                None => {
                    let d = backend.queue_depth(queue, limit).await?;
                    self.depths
                        .lock()
                        .expect("intake lock")
                        .insert(queue.to_string(), (Instant::now(), d));
                    d
                }
            };
            if depth >= limit {
                return Ok(Err(Full {
                    queue: queue.to_string(),
                    depth,
                    limit,
                }));
            }
        }
        Ok(Ok(()))
    }

    /// Count jobs just accepted into the cached depths.
    pub fn accepted(&self, incoming: &HashMap<&str, u64>) {
        let mut depths = self.depths.lock().expect("intake lock");
        for (queue, n) in incoming {
            if let Some((_, d)) = depths.get_mut(*queue) {
                *d += n;
            }
        }
    }
}
