//! The embedded default backend: job state in one SQLite file (WAL mode) in a data
//! directory, no server to install.
//!
//! Design: one writer thread owns the write connection and applies every change in
//! group-committed transactions (`writer.rs`); reads use a second connection and never
//! wait for it. Hot queries are covered by partial indexes; run counters and per-queue
//! statistics (`write/stats.rs`) move in the same transaction as the jobs they count,
//! so progress is O(1) to read and the statistics cover every process sharing the
//! file. In-process reserve calls are woken the moment a commit makes jobs runnable;
//! other processes sharing the file are seen within `poll_interval`. After a killed
//! process, the next open resumes: committed work is durable and expired leases are
//! recovered.

#![deny(missing_docs)]

mod error;
mod migrations;
mod read;
mod read_jobs;
mod retention;
mod schedules;
mod schema;
mod states;
mod write;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;
use tranche_backend::{long_poll, Answer, Backend, Notifier};
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, Effect,
    EnqueueRequest, Enqueued, JobEvent, JobFailure, JobFilter, JobId, JobPage, JobRecord, LeaseRef,
    Limit, LimitScope, LimitStatus, LockClaim, Pruned, QueueDepth, QueueStats, Record,
    ReserveRequest, ReservedJob, RunName, RunProgress, StoredSchedule, SystemClock, Timestamp,
};
use tranche_types::{EffectRecord, LockRequest, ScheduleWrite};

use error::AtPath;
use writer::{Command, Reply};

/// How to open the embedded backend.
#[derive(Clone)]
pub struct SqliteOptions {
    /// Where every timestamp, lease expiry and due time comes from; tests pass a
    /// manual clock.
    pub clock: Arc<dyn Clock>,
    /// fsync every commit (survives power loss); off by default, which still survives
    /// a killed process.
    pub full_sync: bool,
    /// How often an idle reserve call looks for work made by other processes.
    pub poll_interval: Duration,
    /// How long a finished run (with its jobs) is kept after its last job ended, as
    /// Redis keeps it ([`Backend::prune`]); `None` keeps everything. The writer removes
    /// what is older by itself, in small batches between the commands it serves.
    pub retention: Option<Duration>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            clock: Arc::new(SystemClock),
            full_sync: false,
            poll_interval: Duration::from_millis(500),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
        }
    }
}

/// The embedded backend. Cheap to share behind an `Arc`; the writer thread stops when
/// the last handle is dropped.
pub struct SqliteBackend {
    path: PathBuf,
    commands: Mutex<Sender<Command>>,
    reader: Arc<Mutex<Connection>>,
    notifier: Arc<Notifier>,
    options: SqliteOptions,
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("path", &self.path)
            .finish()
    }
}

/// Job arguments can hold personal data: the directory and the database are the
/// owner's alone. SQLite gives its -wal and -shm files the database file's mode, so
/// creating that file first (or narrowing an older one) covers all three.
fn owner_only(dir: &Path, db: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(db)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700))?;
        for side in ["-wal", "-shm"] {
            let mut name = db.as_os_str().to_owned();
            name.push(side);
            match std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
    }
    Ok(())
}

impl SqliteBackend {
    /// The database's file name inside the data directory given to [`open`](Self::open);
    /// SQLite keeps its `-wal` and `-shm` files next to it.
    pub const FILE_NAME: &'static str = "tranche.db";

