//! Paused queues (table `paused_queues`, one row per paused queue). The writer is the
//! only writer of the file's rows and runs one transaction at a time, so a reserve's
//! look at this table and the leases it takes are atomic with any pause or resume,
//! whichever process sent it.

use rusqlite::{params, Connection, OptionalExtension};
use tranche_types::check_queue_name;

use super::{db, Op, OpResult};

pub fn pause(op: &mut Op<'_>, queue: &str) -> OpResult<bool> {
    check_queue_name(queue)?;
    let n = op
        .conn
        .prepare_cached("INSERT OR IGNORE INTO paused_queues (queue, since) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![queue, op.now.0]))
        .map_err(db("pause queue"))?;
    Ok(n == 1)
}

pub fn resume(op: &mut Op<'_>, queue: &str) -> OpResult<bool> {
    check_queue_name(queue)?;
    let n = op
        .conn
        .prepare_cached("DELETE FROM paused_queues WHERE queue = ?1")
        .and_then(|mut s| s.execute([queue]))
        .map_err(db("resume queue"))?;
    if n == 1 {
        // Reserves of this process waiting on the queue look again at once; other
        // processes sharing the file see it within their poll interval.
        op.wake(queue);
    }
    Ok(n == 1)
}

/// Whether `queue` is paused, as this transaction sees it.
pub fn is_paused(conn: &Connection, queue: &str) -> OpResult<bool> {
    conn.prepare_cached("SELECT 1 FROM paused_queues WHERE queue = ?1")
        .and_then(|mut s| s.query_row([queue], |_| Ok(())).optional())
        .map(|row| row.is_some())
        .map_err(db("check paused queue"))
}

pub fn read(conn: &Connection) -> OpResult<Vec<String>> {
    conn.prepare_cached("SELECT queue FROM paused_queues ORDER BY queue")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(db("list paused queues"))
}
