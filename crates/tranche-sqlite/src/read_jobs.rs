//! Listing jobs a page at a time (keyset: ids after the cursor, in order). A page reads
//! one window of at most [`WINDOW`] ids after the cursor (the primary key's range, or
//! `jobs_run`'s when a run is given) and checks the other filters on those rows, so a
//! call's work is bounded however many jobs there are and no index is kept for
//! listing (one per filter halved the bulk path's throughput). A page is short when its
//! window ran out first; its cursor then says where the next window starts.

use const_format::formatcp;
use rusqlite::{Connection, OptionalExtension, ToSql};
use tranche_types::{JobFilter, JobId, JobPage, JobState, JobSummary, Timestamp};

use crate::states::FAILED;
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
    let drive = Driver::for_filter(run_id.is_some(), filter.state);
    let after = after.map_or(0, |a| a.0);
    let window_end = window_end(conn, drive, after, run_id)?;
    let end = window_end.unwrap_or(i64::MAX);
    let state = filter.state.map(JobState::code);
    let limit_i = limit as i64;
    let mut args: Vec<&dyn ToSql> = vec![&after, &end];
    if let Some(run) = &run_id {
        args.push(run);
    }
    if let Some(state) = state.as_ref().filter(|_| drive != Driver::RunFailed) {
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
        drive,
        state.is_some() && drive != Driver::RunFailed,
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
        // Short: the window ran out first, and more may follow past it (a window
        // that reached the end of its index has none).
        window_end.map(JobId)
    };
    Ok(JobPage { jobs, next })
}

/// Where the window after `after` ends, or `None` when it reaches the end of its
/// index. A run's window is its next WINDOW rows in its index (a walk of index entries
/// only), so the other runs' ids between a run's are not walked a window at a time.
/// The whole store's is WINDOW ids (counting rows there would read the table's own
/// pages), starting at the oldest job, so the gap a prune leaves is stepped over.
fn window_end(
    conn: &Connection,
    drive: Driver,
    after: i64,
    run_id: Option<i64>,
) -> OpResult<Option<i64>> {
    if drive == Driver::All {
        let (oldest, newest): (Option<i64>, Option<i64>) = conn
            .prepare_cached("SELECT (SELECT MIN(id) FROM jobs), (SELECT MAX(id) FROM jobs)")
            .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(db("list jobs"))?;
        let (Some(oldest), Some(newest)) = (oldest, newest) else {
            return Ok(None);
        };
        let end = after.max(oldest - 1).saturating_add(WINDOW);
        return Ok((end < newest).then_some(end));
    }
    let mut args: Vec<&dyn ToSql> = vec![&after];
    if let Some(run) = &run_id {
        args.push(run);
    }
    conn.prepare_cached(&drive.run_window_sql())
        .and_then(|mut s| s.query_row(args.as_slice(), |r| r.get(0)).optional())
        .map_err(db("list jobs"))
}

/// The index a page walks: the failed jobs of a run (`jobs_failed`, a partial index:
/// failed jobs are few, and the bulk path never touches it), a run's jobs
/// (`jobs_run`), or every job (the primary key).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Driver {
    RunFailed,
    Run,
    All,
}

impl Driver {
    fn for_filter(run: bool, state: Option<JobState>) -> Driver {
        match (run, state) {
            (true, Some(JobState::Failed)) => Driver::RunFailed,
            (true, _) => Driver::Run,
            (false, _) => Driver::All,
        }
    }

    /// The planner's choice made for it: without statistics it would take `jobs_run`
    /// for a run's failures and walk all of the run's jobs.
    fn indexed_by(self) -> &'static str {
        match self {
            Driver::RunFailed => " INDEXED BY jobs_failed",
            Driver::Run | Driver::All => "",
        }
    }

    /// The id of the WINDOW-th row of a run's index after the cursor, or none when
    /// fewer follow: bound the cursor, then the run.
    fn run_window_sql(self) -> String {
        let failed = match self {
            // The state is written out, not bound: only then may SQLite use the
            // partial index.
            Driver::RunFailed => formatcp!(" AND state = {FAILED}"),
            Driver::Run | Driver::All => "",
        };
        format!(
            "SELECT id FROM jobs{} WHERE id > ? AND run_id = ?{failed} ORDER BY id LIMIT 1 OFFSET {}",
            self.indexed_by(),
            WINDOW - 1
        )
    }
}

/// The page query for a filter shape: bound in order the cursor, the window's end,
/// the run (for a run's drivers), then which of state, queue and kind are set, then
/// the limit.
fn page_sql(drive: Driver, state: bool, queue: bool, kind: bool) -> String {
    let mut sql = format!(
        "SELECT j.id, r.name, j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.created_at,
                j.finished_at, j.error
         FROM jobs j{} JOIN runs r ON r.id = j.run_id WHERE j.id > ? AND j.id <= ?",
        drive.indexed_by()
    );
    match drive {
        Driver::RunFailed => sql.push_str(formatcp!(" AND j.run_id = ? AND j.state = {FAILED}")),
        Driver::Run => sql.push_str(" AND j.run_id = ?"),
        Driver::All => {}
    }
    for (set, column) in [(state, "state"), (queue, "queue"), (kind, "kind")] {
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

    fn plan(conn: &Connection, sql: &str, params: usize) -> String {
        let plan: Vec<String> = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map(rusqlite::params_from_iter(0..params), |r| r.get(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        plan.join("; ")
    }

    /// Every filter shape reads one bounded range in id order of its driving index: no
    /// sort of the rows found, no scan of the table; a run's failures are read from
    /// the partial index of failed jobs.
    #[test]
    fn every_filter_shape_is_a_range_in_id_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        for drive in [Driver::RunFailed, Driver::Run, Driver::All] {
            let run = usize::from(drive != Driver::All);
            let window = plan(&conn, &drive.run_window_sql(), 2);
            if drive != Driver::All {
                assert!(!window.contains("TEMP B-TREE"), "{drive:?}: {window}");
                assert!(window.contains("SEARCH"), "{drive:?}: {window}");
            }
            for shape in 0..8u8 {
                let bit = |i: u8| shape & (1 << i) != 0;
                let sql = page_sql(drive, bit(0), bit(1), bit(2));
                let page = plan(&conn, &sql, 3 + run + shape.count_ones() as usize);
                assert!(
                    !page.contains("TEMP B-TREE"),
                    "{drive:?} {shape:03b}: {page}"
                );
                assert!(
                    page.contains("SEARCH j USING"),
                    "{drive:?} {shape:03b}: {page}"
                );
                if drive == Driver::RunFailed {
                    assert!(
                        page.contains("jobs_failed"),
                        "{drive:?} {shape:03b}: {page}"
                    );
                    assert!(window.contains("jobs_failed"), "{drive:?}: {window}");
                }
            }
        }
    }
}
