//! The single writer thread. Every change goes through it: it takes all commands that
//! are waiting, applies each inside its own savepoint of one transaction (so one bad
//! command fails alone), moves the run counters once per run and the queue statistics
//! once per queue, commits once and only then answers. Many small completions thus
//! cost one commit (group commit).
//!
//! A full disk (SQLITE_FULL) fails the whole transaction, never one command of it:
//! SQLite may already have rolled the transaction back, and applying the rest would
//! commit it statement by statement. Every caller gets [`BackendError::Full`] and
//! retries; the writer carries on, and once space is freed the same commands commit.
//! Leases are pushed back by how long the disk was full (nobody could extend them).

use std::collections::HashSet;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use tokio::sync::oneshot;
use tranche_types::{
    BackendError, CancelTarget, Clock, Commit, CommitAck, Completion, CompletionAck, EnqueueItem,
    EnqueueRequest, Enqueued, JobId, JobSpec, JobState, LeaseRef, LockClaim, RunName, Timestamp,
};

use crate::error::RolledBack;
use crate::retention::{self, Schedule};
use crate::write::prune::Batch;
use crate::write::reserve::Reserved;
use crate::write::{self, db, Op, OpParts, OpResult, RunCache, TxnEffects};
use tranche_backend::Notifier;

pub type Reply<T> = oneshot::Sender<OpResult<T>>;

pub enum Command {
    Enqueue(EnqueueRequest, Reply<Vec<Enqueued>>),
    Reserve {
        queue: String,
        max: usize,
        lease: Duration,
        reply: Reply<Reserved>,
    },
    Complete(Vec<Completion>, Reply<Vec<CompletionAck>>),
    Commit(Box<Commit>, Reply<CommitAck>),
    Heartbeat(Vec<LeaseRef>, Duration, Reply<Vec<LeaseRef>>),
    Release(Vec<LeaseRef>, Reply<u64>),
    Cancel(CancelTarget, String, Reply<u64>),
    RetryRun(RunName, Reply<u64>),
    RetryJob(JobId, Reply<u64>),
    DeleteJob(JobId, Reply<bool>),
    ClaimLocks {
        owner: String,
        keys: Vec<String>,
        ttl: Duration,
        reply: Reply<LockClaim>,
    },
    ReleaseLocks {
        owner: String,
        keys: Vec<String>,
        reply: Reply<u64>,
    },
    RecordEffect {
        key: String,
        job: Option<JobId>,
        value: String,
        reply: Reply<bool>,
    },
    ClaimFinishHook {
        run: RunName,
        hook: String,
        finish: u32,
        reply: Reply<bool>,
    },
    /// One bounded batch of retention (see `write/prune.rs`).
    Prune {
        before: Timestamp,
        max_runs: u64,
        reply: Reply<Batch>,
    },
    PauseQueue(String, Reply<bool>),
    PutLimit(tranche_types::Limit, Reply<bool>),
    DeleteLimit(tranche_types::LimitScope, Reply<bool>),
    ResumeQueue(String, Reply<bool>),
    PutSchedule {
        name: String,
        timing: String,
        spec: String,
        through: Timestamp,
        reply: Reply<bool>,
    },
    DeleteSchedule {
        name: String,
        reply: Reply<bool>,
    },
    FireSchedule {
        name: String,
        due: Timestamp,
        enqueue: Option<EnqueueRequest>,
        reply: Reply<Option<Vec<Enqueued>>>,
    },
}

/// Sends a command's answer once the transaction's fate is known; returns leases that
/// were reserved for a caller that has gone away, to be handed back.
type Answer = Box<dyn FnOnce(Option<&BackendError>) -> Vec<LeaseRef> + Send>;

const MAX_COMMANDS_PER_TXN: usize = 512;

