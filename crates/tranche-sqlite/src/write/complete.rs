use const_format::formatcp;
use rusqlite::{params, OptionalExtension};
use tranche_types::{
    BackendError, Completion, CompletionAck, JobId, JobState, LeaseRef, MemberOutcome, Resolution,
};

use crate::states::{AVAILABLE, CANCELLED, FAILED, PENDING, RUNNING, SUCCEEDED};

use super::stats::AttemptEnd;
use super::{db, Op, OpResult};

pub fn complete(op: &mut Op<'_>, batch: &[Completion]) -> OpResult<Vec<CompletionAck>> {
    batch
        .iter()
        .map(|c| {
            apply_resolution(op, c.lease, &c.resolution).map(|applied| {
                if applied {
                    CompletionAck::Applied
                } else {
                    CompletionAck::Stale
                }
            })
        })
        .collect()
}

/// What an ended attempt's row says (`RETURNING run_id, next_id, group_id, queue,
/// started_at`).
struct Ended {
    run: i64,
    next: Option<i64>,
    group: Option<i64>,
    queue: String,
    started_at: Option<i64>,
}

fn ended_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Ended> {
    Ok(Ended {
        run: r.get(0)?,
        next: r.get(1)?,
        group: r.get(2)?,
        queue: r.get(3)?,
        started_at: r.get(4)?,
    })
}

/// A retried attempt's row, now available again or failed for good.
struct Retried {
    state: i64,
    run: i64,
    queue: String,
    next: Option<i64>,
    group: Option<i64>,
    started_at: Option<i64>,
}

/// Where a job stands in its chain: what cancelling it must move.
pub struct ChainStep {
    pub state: JobState,
    pub run: i64,
    pub next: Option<i64>,
    pub group: Option<i64>,
}

/// Job `id` as a chain step, if it exists; `what` names the read in an error.
pub fn chain_step(op: &Op<'_>, id: i64, what: &'static str) -> OpResult<Option<ChainStep>> {
    op.conn
        .prepare_cached("SELECT state, run_id, next_id, group_id FROM jobs WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([id], |r| {
                let state: i64 = r.get(0)?;
                Ok(ChainStep {
                    state: JobState::from_code(state).unwrap_or(JobState::Failed),
                    run: r.get(1)?,
                    next: r.get(2)?,
                    group: r.get(3)?,
                })
            })
            .optional()
        })
        .map_err(db(what))
}

/// Who ends an attempt: its worker reporting, or the backend recovering its expired
/// lease. They count differently in the queue statistics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Reported,
    LeaseExpired,
}

/// Apply one attempt's result, as reported by its worker, if the attempt still holds
/// the job; false if stale.
pub fn apply_resolution(op: &mut Op<'_>, lease: LeaseRef, res: &Resolution) -> OpResult<bool> {
    apply_resolution_of(op, lease, res, Cause::Reported)
}

/// Count an ended attempt in its queue's statistics.
fn count(op: &mut Op<'_>, cause: Cause, queue: &str, how: AttemptEnd, started_at: Option<i64>) {
    let now = op.now.0;
    match cause {
        Cause::LeaseExpired => op.stats.expired(queue, matches!(how, AttemptEnd::Failed)),
        Cause::Reported => op.stats.ended(queue, how, now - started_at.unwrap_or(now)),
    }
}

