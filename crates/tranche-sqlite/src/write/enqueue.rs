use const_format::formatcp;
use rusqlite::{params, OptionalExtension};
use tranche_types::{
    BackendError, EnqueueItem, EnqueueRequest, Enqueued, JobId, JobSpec, JobState,
};

use super::{db, unique, Op, OpResult};

fn check(spec: &JobSpec) -> OpResult<()> {
    let invalid = |field, expected: &str, got: String| {
        Err(BackendError::Invalid {
            field,
            expected: expected.to_string(),
            got,
        })
    };
    if spec.kind.is_empty() {
        return invalid("job kind", "a non-empty task kind", "\"\"".into());
    }
    if spec.queue.is_empty() {
        return invalid("queue", "a non-empty queue name", "\"\"".into());
    }
    if spec.max_attempts == 0 {
        return invalid("max_attempts", "at least 1", "0".into());
    }
    spec.check_lengths()?;
    spec.check_trace()?;
    Ok(())
}

pub fn enqueue(op: &mut Op<'_>, req: &EnqueueRequest) -> OpResult<Vec<Enqueued>> {
    req.check_unique_windows()?;
    let run = op.ensure_run(&req.run, req.on_done.as_ref())?;
    let mut out = Vec::with_capacity(req.items.len());
    let mut bulk = Bulk::default();
    for item in &req.items {
        let steps: &[JobSpec] = match item {
            EnqueueItem::Job(spec) if spec.unique_key.is_none() => std::slice::from_ref(spec),
            EnqueueItem::Chain(steps) if !steps.is_empty() && steps[0].unique_key.is_none() => {
                steps
            }
            _ => {
                bulk.flush(op, run)?;
                bulk.next_id = None;
                out.push(enqueue_item(op, run, item)?);
                continue;
            }
        };
        out.push(bulk.add(op, steps)?);
        if bulk.rows.len() >= Bulk::ROWS {
            bulk.flush(op, run)?;
        }
    }
    bulk.flush(op, run)?;
    Ok(out)
}

/// Single jobs and chains without unique keys (the bulk of a night), inserted many
/// rows per statement with ids assigned here, so a chain's steps know their
/// successors before they are written: statement overhead was half an insert's cost.
#[derive(Default)]
struct Bulk<'s> {
    rows: Vec<BulkRow<'s>>,
    next_id: Option<i64>,
}

struct BulkRow<'s> {
    id: i64,
    spec: &'s JobSpec,
    state: JobState,
    next: Option<i64>,
}

impl<'s> Bulk<'s> {
    const ROWS: usize = 64;

    fn add(&mut self, op: &mut Op<'_>, steps: &'s [JobSpec]) -> OpResult<Enqueued> {
        let mut id = match self.next_id {
            Some(id) => id,
            // This thread is the only writer inside the transaction, so ids past the
            // largest one are free.
            None => op
                .conn
                .prepare_cached(NEXT_JOB_ID)
                .and_then(|mut s| s.query_row([], |r| r.get(0)))
                .map_err(db("allocate job ids"))?,
        };
        let mut ids = Vec::with_capacity(steps.len());
        for (i, spec) in steps.iter().enumerate() {
            check(spec)?;
            let last = i + 1 == steps.len();
            self.rows.push(BulkRow {
                id,
                spec,
                state: if i == 0 {
                    JobState::Available
                } else {
                    JobState::Pending
                },
                next: (!last).then_some(id + 1),
            });
            ids.push(JobId(id));
            id += 1;
        }
        self.next_id = Some(id);
        super::trace::store_chain(op, &ids, steps)?;
        Ok(Enqueued {
            ids,
            existed: false,
        })
    }

    fn flush(&mut self, op: &mut Op<'_>, run: i64) -> OpResult<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        const PER_ROW: usize = 9;
        let sql = bulk_insert_sql(self.rows.len(), PER_ROW);
        let mut stmt = op.conn.prepare_cached(&sql).map_err(db("insert jobs"))?;
        let bind = |stmt: &mut rusqlite::CachedStatement<'_>, i: usize, v: &dyn rusqlite::ToSql| {
            stmt.raw_bind_parameter(i, v).map_err(db("insert jobs"))
        };
        for (r, row) in self.rows.iter().enumerate() {
            let i = 1 + r * PER_ROW;
            let spec = row.spec;
            let available_at = spec.not_before.unwrap_or(op.now).max(op.now);
            bind(&mut stmt, i, &row.id)?;
            bind(&mut stmt, i + 1, &spec.kind)?;
            bind(&mut stmt, i + 2, &spec.queue)?;
            bind(&mut stmt, i + 3, &row.state.code())?;
            bind(&mut stmt, i + 4, &spec.priority)?;
            bind(&mut stmt, i + 5, &spec.max_attempts)?;
            bind(&mut stmt, i + 6, &available_at.0)?;
            bind(&mut stmt, i + 7, &spec.args)?;
            bind(&mut stmt, i + 8, &row.next)?;
        }
        let p = self.rows.len() * PER_ROW;
        bind(&mut stmt, p + 1, &run)?;
        bind(&mut stmt, p + 2, &op.now.0)?;
        stmt.raw_execute().map_err(db("insert jobs"))?;
        for row in &self.rows {
            op.moved(row.id, run, None, row.state);
        }
        for row in self.rows.drain(..) {
            if row.state == JobState::Available {
                op.wake(&row.spec.queue);
            }
        }
        Ok(())
    }
}

