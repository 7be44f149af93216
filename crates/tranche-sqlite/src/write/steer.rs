use const_format::formatcp;
use rusqlite::params;
use tranche_types::{CancelTarget, JobState, RunName};

use crate::states::{AVAILABLE, CANCELLED, FAILED, PENDING, RUNNING};

use super::complete::{cancel_successors, chain_step, job_ended, ChainStep};
use super::{db, Op, OpResult};

/// Cancel jobs that have not ended. Cancelling a job also cancels the chain steps
/// after it (they can never run); `Chain` does so even when the named job has ended.
pub fn cancel(op: &mut Op<'_>, target: &CancelTarget, reason: &str) -> OpResult<u64> {
    match target {
        CancelTarget::Job(id) | CancelTarget::Chain(id) => {
            let before = cancelled_so_far(op);
            let Some(ChainStep {
                state,
                run,
                next,
                group,
            }) = chain_step(op, id.0, "find job to cancel")?
            else {
                return Ok(0);
            };
            if !state.is_terminal() {
                op.conn
                    .prepare_cached(formatcp!(
                        "UPDATE jobs SET state = {CANCELLED}, error = ?1, finished_at = ?2, lease_until = NULL WHERE id = ?3"
                    ))
                    .and_then(|mut s| s.execute(params![reason, op.now.0, id.0]))
                    .map_err(db("cancel job"))?;
                op.moved(id.0, run, Some(state), JobState::Cancelled);
                job_ended(op, *id, next, group, false)?;
            } else if matches!(target, CancelTarget::Chain(_)) {
                if let Some(next) = next {
                    cancel_successors(op, next, reason, false)?;
                }
            }
            Ok((cancelled_so_far(op) - before) as u64)
        }
        CancelTarget::Run(name) => cancel_run(op, name, reason),
    }
}

fn cancelled_so_far(op: &Op<'_>) -> i64 {
    op.deltas.values().map(|d| d.of(JobState::Cancelled)).sum()
}

/// The states a job can still leave: those a run's cancel ends.
const NOT_ENDED: &str = formatcp!("{PENDING}, {AVAILABLE}, {RUNNING}");

fn cancel_run(op: &mut Op<'_>, name: &RunName, reason: &str) -> OpResult<u64> {
    let Some(run) = op.run_id(name)? else {
        return Ok(0);
    };
    // Read first, then update: nothing else writes inside this transaction, and the
    // feed needs each job's id.
    let cancelled: Vec<(i64, i64)> = op
        .conn
        .prepare_cached(formatcp!(
            "SELECT id, state FROM jobs WHERE run_id = ?1 AND state IN ({NOT_ENDED})"
        ))
        .and_then(|mut s| {
            s.query_map([run], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(db("find jobs to cancel"))?;
    op.conn
        .execute(
            formatcp!(
                "UPDATE jobs SET state = {CANCELLED}, error = ?1, finished_at = ?2, lease_until = NULL
                 WHERE run_id = ?3 AND state IN ({NOT_ENDED})"
            ),
            params![reason, op.now.0, run],
        )
        .map_err(db("cancel run"))?;
    for &(id, state) in &cancelled {
        let from = JobState::from_code(state).unwrap_or(JobState::Pending);
        op.moved(id, run, Some(from), JobState::Cancelled);
    }
    Ok(cancelled.len() as u64)
}

/// Revive a run's failed jobs with fresh attempts, and the chain steps that were
/// cancelled because of them.
pub fn retry_run(op: &mut Op<'_>, name: &RunName) -> OpResult<u64> {
    let Some(run) = op.run_id(name)? else {
        return Ok(0);
    };
    let failed: Vec<(i64, String, Option<i64>)> = op
        .conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {AVAILABLE}, attempt = 0, available_at = ?1, finished_at = NULL, lease_until = NULL
             WHERE run_id = ?2 AND state = {FAILED} RETURNING id, queue, group_id"
        ))
        .and_then(|mut s| {
            s.query_map(params![op.now.0, run], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .map_err(db("retry failed jobs"))?;
    for (id, queue, group) in &failed {
        op.moved(*id, run, Some(JobState::Failed), JobState::Available);
        op.wake(queue);
        if let Some(group) = group {
            reopen_group(op, *group)?;
        }
    }
    let revived: Vec<i64> = op
        .conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {PENDING}, upstream_failed = 0, error = NULL, finished_at = NULL
             WHERE run_id = ?1 AND state = {CANCELLED} AND upstream_failed = 1 RETURNING id"
        ))
        .and_then(|mut s| s.query_map([run], |r| r.get(0))?.collect())
        .map_err(db("revive chain steps"))?;
    for &id in &revived {
        op.moved(id, run, Some(JobState::Cancelled), JobState::Pending);
    }
    op.touched.insert(run);
    Ok(failed.len() as u64 + revived.len() as u64)
}

/// A revived member: a group whose callback has not been released yet waits for it
/// again; one whose callback already ran keeps its single firing.
pub fn reopen_group(op: &mut Op<'_>, group: i64) -> OpResult<()> {
    op.conn
        .prepare_cached(formatcp!(
            "UPDATE groups SET remaining = remaining + 1
             WHERE id = ?1 AND (SELECT state FROM jobs WHERE id = groups.callback_id) = {PENDING}"
        ))
        .and_then(|mut s| s.execute([group]))
        .map_err(db("reopen group"))?;
    Ok(())
}