pub fn apply_resolution_of(
    op: &mut Op<'_>,
    lease: LeaseRef,
    res: &Resolution,
    cause: Cause,
) -> OpResult<bool> {
    let (id, attempt) = (lease.job.0, lease.attempt);
    let now = op.now.0;
    match res {
        Resolution::Succeeded { result } | Resolution::SucceededTraced { result, .. } => {
            // A route of another attempt (the job was reserved again elsewhere since)
            // has the wrong start time: read the row back instead.
            let known = op
                .cache()
                .take_route(id)
                .filter(|route| route.attempt == attempt);
            let row = match known {
                Some(route) => {
                    let n = op
                        .conn
                        .prepare_cached(formatcp!(
                            "UPDATE jobs SET state = {SUCCEEDED}, result = ?1, finished_at = ?2, lease_until = NULL, error = NULL
                             WHERE id = ?3 AND state = {RUNNING} AND attempt = ?4"
                        ))
                        .and_then(|mut s| s.execute(params![result, now, id, attempt]))
                        .map_err(db("complete job"))?;
                    if n == 1 {
                        count(
                            op,
                            cause,
                            &route.queue,
                            AttemptEnd::Succeeded,
                            Some(route.started_at),
                        );
                    }
                    (n == 1).then_some((route.run, route.next, route.group))
                }
                None => {
                    let row = op
                        .conn
                        .prepare_cached(formatcp!(
                            "UPDATE jobs SET state = {SUCCEEDED}, result = ?1, finished_at = ?2, lease_until = NULL, error = NULL
                             WHERE id = ?3 AND state = {RUNNING} AND attempt = ?4
                             RETURNING run_id, next_id, group_id, queue, started_at"
                        ))
                        .and_then(|mut s| s.query_row(params![result, now, id, attempt], ended_row).optional())
                        .map_err(db("complete job"))?;
                    row.map(|ended| {
                        count(
                            op,
                            cause,
                            &ended.queue,
                            AttemptEnd::Succeeded,
                            ended.started_at,
                        );
                        (ended.run, ended.next, ended.group)
                    })
                }
            };
            let Some((run, next, group)) = row else {
                return Ok(false);
            };
            op.moved(id, run, Some(JobState::Running), JobState::Succeeded);
            if let Some(next) = next {
                if let Resolution::SucceededTraced { trace, .. } = res {
                    super::trace::store(op, next, trace)?;
                }
                release_successor(op, run, next, result)?;
            }
            if let Some(group) = group {
                member_ended(op, group)?;
            }
        }
        Resolution::Retry { error, at } => {
            let row = op
                .conn
                .prepare_cached(formatcp!(
                    "UPDATE jobs SET
                        state = CASE WHEN attempt >= max_attempts THEN {FAILED} ELSE {AVAILABLE} END,
                        finished_at = CASE WHEN attempt >= max_attempts THEN ?1 ELSE NULL END,
                        available_at = ?2, error = ?3, lease_until = NULL
                     WHERE id = ?4 AND state = {RUNNING} AND attempt = ?5
                     RETURNING state, run_id, queue, next_id, group_id, started_at"
                ))
                .and_then(|mut s| {
                    s.query_row(params![now, at.0.max(now), error, id, attempt], |r| {
                        Ok(Retried {
                            state: r.get(0)?,
                            run: r.get(1)?,
                            queue: r.get(2)?,
                            next: r.get(3)?,
                            group: r.get(4)?,
                            started_at: r.get(5)?,
                        })
                    })
                    .optional()
                })
                .map_err(db("retry job"))?;
            let Some(Retried {
                state,
                run,
                queue,
                next,
                group,
                started_at,
            }) = row
            else {
                return Ok(false);
            };
            record_error(op, id, attempt, error)?;
            if state == JobState::Available.code() {
                count(op, cause, &queue, AttemptEnd::Retried, started_at);
                op.moved(id, run, Some(JobState::Running), JobState::Available);
                op.wake(&queue);
            } else {
                count(op, cause, &queue, AttemptEnd::Failed, started_at);
                op.moved(id, run, Some(JobState::Running), JobState::Failed);
                job_ended(op, JobId(id), next, group, true)?;
            }
        }
        Resolution::Snooze { at } => {
            // The attempt is given back (its number reused): so is its route.
            op.cache().take_route(id);
            let row: Option<(i64, String)> = op
                .conn
                .prepare_cached(formatcp!(
                    "UPDATE jobs SET state = {AVAILABLE}, attempt = attempt - 1, available_at = ?1, lease_until = NULL
                     WHERE id = ?2 AND state = {RUNNING} AND attempt = ?3 RETURNING run_id, queue"
                ))
                .and_then(|mut s| {
                    s.query_row(params![at.0.max(now), id, attempt], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(db("snooze job"))?;
            let Some((run, queue)) = row else {
                return Ok(false);
            };
            op.moved(id, run, Some(JobState::Running), JobState::Available);
            op.wake(&queue);
        }
        Resolution::Cancelled { reason } => {
            let Some(Ended {
                run, next, group, ..
            }) = end_running(op, id, attempt, JobState::Cancelled, reason)?
            else {
                return Ok(false);
            };
            op.moved(id, run, Some(JobState::Running), JobState::Cancelled);
            job_ended(op, JobId(id), next, group, false)?;
        }
        Resolution::Failed { error } => {
            let Some(Ended {
                run,
                next,
                group,
                queue,
                started_at,
            }) = end_running(op, id, attempt, JobState::Failed, error)?
            else {
                return Ok(false);
            };
            record_error(op, id, attempt, error)?;
            count(op, cause, &queue, AttemptEnd::Failed, started_at);
            op.moved(id, run, Some(JobState::Running), JobState::Failed);
            job_ended(op, JobId(id), next, group, true)?;
        }
    }
    Ok(true)
}

fn end_running(
    op: &mut Op<'_>,
    id: i64,
    attempt: u32,
    state: JobState,
    why: &str,
) -> OpResult<Option<Ended>> {
    op.conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = ?1, error = ?2, finished_at = ?3, lease_until = NULL
             WHERE id = ?4 AND state = {RUNNING} AND attempt = ?5
             RETURNING run_id, next_id, group_id, queue, started_at"
        ))
        .and_then(|mut s| {
            s.query_row(params![state.code(), why, op.now.0, id, attempt], ended_row)
                .optional()
        })
        .map_err(db("end job"))
}

fn record_error(op: &mut Op<'_>, id: i64, attempt: u32, error: &str) -> OpResult<()> {
    op.conn
        .prepare_cached(
            "INSERT INTO job_errors (job_id, attempt, at, error) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![id, attempt, op.now.0, error]))
        .map_err(db("record job error"))?;
    Ok(())
}

/// A job ended without success: cancel the rest of its chain, and count it for its
/// group. `failed` marks the cancelled successors as revivable by a run retry.
pub fn job_ended(
    op: &mut Op<'_>,
    id: JobId,
    next: Option<i64>,
    group: Option<i64>,
    failed: bool,
) -> OpResult<()> {
    if let Some(next) = next {
        let why = if failed {
            format!("upstream job {id} failed")
        } else {
            format!("upstream job {id} was cancelled")
        };
        cancel_successors(op, next, &why, failed)?;
    }
    if let Some(group) = group {
        member_ended(op, group)?;
    }
    Ok(())
}

/// Cancel the chain steps from `next` on that have not ended.
pub fn cancel_successors(
    op: &mut Op<'_>,
    next: i64,
    why: &str,
    upstream_failed: bool,
) -> OpResult<()> {
    let mut cursor = Some(next);
    while let Some(id) = cursor {
        let Some(ChainStep {
            state,
            run,
            next,
            group,
        }) = chain_step(op, id, "find chain step")?
        else {
            break;
        };
        if !state.is_terminal() {
            op.conn
                .prepare_cached(formatcp!(
                    "UPDATE jobs SET state = {CANCELLED}, error = ?1, upstream_failed = ?2, finished_at = ?3, lease_until = NULL
                     WHERE id = ?4"
                ))
                .and_then(|mut s| s.execute(params![why, upstream_failed, op.now.0, id]))
                .map_err(db("cancel chain step"))?;
            op.moved(id, run, Some(state), JobState::Cancelled);
            if let Some(group) = group {
                member_ended(op, group)?;
            }
        }
        cursor = next;
    }
    Ok(())
}

/// Make the next chain step (same run) runnable with `input`, without reading it back.
fn release_successor(op: &mut Op<'_>, run: i64, id: i64, input: &str) -> OpResult<()> {
    let n = op
        .conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {AVAILABLE}, input = ?1, available_at = MAX(available_at, ?2)
             WHERE id = ?3 AND state = {PENDING}"
        ))
        .and_then(|mut s| s.execute(params![input, op.now.0, id]))
        .map_err(db("release chain step"))?;
    if n == 1 {
        op.moved(id, run, Some(JobState::Pending), JobState::Available);
        op.wake_all();
    }
    Ok(())
}