/// `retention`: how long finished runs are kept (None: for ever).
pub fn run(
    mut conn: Connection,
    rx: Receiver<Command>,
    clock: Arc<dyn Clock>,
    notifier: Arc<Notifier>,
    retention: Option<Duration>,
) {
    let mut cache = RunCache::default();
    let mut orphans: Vec<LeaseRef> = Vec::new();
    let mut full_since: Option<Timestamp> = None;
    let mut schedule = retention.map(Schedule::new);
    let mut pruning = false;
    loop {
        let mut cmds = Vec::new();
        // While retention batches come back full the writer does not wait for a command.
        if orphans.is_empty() && !pruning {
            match rx.recv() {
                Ok(c) => cmds.push(c),
                Err(_) => return,
            }
        }
        while cmds.len() < MAX_COMMANDS_PER_TXN {
            match rx.try_recv() {
                Ok(c) => cmds.push(c),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) if cmds.is_empty() && orphans.is_empty() => return,
                Err(TryRecvError::Disconnected) => break,
            }
        }
        // Before the commands that woke the writer, so that their inserts reuse the
        // pages a due batch frees.
        if let Some(schedule) = &mut schedule {
            pruning = prune_if_due(&mut conn, clock.as_ref(), &mut cache, &notifier, schedule);
        }
        if cmds.is_empty() && orphans.is_empty() {
            continue;
        }
        let orphaned = std::mem::take(&mut orphans);
        orphans = transact(
            &mut conn,
            clock.now(),
            &mut cache,
            &notifier,
            cmds,
            orphaned,
            &mut full_since,
        );
    }
}

/// One retention batch in a transaction of its own, if one is due; returns whether it
/// came back full (more may be due at once).
fn prune_if_due(
    conn: &mut Connection,
    clock: &dyn Clock,
    cache: &mut RunCache,
    notifier: &Notifier,
    schedule: &mut Schedule,
) -> bool {
    let now = clock.now();
    let Some(before) = schedule.due(now) else {
        return false;
    };
    let (tx, mut rx) = oneshot::channel();
    let prune = Command::Prune {
        before,
        max_runs: u64::MAX,
        reply: tx,
    };
    // A full disk leaves nothing to prune into; the next command's transaction says so.
    let mut no_full = None;
    let _ = transact(
        conn,
        now,
        cache,
        notifier,
        vec![prune],
        Vec::new(),
        &mut no_full,
    );
    let more = match rx.try_recv() {
        Ok(Ok(batch)) => batch.more,
        Ok(Err(e)) => {
            tracing::warn!(error = %tranche_types::one_line(&e), "retention: could not prune");
            false
        }
        Err(_) => false,
    };
    schedule.ran(now, more);
    more
}

/// `full_since`: when the disk was first found full, if it still is as far as this
/// writer knows.
fn transact(
    conn: &mut Connection,
    now: Timestamp,
    cache: &mut RunCache,
    notifier: &Notifier,
    cmds: Vec<Command>,
    orphans: Vec<LeaseRef>,
    full_since: &mut Option<Timestamp>,
) -> Vec<LeaseRef> {
    let mut answers: Vec<Answer> = Vec::with_capacity(cmds.len());
    let mut fx = TxnEffects::default();
    let outcome = (|| -> OpResult<()> {
        let mut tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db("begin transaction"))?;
        forget_runs_pruned_elsewhere(&tx, cache)?;
        if let Some(since) = *full_since {
            // Before any expired lease is reaped below.
            direct(&mut tx, now, cache, &mut fx, |op| {
                write::reserve::extend_all_leases(op, now.since(since))
            })?;
        }
        if !orphans.is_empty() {
            let _ = step(&mut tx, now, cache, &mut fx, |op| {
                write::reserve::release(op, &orphans)
            });
        }
        if cmds.iter().any(|c| matches!(c, Command::Reserve { .. })) {
            if let Err(e) = direct(&mut tx, now, cache, &mut fx, write::reserve::reap_expired) {
                tracing::warn!(error = %e, "could not recover expired leases");
            }
        }
        for cmd in cmds {
            answers.push(apply(&mut tx, now, cache, &mut fx, cmd));
        }
        if let Some(e) = fx.poisoned.take() {
            return Err(e);
        }
        finish_runs(&mut tx, now, cache, &mut fx)?;
        write::events::append(&tx, now, &fx.events)?;
        fx.stats.write(&tx)?;
        tx.commit().map_err(db("commit"))
    })();
    let err = outcome.err();
    match &err {
        Some(BackendError::Full { .. }) => {
            full_since.get_or_insert(now);
        }
        None => *full_since = None,
        Some(_) => {}
    }
    if err.is_some() {
        cache.clear();
    } else {
        // A job leaving running may free a limit's running slot, for a reserve of any
        // queue (a kind's limit spans queues).
        if fx.wake_all || (fx.left_running && cache.has_limits()) {
            notifier.wake_all();
        } else {
            notifier.wake(fx.woken.iter().map(String::as_str));
        }
        if !fx.events.is_empty() {
            notifier.feed().notify_waiters();
        }
    }
    let mut orphans = Vec::new();
    for answer in answers {
        orphans.extend(answer(err.as_ref()));
    }
    orphans
}

