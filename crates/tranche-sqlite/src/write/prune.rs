//! Retention: removing finished runs past their time, with their jobs, a bounded
//! number of rows per call so that the writer's transaction stays short (other writes
//! wait for it). A run's row goes with its last batch of jobs: until then it is still
//! listed, with counters that count jobs already removed. Freed pages go to SQLite's
//! freelist and are reused by the next inserts, so a steady workload keeps the file
//! the size of its retention window (no VACUUM, which would rewrite the whole file
//! under the write lock).
//!
//! Also removed, by the same bound: change-feed rows stamped before the cut-off (the
//! newest row always stays, so the feed's last seq never goes back) and locks expired
//! before it (Redis lets a lock's key expire the retention after its TTL: the same).
//! Effects and per-queue statistics are kept.

use rusqlite::{params, OptionalExtension};
use tranche_types::{Pruned, Timestamp};

use super::{db, Op, OpResult};

/// One batch's work, and whether more may be due.
#[derive(Debug, Default)]
pub struct Batch {
    pub pruned: Pruned,
    /// The budget ran out (or `max_runs` was reached): another batch may find more.
    pub more: bool,
}

/// Remove up to `max_runs` runs finished before `before`, touching at most `max_rows`
/// jobs, and as many feed rows and locks.
pub fn prune(
    op: &mut Op<'_>,
    before: Timestamp,
    max_runs: u64,
    max_rows: usize,
) -> OpResult<Batch> {
    let mut batch = Batch::default();
    let mut budget = max_rows;
    while batch.pruned.runs < max_runs {
        if budget == 0 {
            batch.more = true;
            break;
        }
        let Some(run) = oldest_finished(op, before)? else {
            break;
        };
        let removed = remove_jobs(op, run, budget)?;
        batch.pruned.jobs += removed as u64;
        if removed == budget {
            // Perhaps more jobs left: the run goes with a later batch.
            budget = 0;
            continue;
        }
        budget -= removed;
        op.conn
            .prepare_cached("DELETE FROM finish_hooks WHERE run_id = ?1")
            .and_then(|mut s| s.execute([run]))
            .map_err(db("prune finish hooks"))?;
        op.conn
            .prepare_cached("DELETE FROM runs WHERE id = ?1")
            .and_then(|mut s| s.execute([run]))
            .map_err(db("prune run"))?;
        batch.pruned.runs += 1;
    }
    if batch.pruned.runs == max_runs {
        batch.more = true;
    }
    let (records, more) = prune_records(op, before, max_rows)?;
    batch.pruned.records += records;
    batch.more |= more;
    batch.more |= prune_events(op, before, max_rows)?;
    batch.more |= prune_locks(op, before, max_rows)?;
    Ok(batch)
}

/// The oldest run that finished before `before` with no job left to run (the counters
/// are checked too: a run is never removed while any of its jobs can still move).
fn oldest_finished(op: &Op<'_>, before: Timestamp) -> OpResult<Option<i64>> {
    op.conn
        .prepare_cached(
            "SELECT id FROM runs WHERE finished_at < ?1 AND pending = 0 AND available = 0
               AND running = 0 ORDER BY id LIMIT 1",
        )
        .and_then(|mut s| s.query_row([before.0], |r| r.get(0)).optional())
        .map_err(db("find runs to prune"))
}

