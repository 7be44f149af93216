//! Why a night is not moving, for the progress display to say once instead of showing
//! 0 jobs/s: a full store, a backend that refuses writes (its database's disk full),
//! or jobs still leased by a worker that is gone (after a `kill -9`, a rerun waits
//! for those leases to lapse).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tranche_core::WorkerStats;
use tranche_storage::{free_space, human_bytes};
use tranche_types::RunProgress;

use crate::pipeline::{StoreSpace, STEPS};

/// What holds the night up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stall {
    /// The store has no room for the steps' writes: they wait for it.
    StoreFull {
        /// The store's root: where space must be freed.
        location: String,
        /// Bytes free there, when the store can tell.
        free: Option<u64>,
        /// The write that did not fit × the clients left: a rough need.
        needed: u64,
        /// Clients whose chains have not ended.
        clients_left: u64,
    },
    /// The disk holding the backend's database is full.
    DatabaseFull {
        /// The database file.
        path: String,
        /// Bytes free on its disk, when known.
        free: Option<u64>,
    },
    /// The backend refuses writes for another reason; the worker keeps retrying.
    Backend {
        /// What the backend said.
        error: String,
    },
    /// Running jobs this process does not hold.
    Leases {
        /// Running jobs held elsewhere.
        jobs: u64,
        /// A stopped worker's leases have lapsed by then; `None` once that is past (a
        /// live worker holds them).
        lapse_within: Option<Duration>,
    },
}

impl Stall {
    /// Stalls of one kind are one stall, however their figures change.
    pub fn same_kind(&self, other: &Stall) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }

    /// The line said when the stall ends.
    pub fn ended(&self, after: Duration) -> String {
        let what = match self {
            Stall::StoreFull { .. } => "the store has room again",
            Stall::DatabaseFull { .. } => "the database can be written again",
            Stall::Backend { .. } => "the backend works again",
            Stall::Leases { .. } => "the jobs held elsewhere are done or back here",
        };
        format!("resumed after {} s: {what}", after.as_secs())
    }
}

fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn free(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "free space unknown".to_string(),
        |b| format!("{} free", human_bytes(b)),
    )
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stall::StoreFull {
                location,
                free: bytes,
                needed,
                clients_left,
            } => write!(
                f,
                "paused: the store at {location} is full ({}; about {} more needed for the {} left): free space there — the night resumes by itself when space is freed",
                free(*bytes),
                human_bytes(*needed),
                count(*clients_left, "client")
            ),
            Stall::DatabaseFull { path, free: bytes } => write!(
                f,
                "paused: the disk holding the database {path} is full ({}): free space there — the night resumes by itself when space is freed",
                free(*bytes)
            ),
            Stall::Backend { error } => write!(
                f,
                "paused: the backend refuses writes ({error}); retrying — the night resumes by itself when it works again"
            ),
            Stall::Leases {
                jobs,
                lapse_within: Some(within),
            } => write!(
                f,
                "waiting for {} still leased by a worker that stopped (or runs elsewhere): its leases lapse within {} s, then the jobs run here",
                count(*jobs, "job"),
                within.as_secs().max(1)
            ),
            Stall::Leases {
                jobs,
                lapse_within: None,
            } => write!(f, "waiting for {} running in another worker", count(*jobs, "job")),
        }
    }
}

/// A short blip (one failed write, a job counted a moment late) is not a stall.
const SHOWN_AFTER: Duration = Duration::from_secs(1);

/// Watches what this process knows: the store's space and the worker's backend
/// trouble and jobs in flight.
pub(crate) struct StallWatch {
    space: Arc<StoreSpace>,
    worker: Arc<WorkerStats>,
    /// A stopped worker's leases have lapsed by then: its last heartbeat was before
    /// this process started.
    leases_lapse_by: Instant,
    seen: Option<(Stall, Instant)>,
}

impl StallWatch {
    /// `lease`: how long the night's leases last.
    pub(crate) fn new(space: Arc<StoreSpace>, worker: Arc<WorkerStats>, lease: Duration) -> Self {
        worker.show_trouble_elsewhere();
        space.show_elsewhere();
        StallWatch {
            space,
            worker,
            leases_lapse_by: Instant::now() + lease,
            seen: None,
        }
    }

    /// What holds the night up now, once it has for a moment.
    pub(crate) fn check(&mut self, p: &RunProgress) -> Option<Stall> {
        let now = self.current(p);
        let Some(stall) = now else {
            self.seen = None;
            return None;
        };
        let since = match &self.seen {
            Some((s, since)) if s.same_kind(&stall) => *since,
            _ => Instant::now(),
        };
        self.seen = Some((stall.clone(), since));
        (since.elapsed() >= SHOWN_AFTER).then_some(stall)
    }

    fn current(&self, p: &RunProgress) -> Option<Stall> {
        if let Some(full) = self.space.full() {
            let left = p.total.saturating_sub(p.ended());
            let clients_left = left.div_ceil(STEPS.len() as u64).max(1);
            return Some(Stall::StoreFull {
                location: full.location,
                free: full.free,
                needed: full.bytes.saturating_mul(clients_left),
                clients_left,
            });
        }
        if let Some(trouble) = self.worker.trouble() {
            return Some(match trouble.full {
                Some(path) => Stall::DatabaseFull {
                    free: free_space(std::path::Path::new(&path)),
                    path,
                },
                None => Stall::Backend {
                    error: trouble.error,
                },
            });
        }
        let foreign = p.running.saturating_sub(self.worker.in_flight());
        (foreign > 0).then(|| Stall::Leases {
            jobs: foreign,
            lapse_within: self.leases_lapse_by.checked_duration_since(Instant::now()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_where_and_that_the_night_resumes() {
        let store = Stall::StoreFull {
            location: "/srv/notes/store".into(),
            free: Some(12_000),
            needed: 4_000_000,
            clients_left: 100,
        };
        assert_eq!(
            store.to_string(),
            "paused: the store at /srv/notes/store is full (12.0 kB free; about 4.0 MB more needed for the 100 clients left): free space there — the night resumes by itself when space is freed"
        );
        let db = Stall::DatabaseFull {
            path: "/srv/state/tranche.db".into(),
            free: Some(0),
        };
        assert!(db
            .to_string()
            .contains("/srv/state/tranche.db is full (0 B free)"));
        let leases = Stall::Leases {
            jobs: 12,
            lapse_within: Some(Duration::from_millis(23_400)),
        };
        assert!(
            leases
                .to_string()
                .starts_with("waiting for 12 jobs still leased by a worker that stopped"),
            "{leases}"
        );
        assert!(leases.to_string().contains("lapse within 23 s"), "{leases}");
        assert!(store.same_kind(&Stall::StoreFull {
            location: String::new(),
            free: None,
            needed: 0,
            clients_left: 1
        }));
        assert!(!store.same_kind(&db));
    }
}
