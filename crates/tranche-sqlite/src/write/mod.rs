//! Write operations, each applied inside the writer thread's current transaction
//! through an [`Op`]: the connection, the time of the transaction, and the side
//! effects to apply only if the operation (and then the transaction) succeeds —
//! counter deltas per run, per-queue statistics, runs created, queues to wake.

pub mod commit;
pub mod complete;
pub mod enqueue;
pub mod events;
pub mod keys;
pub mod limits;
pub mod one_job;
pub mod pause;
pub mod prune;
pub mod reserve;
pub mod schedules;
pub mod stats;
pub mod steer;
pub mod trace;
pub mod unique;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};
use tranche_types::{BackendError, JobSpec, JobState, RunName, Timestamp};

use events::Change;
use stats::QueueDeltas;

pub type OpResult<T> = Result<T, BackendError>;

/// A failed statement as a [`BackendError`]: SQLITE_FULL (the disk holding the
/// database or its journal is full) is [`BackendError::Full`], its path filled in by
/// [`SqliteBackend`](crate::SqliteBackend), which knows it.
pub fn db(op: &'static str) -> impl Fn(rusqlite::Error) -> BackendError {
    move |e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => BackendError::Full {
            op,
            path: String::new(),
            source: e.into(),
        },
        _ => BackendError::store(op, e),
    }
}

/// Counter changes for one run: one per state, plus the total.
#[derive(Default, Clone, Copy, Debug)]
pub struct Delta {
    states: [i64; JobState::ALL.len()],
    pub total: i64,
}

impl Delta {
    /// The change in the number of the run's jobs in `state`.
    pub fn of(&self, state: JobState) -> i64 {
        self.states[state.code() as usize]
    }

    fn add(&mut self, state: JobState, n: i64) {
        self.states[state.code() as usize] += n;
    }
}

/// Run ids and names cached by the writer; entries made by an operation are kept only
/// if it succeeds (a rolled-back id can be reused).
#[derive(Default)]
pub struct RunCache {
    by_name: HashMap<String, i64>,
    by_id: HashMap<i64, RunName>,
    /// Where jobs reserved by this process lead. These facts never change for a job,
    /// so they stay true whatever happens to the transaction that read them, and let
    /// a completion update its row without reading it back.
    routes: RefCell<HashMap<i64, Route>>,
    /// Queue names shared by the routes, one allocation per queue.
    queues: RefCell<HashSet<Arc<str>>>,
    /// The file's `data_version` when the run names were last known current: another
    /// process's commit (perhaps a prune) moves it.
    pub data_version: Option<i64>,
    /// Whether `job_traces` may have rows (see write/trace.rs); unknown until asked.
    pub traces: std::cell::Cell<Option<bool>>,
    /// The declared limits, `None` until read (again): cleared with the run names, so
    /// another process's commit (perhaps a new limit) makes the next reserve read them.
    pub limits: RefCell<Option<Arc<limits::LimitSet>>>,
}

/// A job's run, chain successor, group and queue (fixed when it is enqueued), and the
/// attempt this process reserved and when (for the run-time statistics).
#[derive(Clone, Debug)]
pub struct Route {
    pub run: i64,
    pub next: Option<i64>,
    pub group: Option<i64>,
    pub queue: Arc<str>,
    pub attempt: u32,
    pub started_at: i64,
}

impl RunCache {
    /// Routes of jobs whose completion never came here (lost leases) would otherwise
    /// pile up.
    const MAX_ROUTES: usize = 1 << 20;

    pub fn clear(&mut self) {
        self.by_name.clear();
        self.by_id.clear();
        // Another process may have enqueued traced jobs.
        self.traces.set(None);
        *self.limits.get_mut() = None;
    }

    /// Whether limits are declared, as far as this writer knows: a job leaving running
    /// then wakes waiting reserves (it may free a running slot).
    pub fn has_limits(&self) -> bool {
        self.limits.borrow().as_ref().is_some_and(|l| !l.is_empty())
    }

    pub fn remember_route(&self, job: i64, route: Route) {
        let mut routes = self.routes.borrow_mut();
        if routes.len() >= Self::MAX_ROUTES {
            routes.clear();
        }
        routes.insert(job, route);
    }

    pub fn take_route(&self, job: i64) -> Option<Route> {
        self.routes.borrow_mut().remove(&job)
    }

    /// The shared name of `queue`.
    pub fn queue(&self, queue: &str) -> Arc<str> {
        let mut queues = self.queues.borrow_mut();
        if let Some(q) = queues.get(queue) {
            return q.clone();
        }
        if queues.len() >= Self::MAX_ROUTES {
            queues.clear();
        }
        let q: Arc<str> = Arc::from(queue);
        queues.insert(q.clone());
        q
    }
}

/// One operation's view of the transaction and what it changed.
pub struct Op<'a> {
    pub conn: &'a Connection,
    pub now: Timestamp,
    cache: &'a RunCache,
    pub deltas: HashMap<i64, Delta>,
    pub woken: HashSet<String>,
    wake_all: bool,
    new_runs: Vec<(i64, RunName)>,
    /// Runs whose finish must be checked after this transaction's counters move.
    pub touched: HashSet<i64>,
    /// For the change feed, in the order the changes happened.
    pub events: Vec<Change>,
    pub stats: QueueDeltas,
    /// A job left running (it may have freed a limit's running slot).
    left_running: bool,
}

