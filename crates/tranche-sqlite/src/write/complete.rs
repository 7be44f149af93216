use rusqlite::{params, OptionalExtension};
use tranche_types::{
    BackendError, Completion, CompletionAck, JobId, JobState, LeaseRef, MemberOutcome, Resolution,
};

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

/// What an ended attempt's row says: run, next, group, queue, started_at.
type Ended = (i64, Option<i64>, Option<i64>, String, Option<i64>);

fn ended_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Ended> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
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
        Resolution::Succeeded { result } => {
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
                        .prepare_cached(
                            "UPDATE jobs SET state = 3, result = ?1, finished_at = ?2, lease_until = NULL, error = NULL
                             WHERE id = ?3 AND state = 2 AND attempt = ?4",
                        )
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
                        .prepare_cached(
                            "UPDATE jobs SET state = 3, result = ?1, finished_at = ?2, lease_until = NULL, error = NULL
                             WHERE id = ?3 AND state = 2 AND attempt = ?4
                             RETURNING run_id, next_id, group_id, queue, started_at",
                        )
                        .and_then(|mut s| s.query_row(params![result, now, id, attempt], ended_row).optional())
                        .map_err(db("complete job"))?;
                    row.map(|(run, next, group, queue, started_at)| {
                        count(op, cause, &queue, AttemptEnd::Succeeded, started_at);
                        (run, next, group)
                    })
                }
            };
            let Some((run, next, group)) = row else {
                return Ok(false);
            };
            op.moved(id, run, Some(JobState::Running), JobState::Succeeded);
            if let Some(next) = next {
                release_successor(op, run, next, result)?;
            }
            if let Some(group) = group {
                member_ended(op, group)?;
            }
        }
        Resolution::Retry { error, at } => {
            let row: Option<(i64, i64, String, Option<i64>, Option<i64>, Option<i64>)> = op
                .conn
                .prepare_cached(
                    "UPDATE jobs SET
                        state = CASE WHEN attempt >= max_attempts THEN 4 ELSE 1 END,
                        finished_at = CASE WHEN attempt >= max_attempts THEN ?1 ELSE NULL END,
                        available_at = ?2, error = ?3, lease_until = NULL
                     WHERE id = ?4 AND state = 2 AND attempt = ?5
                     RETURNING state, run_id, queue, next_id, group_id, started_at",
                )
                .and_then(|mut s| {
                    s.query_row(params![now, at.0.max(now), error, id, attempt], |r| {
                        Ok((
                            r.get(0)?,
                            r.get(1)?,
                            r.get(2)?,
                            r.get(3)?,
                            r.get(4)?,
                            r.get(5)?,
                        ))
                    })
                    .optional()
                })
                .map_err(db("retry job"))?;
            let Some((state, run, queue, next, group, started_at)) = row else {
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
                .prepare_cached(
                    "UPDATE jobs SET state = 1, attempt = attempt - 1, available_at = ?1, lease_until = NULL
                     WHERE id = ?2 AND state = 2 AND attempt = ?3 RETURNING run_id, queue",
                )
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
            let Some((run, next, group, _, _)) =
                end_running(op, id, attempt, JobState::Cancelled, reason)?
            else {
                return Ok(false);
            };
            op.moved(id, run, Some(JobState::Running), JobState::Cancelled);
            job_ended(op, JobId(id), next, group, false)?;
        }
        Resolution::Failed { error } => {
            let Some((run, next, group, queue, started_at)) =
                end_running(op, id, attempt, JobState::Failed, error)?
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
        .prepare_cached(
            "UPDATE jobs SET state = ?1, error = ?2, finished_at = ?3, lease_until = NULL
             WHERE id = ?4 AND state = 2 AND attempt = ?5
             RETURNING run_id, next_id, group_id, queue, started_at",
        )
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
        let row: Option<(i64, i64, Option<i64>, Option<i64>)> = op
            .conn
            .prepare_cached("SELECT state, run_id, next_id, group_id FROM jobs WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .optional()
            })
            .map_err(db("find chain step"))?;
        let Some((state, run, next, group)) = row else {
            break;
        };
        let state = JobState::from_code(state).unwrap_or(JobState::Failed);
        if !state.is_terminal() {
            op.conn
                .prepare_cached(
                    "UPDATE jobs SET state = 5, error = ?1, upstream_failed = ?2, finished_at = ?3, lease_until = NULL
                     WHERE id = ?4",
                )
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
        .prepare_cached(
            "UPDATE jobs SET state = 1, input = ?1, available_at = MAX(available_at, ?2)
             WHERE id = ?3 AND state = 0",
        )
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
        .prepare_cached(
            "UPDATE jobs SET state = 1, input = ?1, available_at = MAX(available_at, ?2)
             WHERE id = ?3 AND state = 0 RETURNING run_id, queue",
        )
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