/// The first free job id: past every job, and past every deleted one (see
/// `job_id_floor` in migrations.rs), so an id never names two jobs.
const NEXT_JOB_ID: &str = "SELECT MAX(COALESCE((SELECT MAX(id) FROM jobs), 0),
                COALESCE((SELECT id FROM job_id_floor), 0)) + 1";

fn bulk_insert_sql(rows: usize, per_row: usize) -> String {
    let p = rows * per_row;
    let mut sql = String::from(
        "INSERT INTO jobs (id, kind, queue, state, priority, max_attempts, available_at, args, next_id, run_id, created_at) VALUES ",
    );
    for r in 0..rows {
        if r > 0 {
            sql.push(',');
        }
        sql.push('(');
        for c in 0..per_row {
            sql.push_str(&format!("?{},", r * per_row + c + 1));
        }
        sql.push_str(&format!("?{},?{})", p + 1, p + 2));
    }
    sql
}

pub fn enqueue_item(op: &mut Op<'_>, run: i64, item: &EnqueueItem) -> OpResult<Enqueued> {
    let window = item.unique_window();
    if let Some((key, _)) = window {
        if let Some(id) = unique::holder(op, key)? {
            return Ok(Enqueued {
                ids: vec![id],
                existed: true,
            });
        }
    } else if let Some(key) = item.identity().and_then(|s| s.unique_key.as_deref()) {
        let existing: Option<i64> = op
            .conn
            .prepare_cached("SELECT id FROM jobs WHERE run_id = ?1 AND unique_key = ?2")
            .and_then(|mut s| s.query_row(params![run, key], |r| r.get(0)).optional())
            .map_err(db("check unique key"))?;
        if let Some(id) = existing {
            return Ok(Enqueued {
                ids: vec![JobId(id)],
                existed: true,
            });
        }
    }
    let ids = match item {
        EnqueueItem::Job(spec) => {
            let id = insert(op, run, spec, JobState::Available, None, None)?;
            super::trace::store_chain(op, &[id], std::slice::from_ref(spec))?;
            vec![id]
        }
        EnqueueItem::Chain(steps) => {
            if steps.is_empty() {
                return Err(BackendError::Invalid {
                    field: "chain",
                    expected: "at least one step".into(),
                    got: "an empty chain".into(),
                });
            }
            // Inserted last step first so each step knows its successor's id.
            let mut ids = Vec::with_capacity(steps.len());
            let mut next = None;
            for (i, spec) in steps.iter().enumerate().rev() {
                let state = if i == 0 {
                    JobState::Available
                } else {
                    JobState::Pending
                };
                let id = insert(op, run, spec, state, next, None)?;
                ids.push(id);
                next = Some(id);
            }
            ids.reverse();
            super::trace::store_chain(op, &ids, steps)?;
            ids
        }
        EnqueueItem::Group { members, callback } => {
            let cb = insert(op, run, callback, JobState::Pending, None, None)?;
            op.conn
                .prepare_cached("INSERT INTO groups (remaining, callback_id) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![members.len() as i64, cb.0]))
                .map_err(db("create group"))?;
            let group = op.conn.last_insert_rowid();
            let mut ids = Vec::with_capacity(members.len() + 1);
            for spec in members {
                ids.push(insert(
                    op,
                    run,
                    spec,
                    JobState::Available,
                    None,
                    Some(group),
                )?);
            }
            if members.is_empty() {
                super::complete::release_callback(op, group, cb.0)?;
            }
            ids.push(cb);
            // Members and callback each continue their own (no order among them).
            for (id, spec) in ids.iter().zip(members.iter().chain([callback])) {
                super::trace::store_chain(op, &[*id], std::slice::from_ref(spec))?;
            }
            ids
        }
        EnqueueItem::Gate { awaits, job } => {
            let id = insert(op, run, job, JobState::Pending, None, None)?;
            super::trace::store_chain(op, &[id], std::slice::from_ref(job))?;
            super::commit::open_gate(op, id.0, *awaits)?;
            vec![id]
        }
    };
    if let Some((key, window)) = window {
        let identity = match item {
            EnqueueItem::Group { .. } => ids.last(),
            _ => ids.first(),
        };
        if let Some(&id) = identity {
            unique::open(op, id, key, window)?;
        }
    }
    Ok(Enqueued {
        ids,
        existed: false,
    })
}

fn insert(
    op: &mut Op<'_>,
    run: i64,
    spec: &JobSpec,
    state: JobState,
    next: Option<JobId>,
    group: Option<i64>,
) -> OpResult<JobId> {
    check(spec)?;
    let available_at = spec.not_before.unwrap_or(op.now).max(op.now);
    op.conn
        .prepare_cached(
            formatcp!(
                "INSERT INTO jobs (id, run_id, kind, queue, state, priority, max_attempts, available_at,
                                   created_at, next_id, group_id, unique_key, args)
                 VALUES (({NEXT_JOB_ID}), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
            ),
        )
        .and_then(|mut s| {
            s.execute(params![
                run,
                spec.kind,
                spec.queue,
                state.code(),
                spec.priority,
                spec.max_attempts,
                available_at.0,
                op.now.0,
                next.map(|n| n.0),
                group,
                // A windowed key lives in unique_windows: the run-scoped index on
                // jobs.unique_key would refuse its next window's job in the same run.
                spec.unique_key
                    .as_ref()
                    .filter(|_| spec.unique_for.is_none()),
                spec.args,
            ])
        })
        .map_err(db("insert job"))?;
    let id = op.conn.last_insert_rowid();
    op.moved(id, run, None, state);
    if state == JobState::Available {
        op.wake(&spec.queue);
    }
    Ok(JobId(id))
}
