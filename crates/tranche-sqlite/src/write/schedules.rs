//! Schedules: declared, removed, and their due times fired (the claim and the enqueue
//! in one savepoint, so a due time is enqueued exactly once or not at all).

use rusqlite::{params, OptionalExtension};
use tranche_types::{EnqueueRequest, Enqueued, Timestamp};

use super::{db, enqueue, Op, OpResult};
use crate::schedules::TABLE;

/// Created on first use, not by a migration: only schedule operations touch it, so a
/// file stays at its version and older binaries still open it (see migrations.rs).
fn ensure_table(op: &Op<'_>) -> OpResult<()> {
    op.conn
        .execute_batch(TABLE)
        .map_err(db("create schedules table"))
}

pub fn put(
    op: &mut Op<'_>,
    name: &str,
    timing: &str,
    spec: &str,
    through: Timestamp,
) -> OpResult<bool> {
    ensure_table(op)?;
    let stored: Option<String> = op
        .conn
        .prepare_cached("SELECT timing FROM schedules WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
        .map_err(db("read schedule"))?;
    if stored.as_deref() == Some(timing) {
        op.conn
            .prepare_cached("UPDATE schedules SET spec = ?2 WHERE name = ?1")
            .and_then(|mut s| s.execute(params![name, spec]))
            .map_err(db("update schedule"))?;
        return Ok(false);
    }
    op.conn
        .prepare_cached(
            "INSERT INTO schedules (name, timing, spec, through, last_fired)
             VALUES (?1, ?2, ?3, ?4, NULL)
             ON CONFLICT (name) DO UPDATE SET timing = excluded.timing, spec = excluded.spec,
                 through = excluded.through, last_fired = NULL",
        )
        .and_then(|mut s| s.execute(params![name, timing, spec, through.0]))
        .map_err(db("store schedule"))?;
    Ok(true)
}

pub fn delete(op: &mut Op<'_>, name: &str) -> OpResult<bool> {
    ensure_table(op)?;
    let n = op
        .conn
        .prepare_cached("DELETE FROM schedules WHERE name = ?1")
        .and_then(|mut s| s.execute([name]))
        .map_err(db("delete schedule"))?;
    Ok(n == 1)
}

pub fn fire(
    op: &mut Op<'_>,
    name: &str,
    due: Timestamp,
    req: Option<&EnqueueRequest>,
) -> OpResult<Option<Vec<Enqueued>>> {
    ensure_table(op)?;
    let claimed = op
        .conn
        .prepare_cached(
            "UPDATE schedules SET through = ?2,
                 last_fired = CASE WHEN ?3 THEN ?2 ELSE last_fired END
             WHERE name = ?1 AND through < ?2",
        )
        .and_then(|mut s| s.execute(params![name, due.0, req.is_some()]))
        .map_err(db("claim schedule due time"))?;
    if claimed == 0 {
        return Ok(None);
    }
    match req {
        // An enqueue that fails rolls the claim back with it (one savepoint).
        Some(req) => enqueue::enqueue(op, req).map(Some),
        None => Ok(Some(Vec::new())),
    }
}
