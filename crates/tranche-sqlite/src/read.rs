//! Queries that only read, on their own connection: with WAL they never wait for the
//! writer, so `tranche status` stays instant in the middle of a run.

use const_format::formatcp;
use rusqlite::{params, Connection, OptionalExtension, Row};
use tranche_types::{
    AttemptError, Effect, JobFailure, JobId, JobRecord, JobState, QueueDepth, Record, RunName,
    RunProgress, Timestamp,
};

use crate::states::{AVAILABLE, FAILED};
use crate::write::{db, OpResult};

const RUN_COLUMNS: &str = "name, total, pending, available, running, succeeded, failed, cancelled,
                           created_at, finished_at, finishes";

fn progress_row(r: &Row<'_>) -> rusqlite::Result<(String, RunProgress)> {
    let n = |i| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
    Ok((
        r.get(0)?,
        RunProgress {
            run: None,
            total: n(1)?,
            pending: n(2)?,
            available: n(3)?,
            running: n(4)?,
            succeeded: n(5)?,
            failed: n(6)?,
            cancelled: n(7)?,
            created_at: r.get::<_, Option<i64>>(8)?.map(Timestamp),
            finished_at: r.get::<_, Option<i64>>(9)?.map(Timestamp),
            finishes: r.get(10)?,
        },
    ))
}

fn named((name, mut p): (String, RunProgress)) -> RunProgress {
    p.run = RunName::new(name).ok();
    p
}

pub fn run_progress(conn: &Connection, run: &RunName) -> OpResult<Option<RunProgress>> {
    conn.prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE name = ?1"))
        .and_then(|mut s| s.query_row([run.as_str()], progress_row).optional())
        .map(|o| o.map(named))
        .map_err(db("read run progress"))
}

pub fn list_runs(conn: &Connection, limit: usize) -> OpResult<Vec<RunProgress>> {
    conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs ORDER BY id DESC LIMIT ?1"
    ))
    .and_then(|mut s| {
        s.query_map([limit as i64], progress_row)?
            .map(|r| r.map(named))
            .collect()
    })
    .map_err(db("list runs"))
}

pub fn run_failures(
    conn: &Connection,
    run: &RunName,
    after: Option<JobId>,
    limit: usize,
) -> OpResult<Vec<JobFailure>> {
    conn.prepare_cached(formatcp!(
        "SELECT j.id, j.kind, j.attempt, COALESCE(j.error, ''), j.finished_at
         FROM jobs j JOIN runs r ON r.id = j.run_id
         WHERE r.name = ?1 AND j.state = {FAILED} AND j.id > ?2 ORDER BY j.id LIMIT ?3"
    ))
    .and_then(|mut s| {
        s.query_map(
            params![run.as_str(), after.map_or(0, |a| a.0), limit as i64],
            |r| {
                Ok(JobFailure {
                    id: JobId(r.get(0)?),
                    kind: r.get(1)?,
                    attempt: r.get(2)?,
                    error: r.get(3)?,
                    finished_at: r.get::<_, Option<i64>>(4)?.map(Timestamp),
                })
            },
        )?
        .collect()
    })
    .map_err(db("list failures"))
}

pub fn job(conn: &Connection, id: JobId) -> OpResult<Option<JobRecord>> {
    let record = conn
        .prepare_cached(
            "SELECT j.id, r.name, j.kind, j.queue, j.state, j.attempt, j.max_attempts, j.args, j.input,
                    j.result, j.error,
                    COALESCE(j.unique_key, (SELECT key FROM unique_windows WHERE job_id = j.id)),
                    j.next_id, j.created_at, j.available_at,
                    j.started_at, j.finished_at,
                    (SELECT trace FROM job_traces WHERE job_id = j.id)
             FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([id.0], |r| {
                let state: i64 = r.get(4)?;
                Ok(JobRecord {
                    id: JobId(r.get(0)?),
                    run: run_name(r, 1)?,
                    kind: r.get(2)?,
                    queue: r.get(3)?,
                    state: JobState::from_code(state).unwrap_or(JobState::Failed),
                    attempt: r.get(5)?,
                    max_attempts: r.get(6)?,
                    args: r.get(7)?,
                    input: r.get(8)?,
                    result: r.get(9)?,
                    error: r.get(10)?,
                    errors: Vec::new(),
                    unique_key: r.get(11)?,
                    next: r.get::<_, Option<i64>>(12)?.map(JobId),
                    created_at: Timestamp(r.get(13)?),
                    available_at: Timestamp(r.get(14)?),
                    started_at: r.get::<_, Option<i64>>(15)?.map(Timestamp),
                    finished_at: r.get::<_, Option<i64>>(16)?.map(Timestamp),
                    trace: r.get(17)?,
                })
            })
            .optional()
        })
        .map_err(db("read job"))?;
    let Some(mut record) = record else {
        return Ok(None);
    };
    record.errors = conn
        .prepare_cached(
            "SELECT attempt, at, error FROM job_errors WHERE job_id = ?1 ORDER BY rowid",
        )
        .and_then(|mut s| {
            s.query_map([id.0], |r| {
                Ok(AttemptError {
                    attempt: r.get(0)?,
                    at: Timestamp(r.get(1)?),
                    error: r.get(2)?,
                })
            })?
            .collect()
        })
        .map_err(db("read job errors"))?;
    Ok(Some(record))
}

