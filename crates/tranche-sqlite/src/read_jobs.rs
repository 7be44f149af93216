//! Listing jobs a page at a time (keyset: ids after the cursor, in order). A page reads
//! one window of at most [`WINDOW`] ids after the cursor (the primary key's range, or
//! `jobs_run`'s when a run is given) and checks the other filters on those rows, so a
//! call's work is bounded however many jobs there are and no index is kept for
//! listing (one per filter halved the bulk path's throughput). A page is short when its
//! window ran out first; its cursor then says where the next window starts.

use rusqlite::{Connection, OptionalExtension, ToSql};
use tranche_types::{JobFilter, JobId, JobPage, JobState, JobSummary, Timestamp};

use crate::write::{db, OpResult};

/// Ids one page call reads at most.
pub const WINDOW: i64 = 10_000;

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
    let window_end = after.saturating_add(WINDOW);
    let state = filter.state.map(JobState::code);
    let limit_i = limit as i64;
    let mut args: Vec<&dyn ToSql> = vec![&after, &window_end];
    if let Some(run) = &run_id {
        args.push(run);
    }
    if let Some(state) = &state {
        args.push(state);
    }
    if let Some(queue) = &filter.queue {
        args.push(queue);
    }
    if let Some(kind) = &filter.kind {
        args.push(kind);
    }
    args.push(&limit_i);
    let sql = page_sql(
        run_id.is_some(),
        state.is_some(),
        filter.queue.is_some(),
        filter.kind.is_some(),
    );
    let jobs: Vec<JobSummary> = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_map(args.as_slice(), summary)?.collect())
        .map_err(db("list jobs"))?;
    let next = if jobs.len() == limit {
        Some(jobs[jobs.len() - 1].id)
    } else {
        // Short: the window ran out. More may follow past it.
        let newest: Option<i64> = conn
            .prepare_cached("SELECT MAX(id) FROM jobs")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .map_err(db("list jobs"))?;
        newest
            .filter(|&n| n > window_end)
            .map(|_| JobId(window_end))
    };
    Ok(JobPage { jobs, next })
}

/// The page query for a filter shape: which of run, state, queue and kind are set,
/// bound in that order after the cursor and the window's end, then the limit.
fn page_sql(run: bool, state: bool, queue: bool, kind: bool) -> String {
    let mut sql = String::from(
        "SELECT j.id, r.name, j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.created_at,
                j.finished_at, j.error
         FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id > ? AND j.id <= ?",
    );
    for (set, column) in [
        (run, "run_id"),
        (state, "state"),
        (queue, "queue"),
        (kind, "kind"),
    ] {
        if set {
            sql.push_str(&format!(" AND j.{column} = ?"));
        }
    }
    sql.push_str(" ORDER BY j.id LIMIT ?");
    sql
}

fn summary(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobSummary> {
    let state: i64 = r.get(4)?;
    Ok(JobSummary {
        id: JobId(r.get(0)?),
        run: crate::read::run_name(r, 1)?,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every filter shape reads one bounded range in id order: no sort of the rows
    /// found, no scan of the table.
    #[test]
    fn every_filter_shape_is_a_range_in_id_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        for shape in 0..16u8 {
            let bit = |i: u8| shape & (1 << i) != 0;
            let sql = page_sql(bit(0), bit(1), bit(2), bit(3));
            let plan: Vec<String> = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(
                    rusqlite::params_from_iter(0..=shape.count_ones() + 2),
                    |r| r.get(3),
                )
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            let plan = plan.join("; ");
            assert!(!plan.contains("TEMP B-TREE"), "shape {shape:04b}: {plan}");
            assert!(
                plan.contains("SEARCH j USING"),
                "shape {shape:04b} reads a range: {plan}"
            );
        }
    }
}