    /// Open (creating if needed) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, BackendError> {
        let dir = dir.as_ref();
        let path = dir.join(Self::FILE_NAME);
        owner_only(dir, &path)
            .map_err(|e| BackendError::store("create data directory", AtPath::new(dir, e)))?;
        let open = |what: &'static str| {
            // Each connection is used by one thread at a time, so SQLite's own
            // per-connection mutex is pure overhead.
            let flags = OpenFlags::default() & !OpenFlags::SQLITE_OPEN_FULL_MUTEX
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(&path, flags)
                .and_then(|conn| schema::configure(&conn, options.full_sync).map(|()| conn))
                .map_err(|e| BackendError::store(what, AtPath::new(&path, e)))?;
            Ok::<_, BackendError>(conn)
        };
        let mut writer_conn = open("open database")?;
        schema::migrate(&mut writer_conn)
            .map_err(|e| BackendError::store("prepare database", AtPath::new(&path, e)))?;
        let reader = open("open database for reading")?;
        let notifier = Arc::new(Notifier::default());
        let (tx, rx) = mpsc::channel();
        let clock = options.clock.clone();
        let n = notifier.clone();
        let retention = options.retention;
        std::thread::Builder::new()
            .name("tranche-sqlite-writer".into())
            .spawn(move || writer::run(writer_conn, rx, clock, n, retention))
            .map_err(|e| BackendError::store("start writer thread", e))?;
        Ok(SqliteBackend {
            path,
            commands: Mutex::new(tx),
            reader: Arc::new(Mutex::new(reader)),
            notifier,
            options,
        })
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, BackendError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .lock()
            .expect("command channel lock")
            .send(make(tx))
            .map_err(|_| BackendError::Closed)?;
        rx.await
            .map_err(|_| BackendError::Closed)?
            .map_err(|e| self.name_full(e))
    }

    /// A full disk names the database, so the operator knows where to free space.
    fn name_full(&self, e: BackendError) -> BackendError {
        match e {
            BackendError::Full { op, source, .. } => BackendError::Full {
                op,
                path: self.path.display().to_string(),
                source,
            },
            other => other,
        }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, BackendError> + Send + 'static,
    ) -> Result<T, BackendError> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || f(&reader.lock().expect("reader lock")))
            .await
            .map_err(|e| BackendError::store("read", e))?
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn clock(&self) -> Arc<dyn Clock> {
        self.options.clock.clone()
    }

    async fn enqueue(&self, req: EnqueueRequest) -> Result<Vec<Enqueued>, BackendError> {
        self.call(|r| Command::Enqueue(req, r)).await
    }

    async fn reserve(&self, req: ReserveRequest) -> Result<Vec<ReservedJob>, BackendError> {
        let wake = self.notifier.queue(&req.queue);
        long_poll(
            &wake,
            req.wait,
            self.options.poll_interval,
            self.options.clock.as_ref(),
            || async {
                let reserved = self
                    .call(|reply| Command::Reserve {
                        queue: req.queue.clone(),
                        max: req.max.max(1),
                        lease: req.lease,
                        reply,
                    })
                    .await?;
                Ok(if reserved.jobs.is_empty() {
                    Answer::NotYet {
                        next_due: reserved.next_at,
                    }
                } else {
                    Answer::Ready(reserved.jobs)
                })
            },
        )
        .await
    }

    async fn complete(&self, batch: Vec<Completion>) -> Result<Vec<CompletionAck>, BackendError> {
        self.call(|r| Command::Complete(batch, r)).await
    }

    async fn commit(&self, commit: Commit) -> Result<CommitAck, BackendError> {
        self.call(|r| Command::Commit(Box::new(commit), r)).await
    }

    async fn records(&self, keys: &[String]) -> Result<Vec<Option<Record>>, BackendError> {
        let keys = keys.to_vec();
        self.read(move |c| read::records(c, &keys)).await
    }

    async fn heartbeat(
        &self,
        leases: Vec<LeaseRef>,
        lease: Duration,
    ) -> Result<Vec<LeaseRef>, BackendError> {
        self.call(|r| Command::Heartbeat(leases, lease, r)).await
    }

    async fn release(&self, leases: Vec<LeaseRef>) -> Result<u64, BackendError> {
        self.call(|r| Command::Release(leases, r)).await
    }

    async fn cancel(&self, target: CancelTarget, reason: &str) -> Result<u64, BackendError> {
        let reason = reason.to_string();
        self.call(|r| Command::Cancel(target, reason, r)).await
    }

    async fn retry_run(&self, run: &RunName) -> Result<u64, BackendError> {
        let run = run.clone();
        self.call(|r| Command::RetryRun(run, r)).await
    }

    async fn run_progress(&self, run: &RunName) -> Result<Option<RunProgress>, BackendError> {
        let run = run.clone();
        self.read(move |c| read::run_progress(c, &run)).await
    }

    async fn list_runs(&self, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
        self.read(move |c| read::list_runs(c, limit)).await
    }

    async fn run_failures(
        &self,
        run: &RunName,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<JobFailure>, BackendError> {
        let run = run.clone();
        self.read(move |c| read::run_failures(c, &run, after, limit))
            .await
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, BackendError> {
        self.read(move |c| read::job(c, id)).await
    }

    async fn unique_jobs(
        &self,
        run: &RunName,
        keys: &[String],
    ) -> Result<Vec<Option<JobId>>, BackendError> {
        let (run, keys) = (run.as_str().to_string(), keys.to_vec());
        self.read(move |c| read::unique_jobs(c, &run, &keys)).await
    }

    async fn unique_keys(
        &self,
        run: &RunName,
        cursor: &str,
        limit: usize,
    ) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
        let (run, after) = (run.as_str().to_string(), cursor.to_string());
        self.read(move |c| read::unique_keys(c, &run, &after, limit))
            .await
    }

    async fn queue_depth(&self, queue: &str, cap: u64) -> Result<u64, BackendError> {
        let queue = queue.to_string();
        self.read(move |c| read::queue_depth(c, &queue, cap)).await
    }

    async fn queue_depths(&self) -> Result<Vec<QueueDepth>, BackendError> {
        self.read(read::queue_depths).await
    }

    async fn queue_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.read(write::stats::read).await
    }

    async fn last_event(&self) -> Result<u64, BackendError> {
        self.read(write::events::last).await
    }

    async fn events(
        &self,
        after: u64,
        limit: usize,
        wait: Duration,
    ) -> Result<Vec<JobEvent>, BackendError> {
        let limit = limit.max(1);
        long_poll(
            self.notifier.feed(),
            wait,
            self.options.poll_interval,
            self.options.clock.as_ref(),
            || async move {
                let events = self
                    .read(move |c| write::events::read(c, after, limit))
                    .await?;
                Ok(if events.is_empty() {
                    Answer::NotYet { next_due: None }
                } else {
                    Answer::Ready(events)
                })
            },
        )
        .await
    }

    async fn claim_locks(&self, request: LockRequest<'_>) -> Result<LockClaim, BackendError> {
        let (owner, keys, ttl) = (
            request.owner.to_string(),
            request.keys.to_vec(),
            request.ttl,
        );
        self.call(|reply| Command::ClaimLocks {
            owner,
            keys,
            ttl,
            reply,
        })
        .await
    }

    async fn release_locks(&self, owner: &str, keys: &[String]) -> Result<u64, BackendError> {
        let (owner, keys) = (owner.to_string(), keys.to_vec());
        self.call(|reply| Command::ReleaseLocks { owner, keys, reply })
            .await
    }

    async fn effect(&self, key: &str) -> Result<Option<Effect>, BackendError> {
        let key = key.to_string();
        self.read(move |c| read::effect(c, &key)).await
    }

    async fn record_effect(&self, record: EffectRecord<'_>) -> Result<bool, BackendError> {
        let (key, job, value) = (record.key.to_string(), record.job, record.value.to_string());
        self.call(|reply| Command::RecordEffect {
            key,
            job,
            value,
            reply,
        })
        .await
    }

    async fn claim_finish_hook(
        &self,
        run: &RunName,
        hook: &str,
        finish: u32,
    ) -> Result<bool, BackendError> {
        let (run, hook) = (run.clone(), hook.to_string());
        self.call(|reply| Command::ClaimFinishHook {
            run,
            hook,
            finish,
            reply,
        })
        .await
    }

    async fn prune(&self, before: Timestamp, limit: usize) -> Result<Pruned, BackendError> {
        // One bounded batch per writer command, so other commands interleave.
        let mut total = Pruned::default();
        loop {
            let max_runs = (limit as u64).saturating_sub(total.runs);
            if max_runs == 0 {
                return Ok(total);
            }
            let batch = self
                .call(|reply| Command::Prune {
                    before,
                    max_runs,
                    reply,
                })
                .await?;
            total.add(batch.pruned);
            if !batch.more {
                return Ok(total);
            }
        }
    }

    async fn pause_queue(&self, queue: &str) -> Result<bool, BackendError> {
        let queue = queue.to_string();
        self.call(|r| Command::PauseQueue(queue, r)).await
    }

    async fn resume_queue(&self, queue: &str) -> Result<bool, BackendError> {
        let queue = queue.to_string();
        self.call(|r| Command::ResumeQueue(queue, r)).await
    }

    async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        self.read(write::pause::read).await
    }

    async fn retry_job(&self, id: JobId) -> Result<u64, BackendError> {
        self.call(|r| Command::RetryJob(id, r)).await
    }

    async fn delete_job(&self, id: JobId) -> Result<bool, BackendError> {
        self.call(|r| Command::DeleteJob(id, r)).await
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<JobId>,
        limit: usize,
    ) -> Result<JobPage, BackendError> {
        let filter = filter.clone();
        self.read(move |c| read_jobs::list_jobs(c, &filter, after, limit))
            .await
    }

    async fn put_schedule(&self, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
        let (name, timing, spec, through) = (
            schedule.name.to_string(),
            schedule.timing.to_string(),
            schedule.spec.to_string(),
            schedule.through,
        );
        self.call(|reply| Command::PutSchedule {
            name,
            timing,
            spec,
            through,
            reply,
        })
        .await
    }

    async fn delete_schedule(&self, name: &str) -> Result<bool, BackendError> {
        let name = name.to_string();
        self.call(|reply| Command::DeleteSchedule { name, reply })
            .await
    }

    async fn schedules(&self) -> Result<Vec<StoredSchedule>, BackendError> {
        self.read(schedules::list).await
    }

    async fn fire_schedule(
        &self,
        name: &str,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
    ) -> Result<Option<Vec<Enqueued>>, BackendError> {
        let name = name.to_string();
        self.call(|reply| Command::FireSchedule {
            name,
            due,
            enqueue,
            reply,
        })
        .await
    }

    async fn put_limit(&self, limit: &Limit) -> Result<bool, BackendError> {
        limit.check()?;
        let limit = limit.clone();
        self.call(|r| Command::PutLimit(limit, r)).await
    }

    async fn delete_limit(&self, scope: &LimitScope) -> Result<bool, BackendError> {
        scope.check()?;
        let scope = scope.clone();
        self.call(|r| Command::DeleteLimit(scope, r)).await
    }

    async fn limits(&self) -> Result<Vec<LimitStatus>, BackendError> {
        let now = self.options.clock.now();
        self.read(move |c| write::limits::read(c, now)).await
    }
}