impl<'a> Op<'a> {
    pub fn new(conn: &'a Connection, now: Timestamp, cache: &'a RunCache) -> Self {
        Op {
            conn,
            now,
            cache,
            deltas: HashMap::new(),
            woken: HashSet::new(),
            wake_all: false,
            new_runs: Vec::new(),
            touched: HashSet::new(),
            events: Vec::new(),
            stats: QueueDeltas::default(),
            left_running: false,
        }
    }

    /// Job `job` of `run` moved from `from` (None: it was just created) to `to`: moves
    /// the run's counters and records the change for the feed.
    pub fn moved(&mut self, job: i64, run: i64, from: Option<JobState>, to: JobState) {
        let d = self.deltas.entry(run).or_default();
        self.left_running |= from == Some(JobState::Running);
        match from {
            Some(f) => d.add(f, -1),
            None => d.total += 1,
        }
        d.add(to, 1);
        self.touched.insert(run);
        self.events.push(Change {
            job,
            run,
            state: to,
        });
    }

    /// A job of `run` in `state` was deleted: the run counts it no more. No feed event:
    /// no job changed state.
    pub fn forgot(&mut self, run: i64, state: JobState) {
        let d = self.deltas.entry(run).or_default();
        d.total -= 1;
        d.add(state, -1);
        self.touched.insert(run);
    }

    /// Wake waiters of every queue (when which queue is not known without a read).
    pub fn wake_all(&mut self) {
        self.wake_all = true;
    }

    pub fn wake(&mut self, queue: &str) {
        if !self.woken.contains(queue) {
            self.woken.insert(queue.to_string());
        }
    }

    pub fn run_id(&self, name: &RunName) -> OpResult<Option<i64>> {
        if let Some(id) = self.cache.by_name.get(name.as_str()) {
            return Ok(Some(*id));
        }
        if let Some((id, _)) = self.new_runs.iter().find(|(_, n)| n == name) {
            return Ok(Some(*id));
        }
        self.conn
            .prepare_cached("SELECT id FROM runs WHERE name = ?1")
            .and_then(|mut s| s.query_row([name.as_str()], |r| r.get(0)).optional())
            .map_err(db("look up run"))
    }

    pub fn ensure_run(&mut self, name: &RunName, on_done: Option<&JobSpec>) -> OpResult<i64> {
        let on_done = on_done
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| BackendError::store("encode on_done", e))?;
        if let Some(id) = self.run_id(name)? {
            if let Some(spec) = on_done {
                self.conn
                    .execute(
                        "UPDATE runs SET on_done = ?1 WHERE id = ?2",
                        params![spec, id],
                    )
                    .map_err(db("set run hook"))?;
            }
            return Ok(id);
        }
        self.conn
            .execute(
                "INSERT INTO runs (name, created_at, on_done) VALUES (?1, ?2, ?3)",
                params![name.as_str(), self.now.0, on_done],
            )
            .map_err(db("create run"))?;
        let id = self.conn.last_insert_rowid();
        self.new_runs.push((id, name.clone()));
        Ok(id)
    }

    pub fn cache(&self) -> &RunCache {
        self.cache
    }

    pub fn run_name(&self, id: i64) -> OpResult<RunName> {
        if let Some(n) = self.cache.by_id.get(&id) {
            return Ok(n.clone());
        }
        if let Some((_, n)) = self.new_runs.iter().find(|(i, _)| *i == id) {
            return Ok(n.clone());
        }
        let name: String = self
            .conn
            .prepare_cached("SELECT name FROM runs WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)))
            .map_err(db("look up run name"))?;
        RunName::new(name).map_err(|e| BackendError::store("read run name", e))
    }

    /// What this operation changed, to be kept only if it succeeds.
    pub fn into_parts(self) -> OpParts {
        OpParts {
            deltas: self.deltas,
            woken: self.woken,
            wake_all: self.wake_all,
            touched: self.touched,
            new_runs: self.new_runs,
            events: self.events,
            stats: self.stats,
            left_running: self.left_running,
        }
    }
}

pub struct OpParts {
    deltas: HashMap<i64, Delta>,
    woken: HashSet<String>,
    wake_all: bool,
    touched: HashSet<i64>,
    new_runs: Vec<(i64, RunName)>,
    events: Vec<Change>,
    stats: QueueDeltas,
    left_running: bool,
}

impl OpParts {
    /// Fold an operation's effects into the transaction's.
    pub fn merge_into(self, txn: &mut TxnEffects, cache: &mut RunCache) {
        for (run, d) in self.deltas {
            let t = txn.deltas.entry(run).or_default();
            t.total += d.total;
            for state in JobState::ALL {
                t.add(state, d.of(state));
            }
        }
        txn.woken.extend(self.woken);
        txn.wake_all |= self.wake_all;
        txn.left_running |= self.left_running;
        txn.touched.extend(self.touched);
        if txn.events.is_empty() {
            txn.events = self.events;
        } else {
            txn.events.extend(self.events);
        }
        txn.stats.merge(self.stats);
        for (id, name) in self.new_runs {
            cache.by_name.insert(name.as_str().to_string(), id);
            cache.by_id.insert(id, name);
        }
    }
}

/// What a whole transaction changed, applied just before it commits.
#[derive(Default)]
pub struct TxnEffects {
    /// Set when an operation without a savepoint failed: the transaction must abort.
    pub poisoned: Option<BackendError>,
    pub deltas: HashMap<i64, Delta>,
    pub woken: HashSet<String>,
    pub wake_all: bool,
    pub touched: HashSet<i64>,
    /// The feed's events, written once just before the commit.
    pub events: Vec<Change>,
    /// Per-queue statistics, written once just before the commit.
    pub stats: QueueDeltas,
    /// Some job left running in this transaction.
    pub left_running: bool,
}
