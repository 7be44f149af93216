use std::time::Duration;

use rusqlite::{params, OptionalExtension};
use tranche_types::{JobId, LockClaim, RunName};

use super::{db, Op, OpResult};

/// All keys or none: every key is checked before any is written.
pub fn claim_locks(
    op: &mut Op<'_>,
    owner: &str,
    keys: &[String],
    ttl: Duration,
) -> OpResult<LockClaim> {
    let now = op.now.0;
    for key in keys {
        let holder: Option<(String, i64)> = op
            .conn
            .prepare_cached("SELECT owner, expires_at FROM locks WHERE key = ?1")
            .and_then(|mut s| {
                s.query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
            })
            .map_err(db("check lock"))?;
        if let Some((holder, expires)) = holder {
            if expires > now && holder != owner {
                return Ok(LockClaim::Conflict {
                    key: key.clone(),
                    owner: holder,
                });
            }
        }
    }
    let until = op.now.plus(ttl).0;
    let mut stmt = op
        .conn
        .prepare_cached(
            "INSERT INTO locks (key, owner, expires_at) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at",
        )
        .map_err(db("claim lock"))?;
    for key in keys {
        stmt.execute(params![key, owner, until])
            .map_err(db("claim lock"))?;
    }
    Ok(LockClaim::Claimed)
}

pub fn release_locks(op: &mut Op<'_>, owner: &str, keys: &[String]) -> OpResult<u64> {
    let mut stmt = op
        .conn
        .prepare_cached("DELETE FROM locks WHERE key = ?1 AND owner = ?2")
        .map_err(db("release lock"))?;
    let mut n = 0;
    for key in keys {
        n += stmt
            .execute(params![key, owner])
            .map_err(db("release lock"))? as u64;
    }
    Ok(n)
}

pub fn record_effect(
    op: &mut Op<'_>,
    key: &str,
    job: Option<JobId>,
    value: &str,
) -> OpResult<bool> {
    let n = op
        .conn
        .prepare_cached(
            "INSERT INTO effects (key, job_id, value, at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (key) DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![key, job.map(|j| j.0), value, op.now.0]))
        .map_err(db("record effect"))?;
    Ok(n == 1)
}

pub fn claim_finish_hook(
    op: &mut Op<'_>,
    run: &RunName,
    hook: &str,
    finish: u32,
) -> OpResult<bool> {
    let Some(run) = op.run_id(run)? else {
        return Ok(false);
    };
    let n = op
        .conn
        .prepare_cached(
            "INSERT INTO finish_hooks (run_id, hook, finish) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![run, hook, finish]))
        .map_err(db("claim finish hook"))?;
    Ok(n == 1)
}
