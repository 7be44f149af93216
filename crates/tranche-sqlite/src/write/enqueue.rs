use rusqlite::{params, OptionalExtension};
use tranche_types::{
    BackendError, EnqueueItem, EnqueueRequest, Enqueued, JobId, JobSpec, JobState,
};

use super::{db, Op, OpResult};

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
    Ok(())
}

pub fn enqueue(op: &mut Op<'_>, req: &EnqueueRequest) -> OpResult<Vec<Enqueued>> {
    let run = op.ensure_run(&req.run, req.on_done.as_ref())?;
    let mut out = Vec::with_capacity(req.items.len());
    let mut plain: Vec<&JobSpec> = Vec::new();
    for item in &req.items {
        match item {
            EnqueueItem::Job(spec) if spec.unique_key.is_none() => plain.push(spec),
            _ => {
                insert_plain(op, run, &plain, &mut out)?;
                plain.clear();
                out.push(enqueue_item(op, run, item)?);
            }
        }
    }
    insert_plain(op, run, &plain, &mut out)?;
    Ok(out)
}

/// Insert single jobs without unique keys (the bulk of a night) many rows per
/// statement: statement overhead was half the cost of an insert.
fn insert_plain(
    op: &mut Op<'_>,
    run: i64,
    specs: &[&JobSpec],
    out: &mut Vec<Enqueued>,
) -> OpResult<()> {
    const ROWS: usize = 64;
    for chunk in specs.chunks(ROWS) {
        let sql = plain_insert_sql(chunk.len());
        let mut stmt = op.conn.prepare_cached(&sql).map_err(db("insert jobs"))?;
        let mut i = 1;
        for spec in chunk {
            check(spec)?;
            let available_at = spec.not_before.unwrap_or(op.now).max(op.now);
            let bind =
                |stmt: &mut rusqlite::CachedStatement<'_>, i: usize, v: &dyn rusqlite::ToSql| {
                    stmt.raw_bind_parameter(i, v).map_err(db("insert jobs"))
                };
            bind(&mut stmt, i, &spec.kind)?;
            bind(&mut stmt, i + 1, &spec.queue)?;
            bind(&mut stmt, i + 2, &spec.priority)?;
            bind(&mut stmt, i + 3, &spec.max_attempts)?;
            bind(&mut stmt, i + 4, &available_at.0)?;
            bind(&mut stmt, i + 5, &spec.args)?;
            i += 6;
            op.wake(&spec.queue);
        }
        stmt.raw_bind_parameter(i, run).map_err(db("insert jobs"))?;
        stmt.raw_bind_parameter(i + 1, op.now.0)
            .map_err(db("insert jobs"))?;
        let n = stmt.raw_execute().map_err(db("insert jobs"))?;
        if n != chunk.len() {
            return Err(BackendError::store(
                "insert jobs",
                format!("expected {} rows inserted, got {n}", chunk.len()),
            ));
        }
        // Rowids of one statement's rows are consecutive: each is the table's largest
        // plus one, and this thread is the only writer inside the transaction.
        let last = op.conn.last_insert_rowid();
        for id in (last - n as i64 + 1)..=last {
            out.push(Enqueued {
                ids: vec![JobId(id)],
                existed: false,
            });
        }
        let d = op.deltas.entry(run).or_default();
        d.total += n as i64;
        d.states[JobState::Available.code() as usize] += n as i64;
        op.touched.insert(run);
    }
    Ok(())
}

fn plain_insert_sql(rows: usize) -> String {
    let p = rows * 6;
    let mut sql = String::from(
        "INSERT INTO jobs (kind, queue, priority, max_attempts, available_at, args, run_id, created_at, state) VALUES ",
    );
    for r in 0..rows {
        let b = r * 6;
        if r > 0 {
            sql.push(',');
        }
        sql.push_str(&format!(
            "(?{},?{},?{},?{},?{},?{},?{},?{},1)",
            b + 1,
            b + 2,
            b + 3,
            b + 4,
            b + 5,
            b + 6,
            p + 1,
            p + 2
        ));
    }
    sql
}

pub fn enqueue_item(op: &mut Op<'_>, run: i64, item: &EnqueueItem) -> OpResult<Enqueued> {
    let identity = match item {
        EnqueueItem::Job(s) => Some(s),
        EnqueueItem::Chain(steps) => steps.first(),
        EnqueueItem::Group { callback, .. } => Some(callback),
    };
    if let Some(key) = identity.and_then(|s| s.unique_key.as_deref()) {
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
        EnqueueItem::Job(spec) => vec![insert(op, run, spec, JobState::Available, None, None)?],
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
            ids
        }
    };
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
            "INSERT INTO jobs (run_id, kind, queue, state, priority, max_attempts, available_at,
                               created_at, next_id, group_id, unique_key, args)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
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
                spec.unique_key,
                spec.args,
            ])
        })
        .map_err(db("insert job"))?;
    op.moved(run, None, state);
    if state == JobState::Available {
        op.wake(&spec.queue);
    }
    Ok(JobId(op.conn.last_insert_rowid()))
}