/// Remove up to `max` of the run's jobs with their attempt errors and the groups left
/// without members; returns how many jobs went.
fn remove_jobs(op: &Op<'_>, run: i64, max: usize) -> OpResult<usize> {
    let removed: Vec<(i64, Option<i64>)> = op
        .conn
        .prepare_cached(
            "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE run_id = ?1 LIMIT ?2)
             RETURNING id, group_id",
        )
        .and_then(|mut s| {
            s.query_map(params![run, max as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(db("prune jobs"))?;
    let mut errors = op
        .conn
        .prepare_cached("DELETE FROM job_errors WHERE job_id = ?1")
        .map_err(db("prune attempt errors"))?;
    let mut groups = op
        .conn
        .prepare_cached(
            "DELETE FROM groups WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE group_id = ?1)",
        )
        .map_err(db("prune groups"))?;
    // A windowed unique key goes with its job: the file must not keep growing with
    // windows of jobs long gone.
    let mut windows = op
        .conn
        .prepare_cached("DELETE FROM unique_windows WHERE job_id = ?1")
        .map_err(db("prune unique windows"))?;
    if let Some(newest) = removed.iter().map(|&(id, _)| id).max() {
        super::one_job::keep_deleted_id(op, newest)?;
    }
    let mut last_group = None;
    for &(id, group) in &removed {
        errors.execute([id]).map_err(db("prune attempt errors"))?;
        windows.execute([id]).map_err(db("prune unique windows"))?;
        // Members are consecutive ids: one check per group, not per member.
        if group.is_some() && group != last_group {
            groups.execute([group]).map_err(db("prune groups"))?;
            last_group = group;
        }
    }
    super::trace::forget_all(op, removed.iter().map(|&(id, _)| id))?;
    // A gate of a cancelled workflow is never released: its row goes with its job.
    let ids: Vec<i64> = removed.iter().map(|&(id, _)| id).collect();
    super::commit::forget_gates(op, &ids)?;
    Ok(removed.len())
}

/// Drop up to `max` of the oldest feed rows stamped before `before`, never the newest
/// row. Rows are read in id order and the first one not older stops it, so this never
/// scans the feed. Returns whether the budget ran out.
fn prune_events(op: &Op<'_>, before: Timestamp, max: usize) -> OpResult<bool> {
    let oldest: Vec<(i64, i64)> = op
        .conn
        .prepare_cached("SELECT id, at FROM events ORDER BY id LIMIT ?1")
        .and_then(|mut s| {
            s.query_map([max as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(db("find events to prune"))?;
    let older = oldest.iter().take_while(|(_, at)| *at < before.0).count();
    let Some(&(last, _)) = older.checked_sub(1).and_then(|i| oldest.get(i)) else {
        return Ok(false);
    };
    let removed = op
        .conn
        .prepare_cached("DELETE FROM events WHERE id <= ?1 AND id < (SELECT MAX(id) FROM events)")
        .and_then(|mut s| s.execute([last]))
        .map_err(db("prune events"))?;
    Ok(removed == max)
}

/// Remove up to `max` records written ended before `before`; true when there may be
/// more.
fn prune_records(op: &Op<'_>, before: Timestamp, max: usize) -> OpResult<(u64, bool)> {
    let keys: Vec<String> = op
        .conn
        .prepare_cached("SELECT key FROM record_ends WHERE ended_at < ?1 LIMIT ?2")
        .and_then(|mut s| {
            s.query_map(params![before.0, max as i64], |r| r.get(0))?
                .collect()
        })
        .map_err(db("find records to prune"))?;
    for key in &keys {
        for sql in [
            "DELETE FROM records WHERE key = ?1",
            "DELETE FROM record_ends WHERE key = ?1",
        ] {
            op.conn
                .prepare_cached(sql)
                .and_then(|mut s| s.execute([key]))
                .map_err(db("prune records"))?;
        }
    }
    Ok((keys.len() as u64, keys.len() == max))
}

/// Drop up to `max` locks that expired before `before`. The locks table is small (one
/// row per key ever claimed, fewer once pruned): scanning it is cheap.
fn prune_locks(op: &Op<'_>, before: Timestamp, max: usize) -> OpResult<bool> {
    let removed = op
        .conn
        .prepare_cached(
            "DELETE FROM locks WHERE key IN (SELECT key FROM locks WHERE expires_at < ?1 LIMIT ?2)",
        )
        .and_then(|mut s| s.execute(params![before.0, max as i64]))
        .map_err(db("prune locks"))?;
    Ok(removed == max)
}