/// Another process sharing the file may have pruned runs this writer has cached: their
/// ids would be reused for a new run's jobs. `data_version` moves only when another
/// connection commits, and is read under the write lock, so nothing can commit between
/// this check and this transaction's writes.
fn forget_runs_pruned_elsewhere(tx: &Transaction<'_>, cache: &mut RunCache) -> OpResult<()> {
    let version: i64 = tx
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db("read data version"))?;
    if cache.data_version != Some(version) {
        cache.clear();
        cache.data_version = Some(version);
    }
    Ok(())
}

fn run_op<T>(
    conn: &Connection,
    now: Timestamp,
    cache: &RunCache,
    f: impl FnOnce(&mut Op<'_>) -> OpResult<T>,
) -> (OpResult<T>, OpParts) {
    let mut op = Op::new(conn, now, cache);
    let result = f(&mut op);
    (result, op.into_parts())
}

/// Run an operation that can only fail if the store itself fails, without the cost of
/// a savepoint (statement journals were a tenth of the hot path): its failure aborts
/// the whole transaction, which every caller then sees as an error and retries.
fn direct<T>(
    conn: &mut Transaction<'_>,
    now: Timestamp,
    cache: &mut RunCache,
    fx: &mut TxnEffects,
    f: impl FnOnce(&mut Op<'_>) -> OpResult<T>,
) -> OpResult<T> {
    if let Some(e) = &fx.poisoned {
        return Err(failed_transaction(e));
    }
    let (result, parts) = run_op(conn, now, cache, f);
    match &result {
        Ok(_) => parts.merge_into(fx, cache),
        Err(e) => fx.poisoned = Some(failed_transaction(e)),
    }
    result
}

/// Run one operation in its own savepoint; its effects are kept only if it succeeds.
/// Nothing runs in a transaction that will not commit: one already failed (a
/// savepoint opened after SQLite rolled it back would start and commit a new one).
fn step<T>(
    conn: &mut Transaction<'_>,
    now: Timestamp,
    cache: &mut RunCache,
    fx: &mut TxnEffects,
    f: impl FnOnce(&mut Op<'_>) -> OpResult<T>,
) -> OpResult<T> {
    if let Some(e) = &fx.poisoned {
        return Err(failed_transaction(e));
    }
    if conn.is_autocommit() {
        let e = BackendError::store("transaction", RolledBack);
        fx.poisoned = Some(failed_transaction(&e));
        return Err(e);
    }
    let sp = conn.savepoint().map_err(db("savepoint"))?;
    let (result, parts) = run_op(&sp, now, cache, f);
    match &result {
        Ok(_) => {
            sp.commit().map_err(db("release savepoint"))?;
            parts.merge_into(fx, cache);
        }
        // The disk, not the command: the whole transaction fails and is retried.
        Err(e @ BackendError::Full { .. }) => fx.poisoned = Some(failed_transaction(e)),
        Err(_) => {}
    }
    result
}

/// A transaction's failure as each of its commands reports it: a full disk stays one.
/// One failure answers many commands, so each gets the cause's text, not the cause.
fn failed_transaction(e: &BackendError) -> BackendError {
    match e {
        BackendError::Full { path, source, .. } => BackendError::Full {
            op: "transaction",
            path: path.clone(),
            source: source.to_string().into(),
        },
        other => BackendError::store("transaction", other.to_string()),
    }
}

fn answer<T: Send + 'static>(reply: Reply<T>, result: OpResult<T>) -> Answer {
    Box::new(move |txn_err| {
        let _ = reply.send(match (txn_err, result) {
            (Some(e), _) => Err(failed_transaction(e)),
            (None, r) => r,
        });
        Vec::new()
    })
}

fn apply(
    conn: &mut Transaction<'_>,
    now: Timestamp,
    cache: &mut RunCache,
    fx: &mut TxnEffects,
    cmd: Command,
) -> Answer {
    use write::{complete, enqueue, keys, reserve, steer};
    match cmd {
        Command::Enqueue(req, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| enqueue::enqueue(op, &req)),
        ),
        Command::Reserve {
            queue,
            max,
            lease,
            reply,
        } => {
            let result = step(conn, now, cache, fx, |op| {
                reserve::reserve(op, &queue, max, lease)
            });
            Box::new(move |txn_err| match (txn_err, result) {
                (Some(e), _) => {
                    let _ = reply.send(Err(failed_transaction(e)));
                    Vec::new()
                }
                (None, result) => match reply.send(result) {
                    Ok(()) => Vec::new(),
                    Err(Ok(unclaimed)) => unclaimed.jobs.iter().map(|j| j.lease()).collect(),
                    Err(Err(_)) => Vec::new(),
                },
            })
        }
        Command::Complete(batch, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| complete::complete(op, &batch)),
        ),
        Command::Commit(commit, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                write::commit::commit(op, &commit)
            }),
        ),
        Command::Heartbeat(leases, lease, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                reserve::heartbeat(op, &leases, lease)
            }),
        ),
        Command::Release(leases, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| reserve::release(op, &leases)),
        ),
        Command::Cancel(target, reason, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                steer::cancel(op, &target, &reason)
            }),
        ),
        Command::RetryRun(run, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| steer::retry_run(op, &run)),
        ),
        Command::RetryJob(id, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| write::one_job::retry_job(op, id)),
        ),
        Command::DeleteJob(id, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                write::one_job::delete_job(op, id)
            }),
        ),
        Command::ClaimLocks {
            owner,
            keys,
            ttl,
            reply,
        } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                keys::claim_locks(op, &owner, &keys, ttl)
            }),
        ),
        Command::ReleaseLocks { owner, keys, reply } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                keys::release_locks(op, &owner, &keys)
            }),
        ),
        Command::RecordEffect {
            key,
            job,
            value,
            reply,
        } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                keys::record_effect(op, &key, job, &value)
            }),
        ),
        Command::Prune {
            before,
            max_runs,
            reply,
        } => {
            let result = step(conn, now, cache, fx, |op| {
                write::prune::prune(op, before, max_runs, retention::BATCH)
            });
            if matches!(&result, Ok(b) if b.pruned.runs > 0) {
                // Pruned runs' names may be taken again, by new runs with new ids.
                cache.clear();
            }
            answer(reply, result)
        }
        Command::ClaimFinishHook {
            run,
            hook,
            finish,
            reply,
        } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                keys::claim_finish_hook(op, &run, &hook, finish)
            }),
        ),
        Command::PutLimit(limit, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| write::limits::put(op, &limit)),
        ),
        Command::DeleteLimit(scope, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| write::limits::delete(op, &scope)),
        ),
        Command::PauseQueue(queue, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| write::pause::pause(op, &queue)),
        ),
        Command::ResumeQueue(queue, reply) => answer(
            reply,
            step(conn, now, cache, fx, |op| write::pause::resume(op, &queue)),
        ),
        Command::PutSchedule {
            name,
            timing,
            spec,
            through,
            reply,
        } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                write::schedules::put(op, &name, &timing, &spec, through)
            }),
        ),
        Command::DeleteSchedule { name, reply } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                write::schedules::delete(op, &name)
            }),
        ),
        Command::FireSchedule {
            name,
            due,
            enqueue,
            reply,
        } => answer(
            reply,
            step(conn, now, cache, fx, |op| {
                write::schedules::fire(op, &name, due, enqueue.as_ref())
            }),
        ),
    }
}

