//! Unique keys with a window, across runs (the rules are in `tranche_types::unique`):
//! one `unique_windows` row per windowed job, the key's newest row deciding.

use std::time::Duration;

use rusqlite::{params, OptionalExtension};
use tranche_types::{JobId, JobState};

use super::{db, Op, OpResult};

/// The job that holds `key` now: the key's newest windowed job, if its window has not
/// passed and it has not failed or been cancelled.
pub fn holder(op: &Op<'_>, key: &str) -> OpResult<Option<JobId>> {
    let newest: Option<(i64, i64, Option<i64>)> = op
        .conn
        .prepare_cached(
            "SELECT w.job_id, w.expires_at, j.state
             FROM unique_windows w LEFT JOIN jobs j ON j.id = w.job_id
             WHERE w.key = ?1 ORDER BY w.job_id DESC LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
        })
        .map_err(db("check unique window"))?;
    Ok(newest.and_then(|(id, expires_at, state)| {
        let state = state.and_then(JobState::from_code)?;
        let holds =
            expires_at > op.now.0 && !matches!(state, JobState::Failed | JobState::Cancelled);
        holds.then_some(JobId(id))
    }))
}

/// `job`, just enqueued under `key`, holds it for `window` from now.
pub fn open(op: &Op<'_>, job: JobId, key: &str, window: Duration) -> OpResult<()> {
    let expires_at = op.now.plus(window);
    op.conn
        .prepare_cached("INSERT INTO unique_windows (job_id, key, expires_at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![job.0, key, expires_at.0]))
        .map_err(db("open unique window"))?;
    Ok(())
}
