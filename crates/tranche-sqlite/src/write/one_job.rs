//! Steering one job: retry it, delete it (cancelling one is `steer::cancel`).

use const_format::formatcp;
use rusqlite::{params, OptionalExtension};
use tranche_types::{BackendError, JobId, JobState};

use crate::states::{AVAILABLE, CANCELLED, PENDING};

use super::steer::reopen_group;
use super::{db, Op, OpResult};

/// What retrying or deleting a job reads of it first.
struct Row {
    state: JobState,
    run: i64,
    queue: String,
    next: Option<i64>,
    group: Option<i64>,
    upstream_failed: bool,
}

fn row(op: &Op<'_>, id: JobId) -> OpResult<Row> {
    op.conn
        .prepare_cached(
            "SELECT state, run_id, queue, next_id, group_id, upstream_failed
             FROM jobs WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id.0], |r| {
                let state: i64 = r.get(0)?;
                Ok(Row {
                    state: JobState::from_code(state).unwrap_or(JobState::Failed),
                    run: r.get(1)?,
                    queue: r.get(2)?,
                    next: r.get(3)?,
                    group: r.get(4)?,
                    upstream_failed: r.get::<_, Option<i64>>(5)?.unwrap_or(0) == 1,
                })
            })
            .optional()
        })
        .map_err(db("read job"))?
        .ok_or_else(|| BackendError::NotFound {
            what: format!("job {id}"),
        })
}

/// A job in the wrong state for `what`, as the caller is told.
fn refused(id: JobId, expected: &str, state: JobState) -> BackendError {
    BackendError::Invalid {
        field: "job",
        expected: expected.to_string(),
        got: format!("job {id}, {state}"),
    }
}

/// Revive a failed or cancelled job with fresh attempts, and the cancelled chain
/// steps after it (pending behind it again).
pub fn retry_job(op: &mut Op<'_>, id: JobId) -> OpResult<u64> {
    let job = row(op, id)?;
    if !matches!(job.state, JobState::Failed | JobState::Cancelled) {
        return Err(refused(id, "a failed or cancelled job", job.state));
    }
    if job.upstream_failed {
        return Err(BackendError::Invalid {
            field: "job",
            expected: "a job that failed or was cancelled itself".into(),
            got: format!(
                "job {id}, cancelled because an earlier step of its chain failed: retry that step"
            ),
        });
    }
    op.conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {AVAILABLE}, attempt = 0, available_at = ?1, finished_at = NULL, lease_until = NULL
             WHERE id = ?2"
        ))
        .and_then(|mut s| s.execute(params![op.now.0, id.0]))
        .map_err(db("retry job"))?;
    op.moved(id.0, job.run, Some(job.state), JobState::Available);
    op.wake(&job.queue);
    if let Some(group) = job.group {
        reopen_group(op, group)?;
    }
    let mut revived = 1;
    let mut cursor = job.next;
    while let Some(step) = cursor {
        let next: Option<(i64, Option<i64>)> = op
            .conn
            .prepare_cached(formatcp!(
                "UPDATE jobs SET state = {PENDING}, upstream_failed = 0, error = NULL, finished_at = NULL
                 WHERE id = ?1 AND state = {CANCELLED} RETURNING run_id, next_id"
            ))
            .and_then(|mut s| s.query_row([step], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(db("revive chain step"))?;
        let Some((run, next)) = next else { break };
        op.moved(step, run, Some(JobState::Cancelled), JobState::Pending);
        revived += 1;
        cursor = next;
    }
    Ok(revived)
}

/// Delete an ended job and its attempt errors; false when there is none.
pub fn delete_job(op: &mut Op<'_>, id: JobId) -> OpResult<bool> {
    let job = match row(op, id) {
        Ok(job) => job,
        Err(BackendError::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(e),
    };
    if !job.state.is_terminal() {
        return Err(refused(
            id,
            "an ended job (succeeded, failed or cancelled)",
            job.state,
        ));
    }
    op.conn
        .prepare_cached("DELETE FROM jobs WHERE id = ?1")
        .and_then(|mut s| s.execute([id.0]))
        .map_err(db("delete job"))?;
    op.conn
        .prepare_cached("DELETE FROM job_errors WHERE job_id = ?1")
        .and_then(|mut s| s.execute([id.0]))
        .map_err(db("delete job errors"))?;
    super::trace::forget(op, id.0)?;
    super::commit::forget_gates(op, &[id.0])?;
    op.conn
        .prepare_cached("DELETE FROM unique_windows WHERE job_id = ?1")
        .and_then(|mut s| s.execute([id.0]))
        .map_err(db("delete job unique window"))?;
    keep_deleted_id(op, id.0)?;
    // Nothing can revive these steps any more: a run retry must not leave them pending
    // behind a job that is gone.
    let mut cursor = job.next;
    while let Some(step) = cursor {
        cursor = op
            .conn
            .prepare_cached(formatcp!(
                "UPDATE jobs SET upstream_failed = 0
                 WHERE id = ?1 AND state = {CANCELLED} AND upstream_failed = 1 RETURNING next_id"
            ))
            .and_then(|mut s| s.query_row([step], |r| r.get(0)).optional())
            .map_err(db("unlink chain step"))?
            .flatten();
    }
    op.forgot(job.run, job.state);
    Ok(true)
}

/// Ids are never given again: enqueue allocates past the largest id ever deleted (by
/// a job delete or by retention), so a cursor or a feed event names one job forever.
pub fn keep_deleted_id(op: &Op<'_>, id: i64) -> OpResult<()> {
    op.conn
        .prepare_cached(
            "INSERT INTO job_id_floor (one, id) VALUES (1, ?1)
             ON CONFLICT (one) DO UPDATE SET id = MAX(id, excluded.id)",
        )
        .and_then(|mut s| s.execute([id]))
        .map_err(db("keep deleted job id"))?;
    Ok(())
}