/// Where a run stands, to tell whether it just finished or was reopened.
struct RunTally {
    total: i64,
    ended: i64,
    finished_at: Option<i64>,
    name: String,
    on_done: Option<String>,
}

/// Move run counters once per run, then mark runs that just finished (enqueueing
/// their on-done job) or were reopened by a retry.
fn finish_runs(
    conn: &mut Transaction<'_>,
    now: Timestamp,
    cache: &mut RunCache,
    fx: &mut TxnEffects,
) -> OpResult<()> {
    loop {
        let deltas = std::mem::take(&mut fx.deltas);
        let touched: HashSet<i64> = std::mem::take(&mut fx.touched);
        if deltas.is_empty() && touched.is_empty() {
            return Ok(());
        }
        {
            let mut stmt = conn
                .prepare_cached(
                    "UPDATE runs SET total = total + ?1, pending = pending + ?2, available = available + ?3,
                        running = running + ?4, succeeded = succeeded + ?5, failed = failed + ?6,
                        cancelled = cancelled + ?7
                     WHERE id = ?8",
                )
                .map_err(db("update run counters"))?;
            for (run, d) in &deltas {
                stmt.execute(params![
                    d.total,
                    d.of(JobState::Pending),
                    d.of(JobState::Available),
                    d.of(JobState::Running),
                    d.of(JobState::Succeeded),
                    d.of(JobState::Failed),
                    d.of(JobState::Cancelled),
                    run
                ])
                .map_err(db("update run counters"))?;
            }
        }
        for run in touched {
            let tally = conn
                .prepare_cached(
                    "SELECT total, succeeded + failed + cancelled, finished_at, name, on_done FROM runs WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.query_row([run], |r| {
                        Ok(RunTally {
                            total: r.get(0)?,
                            ended: r.get(1)?,
                            finished_at: r.get(2)?,
                            name: r.get(3)?,
                            on_done: r.get(4)?,
                        })
                    })
                    .optional()
                })
                .map_err(db("read run counters"))?;
            let Some(RunTally {
                total,
                ended,
                finished_at,
                name,
                on_done,
            }) = tally
            else {
                continue;
            };
            if total > 0 && ended == total && finished_at.is_none() {
                conn.execute(
                    "UPDATE runs SET finished_at = ?1, finishes = finishes + 1 WHERE id = ?2",
                    params![now.0, run],
                )
                .map_err(db("mark run finished"))?;
                if let Some(spec) = on_done {
                    let spec: JobSpec = serde_json::from_str(&spec)
                        .map_err(|e| BackendError::store("decode run on_done job", e))?;
                    let hook_run = RunName::new(format!("{name}/done"))
                        .map_err(|e| BackendError::store("name on-done run", e))?;
                    step(conn, now, cache, fx, |op| {
                        let id = op.ensure_run(&hook_run, None)?;
                        write::enqueue::enqueue_item(op, id, &EnqueueItem::Job(spec))
                    })?;
                }
            } else if ended < total && finished_at.is_some() {
                conn.execute("UPDATE runs SET finished_at = NULL WHERE id = ?1", [run])
                    .map_err(db("reopen run"))?;
            }
        }
    }
}