/// Make a pending job runnable with `input`; a no-op unless it is pending.
pub fn release_pending(op: &mut Op<'_>, id: i64, input: &str) -> OpResult<()> {
    let row: Option<(i64, String)> = op
        .conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {AVAILABLE}, input = ?1, available_at = MAX(available_at, ?2)
             WHERE id = ?3 AND state = {PENDING} RETURNING run_id, queue"
        ))
        .and_then(|mut s| {
            s.query_row(params![input, op.now.0, id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(db("release pending job"))?;
    if let Some((run, queue)) = row {
        op.moved(id, run, Some(JobState::Pending), JobState::Available);
        op.wake(&queue);
    }
    Ok(())
}

fn member_ended(op: &mut Op<'_>, group: i64) -> OpResult<()> {
    let row: Option<(i64, i64)> = op
        .conn
        .prepare_cached(
            "UPDATE groups SET remaining = remaining - 1 WHERE id = ?1 RETURNING remaining, callback_id",
        )
        .and_then(|mut s| s.query_row([group], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db("count group member"))?;
    if let Some((0, callback)) = row {
        release_callback(op, group, callback)?;
    }
    Ok(())
}

/// Hand a group's callback its members' outcomes and make it runnable.
pub fn release_callback(op: &mut Op<'_>, group: i64, callback: i64) -> OpResult<()> {
    let members: Vec<MemberOutcome> = op
        .conn
        .prepare_cached("SELECT id, state, result, error FROM jobs WHERE group_id = ?1 ORDER BY id")
        .and_then(|mut s| {
            s.query_map([group], |r| {
                let state: i64 = r.get(1)?;
                let result: Option<String> = r.get(2)?;
                Ok(MemberOutcome {
                    job: JobId(r.get(0)?),
                    state: JobState::from_code(state).unwrap_or(JobState::Failed),
                    result: result.and_then(|s| serde_json::from_str(&s).ok()),
                    error: r.get(3)?,
                })
            })?
            .collect()
        })
        .map_err(db("collect group outcomes"))?;
    let input = serde_json::to_string(&members)
        .map_err(|e| BackendError::store("encode group outcomes", e))?;
    release_pending(op, callback, &input)
}
