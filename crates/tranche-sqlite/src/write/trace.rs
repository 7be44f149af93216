//! Trace contexts of jobs (`job_traces`, see docs/traces.md): written at enqueue for a
//! job that has one, and for a chain's next step when a traced attempt hands its own
//! on; read at reserve. Untraced work never touches the table: the writer asks once
//! whether it has rows (again after another process commits) and reserve looks up
//! nothing while it has none.

use rusqlite::{params, OptionalExtension};
use tranche_types::{JobId, JobSpec, ReservedJob};

use super::{db, Op, OpResult};

/// Keep `trace` as job `id`'s trace context, replacing any it had.
pub fn store(op: &Op<'_>, id: i64, trace: &str) -> OpResult<()> {
    op.conn
        .prepare_cached("INSERT OR REPLACE INTO job_traces (job_id, trace) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![id, trace]))
        .map_err(db("store trace context"))?;
    op.cache().traces.set(Some(true));
    Ok(())
}

/// Store the trace contexts of a chain's steps (`ids` in step order): each step's own,
/// or else the nearest earlier step's. Nothing for a chain without any.
pub fn store_chain(op: &Op<'_>, ids: &[JobId], steps: &[JobSpec]) -> OpResult<()> {
    if let Some(traces) = JobSpec::chain_traces(steps) {
        for (id, trace) in ids.iter().zip(traces) {
            if let Some(trace) = trace {
                store(op, id.0, trace)?;
            }
        }
    }
    Ok(())
}

/// Fill in the trace contexts of reserved jobs, if any job has one.
pub fn fill(op: &Op<'_>, jobs: &mut [ReservedJob]) -> OpResult<()> {
    if jobs.is_empty() || !any(op)? {
        return Ok(());
    }
    let mut stmt = op
        .conn
        .prepare_cached("SELECT trace FROM job_traces WHERE job_id = ?1")
        .map_err(db("read trace context"))?;
    for job in jobs {
        job.trace = stmt
            .query_row([job.id.0], |r| r.get(0))
            .optional()
            .map_err(db("read trace context"))?;
    }
    Ok(())
}

/// Forget a removed job's trace context.
pub fn forget(op: &Op<'_>, id: i64) -> OpResult<()> {
    op.conn
        .prepare_cached("DELETE FROM job_traces WHERE job_id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(db("delete trace context"))?;
    Ok(())
}

/// Forget removed jobs' trace contexts; nothing to do while the table has no rows.
pub fn forget_all(op: &Op<'_>, ids: impl Iterator<Item = i64>) -> OpResult<()> {
    if !any(op)? {
        return Ok(());
    }
    for id in ids {
        forget(op, id)?;
    }
    Ok(())
}

fn any(op: &Op<'_>) -> OpResult<bool> {
    if let Some(known) = op.cache().traces.get() {
        return Ok(known);
    }
    let any: bool = op
        .conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM job_traces)")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db("look for trace contexts"))?;
    op.cache().traces.set(Some(any));
    Ok(any)
}