pub fn unique_jobs(conn: &Connection, run: &str, keys: &[String]) -> OpResult<Vec<Option<JobId>>> {
    let mut find = conn
        .prepare_cached(
            "SELECT j.id FROM jobs j JOIN runs r ON r.id = j.run_id
             WHERE r.name = ?1 AND j.unique_key = ?2",
        )
        .map_err(db("find unique keys"))?;
    keys.iter()
        .map(|k| {
            find.query_row(rusqlite::params![run, k], |r| r.get(0))
                .optional()
                .map(|id| id.map(JobId))
                .map_err(db("find unique keys"))
        })
        .collect()
}

pub fn unique_keys(
    conn: &Connection,
    run: &str,
    after: &str,
    limit: usize,
) -> OpResult<(Vec<(String, JobId)>, Option<String>)> {
    let page: Vec<(String, JobId)> = conn
        .prepare_cached(
            "SELECT unique_key, id FROM jobs
             WHERE run_id = (SELECT id FROM runs WHERE name = ?1) AND unique_key > ?2
             ORDER BY unique_key LIMIT ?3",
        )
        .and_then(|mut s| {
            s.query_map(rusqlite::params![run, after, limit.max(1) as i64], |r| {
                Ok((r.get(0)?, JobId(r.get(1)?)))
            })?
            .collect()
        })
        .map_err(db("list unique keys"))?;
    let next = (page.len() >= limit.max(1)).then(|| page.last().map(|(k, _)| k.clone()));
    Ok((page, next.flatten()))
}

pub fn effect(conn: &Connection, key: &str) -> OpResult<Option<Effect>> {
    conn.prepare_cached("SELECT key, job_id, value, at FROM effects WHERE key = ?1")
        .and_then(|mut s| {
            s.query_row([key], |r| {
                Ok(Effect {
                    key: r.get(0)?,
                    job: r.get::<_, Option<i64>>(1)?.map(JobId),
                    value: r.get(2)?,
                    at: Timestamp(r.get(3)?),
                })
            })
            .optional()
        })
        .map_err(db("read effect"))
}

pub fn records(conn: &Connection, keys: &[String]) -> OpResult<Vec<Option<Record>>> {
    let mut stmt = conn
        .prepare_cached("SELECT version, value FROM records WHERE key = ?1")
        .map_err(db("read record"))?;
    keys.iter()
        .map(|key| {
            stmt.query_row([key], |r| {
                Ok(Record {
                    version: r.get(0)?,
                    value: r.get(1)?,
                })
            })
            .optional()
            .map_err(db("read record"))
        })
        .collect()
}

pub fn queue_depth(conn: &Connection, queue: &str, cap: u64) -> OpResult<u64> {
    conn.prepare_cached(formatcp!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM jobs WHERE state = {AVAILABLE} AND queue = ?1 LIMIT ?2)"
    ))
    .and_then(|mut s| {
        s.query_row(params![queue, cap.min(i64::MAX as u64) as i64], |r| {
            r.get::<_, i64>(0)
        })
    })
    .map(|n| n.max(0) as u64)
    .map_err(db("count queue depth"))
}

/// Each state's count comes from its own partial index, so finished jobs are never read.
pub fn queue_depths(conn: &Connection) -> OpResult<Vec<QueueDepth>> {
    let mut by_queue: std::collections::BTreeMap<String, QueueDepth> = Default::default();
    for state in [JobState::Available, JobState::Running] {
        let counts: Vec<(String, i64)> = conn
            .prepare_cached(&format!(
                "SELECT queue, COUNT(*) FROM jobs WHERE state = {} GROUP BY queue",
                state.code()
            ))
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(db("count queue depths"))?;
        for (queue, n) in counts {
            let d = by_queue.entry(queue.clone()).or_insert_with(|| QueueDepth {
                queue,
                ..QueueDepth::default()
            });
            match state {
                JobState::Available => d.available = n.max(0) as u64,
                _ => d.running = n.max(0) as u64,
            }
        }
    }
    Ok(by_queue.into_values().collect())
}

/// The run name in column `at`: a stored name that no longer passes `RunName`'s rules
/// is a conversion error of that column, not a panic.
pub(crate) fn run_name(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<RunName> {
    let run: String = r.get(at)?;
    RunName::new(run).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(at, rusqlite::types::Type::Text, Box::new(e))
    })
}
