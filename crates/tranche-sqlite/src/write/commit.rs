//! Commits (see `Backend::commit`): a completion with the records, jobs and gate
//! arrivals it brings, in one savepoint of the writer's transaction, so a conflict or
//! an invalid enqueue rolls back the completion too.

use rusqlite::{params, OptionalExtension};
use tranche_types::{BackendError, Commit, CommitAck, RecordWrite};

use super::{complete, db, enqueue, Op, OpResult};

pub fn commit(op: &mut Op<'_>, commit: &Commit) -> OpResult<CommitAck> {
    if let Some(c) = &commit.completion {
        if !complete::apply_resolution(op, c.lease, &c.resolution)? {
            return Ok(CommitAck::Stale);
        }
    }
    for write in &commit.records {
        write_record(op, write)?;
    }
    let enqueued = match &commit.enqueue {
        Some(req) => enqueue::enqueue(op, req)?,
        None => Vec::new(),
    };
    for gate in &commit.arrive {
        arrive(op, gate.0)?;
    }
    Ok(CommitAck::Applied(enqueued))
}

fn write_record(op: &mut Op<'_>, write: &RecordWrite) -> OpResult<()> {
    if write.key.is_empty() || write.key.len() > RecordWrite::MAX_KEY_LEN {
        return Err(BackendError::Invalid {
            field: "record key",
            expected: format!("1 to {} bytes", RecordWrite::MAX_KEY_LEN),
            got: format!("{} bytes", write.key.len()),
        });
    }
    let found: u64 = op
        .conn
        .prepare_cached("SELECT version FROM records WHERE key = ?1")
        .and_then(|mut s| s.query_row([&write.key], |r| r.get(0)).optional())
        .map_err(db("read record version"))?
        .unwrap_or(0);
    if found != write.expect {
        return Err(BackendError::Conflict {
            key: write.key.clone(),
            expected: write.expect,
            found,
        });
    }
    op.conn
        .prepare_cached(
            "INSERT INTO records (key, version, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (key) DO UPDATE SET version = excluded.version, value = excluded.value",
        )
        .and_then(|mut s| s.execute(params![write.key, found + 1, write.value]))
        .map_err(db("write record"))?;
    let end = if write.ended {
        op.conn
            .prepare_cached("INSERT OR REPLACE INTO record_ends (key, ended_at) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![write.key, op.now.0]))
    } else {
        op.conn
            .prepare_cached("DELETE FROM record_ends WHERE key = ?1")
            .and_then(|mut s| s.execute([&write.key]))
    };
    end.map_err(db("mark record ended"))?;
    Ok(())
}

/// A gate's row, for a job just inserted pending; one awaiting nothing opens at once.
pub fn open_gate(op: &mut Op<'_>, job: i64, awaits: u32) -> OpResult<()> {
    if awaits == 0 {
        return complete::release_pending(op, job, "[]");
    }
    op.conn
        .prepare_cached("INSERT INTO gates (job_id, remaining) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![job, awaits]))
        .map_err(db("open gate"))?;
    Ok(())
}

/// One arrival at gate `job`: the last one releases it (and drops its row).
fn arrive(op: &mut Op<'_>, job: i64) -> OpResult<()> {
    let remaining: Option<i64> = op
        .conn
        .prepare_cached(
            "UPDATE gates SET remaining = remaining - 1 WHERE job_id = ?1 RETURNING remaining",
        )
        .and_then(|mut s| s.query_row([job], |r| r.get(0)).optional())
        .map_err(db("arrive at gate"))?;
    if remaining == Some(0) {
        op.conn
            .prepare_cached("DELETE FROM gates WHERE job_id = ?1")
            .and_then(|mut s| s.execute([job]))
            .map_err(db("close gate"))?;
        complete::release_pending(op, job, "[]")?;
    }
    Ok(())
}

/// Forget the gates of jobs being removed (a delete, retention).
pub fn forget_gates(op: &Op<'_>, jobs: &[i64]) -> OpResult<()> {
    let mut stmt = op
        .conn
        .prepare_cached("DELETE FROM gates WHERE job_id = ?1")
        .map_err(db("forget gate"))?;
    for job in jobs {
        stmt.execute([job]).map_err(db("forget gate"))?;
    }
    Ok(())
}
