use std::time::Duration;

use const_format::formatcp;
use rusqlite::{params, OptionalExtension};
use tranche_types::{JobId, JobState, LeaseRef, ReservedJob, Resolution, Timestamp};

use crate::error::LeaseMismatch;
use crate::states::{AVAILABLE, RUNNING};

use super::complete::{apply_resolution_of, Cause};
use super::{db, Op, OpResult};

pub struct Reserved {
    pub jobs: Vec<ReservedJob>,
    /// When nothing was ready: the earliest time a job of the queue becomes runnable.
    pub next_at: Option<Timestamp>,
}

/// A runnable job as `reserve` reads it, before leasing it.
pub struct ReadyRow {
    pub id: i64,
    run: i64,
    pub kind: String,
    args: String,
    input: Option<String>,
    /// Attempts made so far.
    attempt: u32,
    max_attempts: u32,
    available_at: i64,
    next: Option<i64>,
    group: Option<i64>,
}

impl ReadyRow {
    /// From a row of `SELECT id, run_id, kind, args, input, attempt, max_attempts,
    /// available_at, next_id, group_id`.
    pub fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(ReadyRow {
            id: r.get(0)?,
            run: r.get(1)?,
            kind: r.get(2)?,
            args: r.get(3)?,
            input: r.get(4)?,
            attempt: r.get(5)?,
            max_attempts: r.get(6)?,
            available_at: r.get(7)?,
            next: r.get(8)?,
            group: r.get(9)?,
        })
    }
}

pub fn reserve(op: &mut Op<'_>, queue: &str, max: usize, lease: Duration) -> OpResult<Reserved> {
    if super::pause::is_paused(op.conn, queue)? {
        // No due time: a waiting reserve sleeps until the resume wakes it (or its
        // poll interval passes), not until the queue's next scheduled job.
        return Ok(Reserved {
            jobs: Vec::new(),
            next_at: None,
        });
    }
    // Cached: no read unless a limit applies (see limits.rs).
    if let Some(limits) = super::limits::for_queue(op, queue)? {
        return super::limits::reserve(op, &limits, queue, max, lease);
    }
    let lease_until = op.now.plus(lease);
    let rows: Vec<ReadyRow> = op
        .conn
        .prepare_cached(formatcp!(
            "SELECT id, run_id, kind, args, input, attempt, max_attempts, available_at, next_id, group_id
             FROM jobs WHERE state = {AVAILABLE} AND queue = ?1 AND available_at <= ?2
             ORDER BY priority, available_at, id LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(params![queue, op.now.0, max as i64], ReadyRow::from_row)?
                .collect()
        })
        .map_err(db("find ready jobs"))?;
    if !rows.is_empty() {
        // The same rows again: nothing else writes inside this transaction. One
        // statement for the batch costs far less than one per job.
        let n = op
            .conn
            .prepare_cached(formatcp!(
                "UPDATE jobs SET state = {RUNNING}, attempt = attempt + 1, lease_until = ?1, started_at = ?2
                 WHERE id IN (SELECT id FROM jobs WHERE state = {AVAILABLE} AND queue = ?3 AND available_at <= ?2
                              ORDER BY priority, available_at, id LIMIT ?4)"
            ))
            .and_then(|mut s| s.execute(params![lease_until.0, op.now.0, queue, max as i64]))
            .map_err(db("lease jobs"))?;
        if n != rows.len() {
            return Err(tranche_types::BackendError::store(
                "lease jobs",
                LeaseMismatch {
                    expected: rows.len(),
                    leased: n,
                },
            ));
        }
    }
    let jobs = lease_rows(op, queue, rows, lease_until)?;
    let next_at = if jobs.is_empty() {
        op.conn
            .prepare_cached(formatcp!(
                "SELECT MIN(available_at) FROM jobs WHERE state = {AVAILABLE} AND queue = ?1"
            ))
            .and_then(|mut s| s.query_row([queue], |r| r.get::<_, Option<i64>>(0)))
            .map_err(db("find next scheduled job"))?
            .map(Timestamp)
    } else {
        None
    };
    Ok(Reserved { jobs, next_at })
}

/// When the queue's next job scheduled for later becomes runnable. Ready jobs left
/// where they are (a kind at its limit) are not that: waiting for them would spin.
pub fn next_scheduled(op: &Op<'_>, queue: &str) -> OpResult<Option<Timestamp>> {
    op.conn
        .prepare_cached(formatcp!(
            "SELECT MIN(available_at) FROM jobs WHERE state = {AVAILABLE} AND queue = ?1 AND available_at > ?2"
        ))
        .and_then(|mut s| s.query_row(params![queue, op.now.0], |r| r.get::<_, Option<i64>>(0)))
        .map_err(db("find next scheduled job"))
        .map(|at| at.map(Timestamp))
}

