//! Listing jobs a page at a time (keyset: ids after the cursor, in order). Each filter
//! is an equality on an indexed column with the id last (migration 4), so SQLite reads
//! one index range from the cursor on and stops after `limit` rows.

use rusqlite::{Connection, OptionalExtension, ToSql};
use tranche_types::{JobFilter, JobId, JobPage, JobState, JobSummary, RunName, Timestamp};

use crate::write::{db, OpResult};

pub fn list_jobs(
    conn: &Connection,
    filter: &JobFilter,
    after: Option<JobId>,
    limit: usize,
) -> OpResult<JobPage> {
    let limit = limit.max(1);
    let run_id: Option<i64> = match &filter.run {
        None => None,
        Some(run) => {
            let id = conn
                .prepare_cached("SELECT id FROM runs WHERE name = ?1")
                .and_then(|mut s| s.query_row([run.as_str()], |r| r.get(0)).optional())
                .map_err(db("look up run"))?;
            match id {
                Some(id) => Some(id),
                None => return Ok(JobPage::default()),
            }
        }
    };
    let after = after.map_or(0, |a| a.0);
    let state = filter.state.map(JobState::code);
    let limit_i = limit as i64;
    let mut sql = String::from(
        "SELECT j.id, r.name, j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.created_at,
                j.finished_at, j.error
         FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id > ?",
    );
    let mut args: Vec<&dyn ToSql> = vec![&after];
    if let Some(run) = &run_id {
        sql.push_str(" AND j.run_id = ?");
        args.push(run);
    }
    if let Some(state) = &state {
        sql.push_str(" AND j.state = ?");
        args.push(state);
    }
    if let Some(queue) = &filter.queue {
        sql.push_str(" AND j.queue = ?");
        args.push(queue);
    }
    if let Some(kind) = &filter.kind {
        sql.push_str(" AND j.kind = ?");
        args.push(kind);
    }
    sql.push_str(" ORDER BY j.id LIMIT ?");
    args.push(&limit_i);
    let jobs: Vec<JobSummary> = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_map(args.as_slice(), summary)?.collect())
        .map_err(db("list jobs"))?;
    let next = (jobs.len() == limit).then(|| jobs[jobs.len() - 1].id);
    Ok(JobPage { jobs, next })
}

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobSummary> {
    let run: String = r.get(1)?;
    let state: i64 = r.get(4)?;
    Ok(JobSummary {
        id: JobId(r.get(0)?),
        run: RunName::new(run).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, Box::new(e))
        })?,
        kind: r.get(2)?,
        queue: r.get(3)?,
        state: JobState::from_code(state).unwrap_or(JobState::Failed),
        attempt: r.get(5)?,
        max_attempts: r.get(6)?,
        created_at: Timestamp(r.get(7)?),
        finished_at: r.get::<_, Option<i64>>(8)?.map(Timestamp),
        error: r.get(9)?,
    })
}