/// The reserve's answer for rows just leased (state, attempt, lease and start already
/// written): routes, counters, feed events and statistics follow.
pub fn lease_rows(
    op: &mut Op<'_>,
    queue: &str,
    rows: Vec<ReadyRow>,
    lease_until: Timestamp,
) -> OpResult<Vec<ReservedJob>> {
    let mut jobs = Vec::with_capacity(rows.len());
    let shared = op.cache().queue(queue);
    if !rows.is_empty() {
        // How long each job had been runnable.
        op.stats
            .started(queue, rows.iter().map(|r| op.now.0 - r.available_at));
    }
    for ReadyRow {
        id,
        run,
        kind,
        args,
        input,
        attempt,
        max_attempts,
        available_at,
        next,
        group,
    } in rows
    {
        let attempt = attempt + 1;
        op.cache().remember_route(
            id,
            super::Route {
                run,
                next,
                group,
                queue: shared.clone(),
                attempt,
                started_at: op.now.0,
            },
        );
        op.moved(id, run, Some(JobState::Available), JobState::Running);
        jobs.push(ReservedJob {
            id: JobId(id),
            run: op.run_name(run)?,
            kind,
            queue: queue.to_string(),
            args,
            input,
            attempt,
            max_attempts,
            lease_until,
            available_at: Timestamp(available_at),
            trace: None,
        });
    }
    super::trace::fill(op, &mut jobs)?;
    Ok(jobs)
}

/// Make jobs whose lease expired runnable again (or failed, when that was their last
/// attempt). Returns how many were recovered.
pub fn reap_expired(op: &mut Op<'_>) -> OpResult<u64> {
    let expired: Vec<(i64, u32)> = op
        .conn
        .prepare_cached(formatcp!(
            "SELECT id, attempt FROM jobs WHERE state = {RUNNING} AND lease_until < ?1"
        ))
        .and_then(|mut s| {
            s.query_map([op.now.0], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(db("find expired leases"))?;
    let mut n = 0;
    for (id, attempt) in expired {
        let lease = LeaseRef {
            job: JobId(id),
            attempt,
        };
        let resolution = Resolution::Retry {
            error: format!(
                "lease expired: the worker running attempt {attempt} stopped heartbeating"
            ),
            at: op.now,
        };
        if apply_resolution_of(op, lease, &resolution, Cause::LeaseExpired)? {
            n += 1;
        }
    }
    Ok(n)
}

/// Push every lease's end `by` later: while the disk was full no worker could extend
/// its leases, and without this their jobs would be taken from them (an attempt used,
/// the last one failed) the moment the database could be written again.
pub fn extend_all_leases(op: &mut Op<'_>, by: Duration) -> OpResult<()> {
    let by = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
    op.conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET lease_until = lease_until + ?1 WHERE state = {RUNNING} AND lease_until IS NOT NULL"
        ))
        .and_then(|mut s| s.execute([by]))
        .map_err(db("extend leases after the disk was full"))?;
    Ok(())
}

/// Extend leases; returns those no longer held.
pub fn heartbeat(op: &mut Op<'_>, leases: &[LeaseRef], lease: Duration) -> OpResult<Vec<LeaseRef>> {
    let until = op.now.plus(lease);
    let mut stmt = op
        .conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET lease_until = ?1 WHERE id = ?2 AND state = {RUNNING} AND attempt = ?3"
        ))
        .map_err(db("extend leases"))?;
    let mut lost = Vec::new();
    for l in leases {
        let n = stmt
            .execute(params![until.0, l.job.0, l.attempt])
            .map_err(db("extend lease"))?;
        if n == 0 {
            lost.push(*l);
        }
    }
    Ok(lost)
}

/// Hand running jobs back without counting the attempt.
pub fn release(op: &mut Op<'_>, leases: &[LeaseRef]) -> OpResult<u64> {
    let mut n = 0;
    for l in leases {
        // The attempt's number is reused by the next reserve, maybe by another
        // process: its route (start time) must not outlive it here.
        op.cache().take_route(l.job.0);
        let row: Option<(i64, String)> = op
            .conn
            .prepare_cached(formatcp!(
                "UPDATE jobs SET state = {AVAILABLE}, attempt = attempt - 1, lease_until = NULL, available_at = ?1
                 WHERE id = ?2 AND state = {RUNNING} AND attempt = ?3 RETURNING run_id, queue"
            ))
            .and_then(|mut s| {
                s.query_row(params![op.now.0, l.job.0, l.attempt], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(db("release job"))?;
        if let Some((run, queue)) = row {
            op.moved(l.job.0, run, Some(JobState::Running), JobState::Available);
            op.wake(&queue);
            n += 1;
        }
    }
    Ok(n)
}
