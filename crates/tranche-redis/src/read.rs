//! Reads: plain commands on the counters and indexes the scripts maintain, so none of
//! them scans jobs.

use std::collections::HashMap;

use tranche_types::{
    AttemptError, BackendError, Effect, JobFailure, JobId, JobRecord, JobState, QueueDepth,
    RunName, RunProgress, Timestamp,
};

use crate::job_row::{read_jobs, Column};
use crate::packed::{unpack, PackedSpec};
use crate::{store, RedisBackend};

type Fields = HashMap<String, String>;

fn num(f: &Fields, k: &str) -> i64 {
    f.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn opt_num(f: &Fields, k: &str) -> Option<i64> {
    f.get(k).and_then(|v| v.parse().ok())
}

fn progress(name: &str, f: &Fields) -> RunProgress {
    let n = |k| num(f, k).max(0) as u64;
    RunProgress {
        run: RunName::new(name).ok(),
        total: n("total"),
        pending: n("pending"),
        available: n("available"),
        running: n("running"),
        succeeded: n("succeeded"),
        failed: n("failed"),
        cancelled: n("cancelled"),
        created_at: opt_num(f, "created").map(Timestamp),
        finished_at: opt_num(f, "fin").map(Timestamp),
        finishes: num(f, "finishes").max(0) as u32,
    }
}

pub async fn run_progress(
    b: &RedisBackend,
    run: &RunName,
) -> Result<Option<RunProgress>, BackendError> {
    let f: Fields = redis::cmd("HGETALL")
        .arg(b.keys.run(run.as_str()))
        .query_async(&mut b.conn())
        .await
        .map_err(store("read run progress"))?;
    Ok((!f.is_empty()).then(|| progress(run.as_str(), &f)))
}

pub async fn list_runs(b: &RedisBackend, limit: usize) -> Result<Vec<RunProgress>, BackendError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut conn = b.conn();
    let names: Vec<String> = redis::cmd("ZRANGE")
        .arg(b.keys.runs())
        .arg(0)
        .arg(limit as i64 - 1)
        .arg("REV")
        .query_async(&mut conn)
        .await
        .map_err(store("list runs"))?;
    let mut pipe = redis::pipe();
    for n in &names {
        pipe.cmd("HGETALL").arg(b.keys.run(n));
    }
    let all: Vec<Fields> = pipe
        .query_async(&mut conn)
        .await
        .map_err(store("list runs"))?;
    // A run whose data expired after its retention is left out.
    Ok(names
        .iter()
        .zip(all)
        .filter(|(_, f)| !f.is_empty())
        .map(|(n, f)| progress(n, &f))
        .collect())
}

pub async fn run_failures(
    b: &RedisBackend,
    run: &RunName,
    after: Option<JobId>,
    limit: usize,
) -> Result<Vec<JobFailure>, BackendError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut conn = b.conn();
    let min = after.map_or("-inf".to_string(), |a| format!("({}", a.0));
    let ids: Vec<i64> = redis::cmd("ZRANGEBYSCORE")
        .arg(b.keys.failures(run.as_str()))
        .arg(min)
        .arg("+inf")
        .arg("LIMIT")
        .arg(0)
        .arg(limit)
        .query_async(&mut conn)
        .await
        .map_err(store("list failures"))?;
    let rows = read_jobs(b, &ids).await.map_err(store("list failures"))?;
    Ok(ids
        .into_iter()
        .zip(rows)
        .filter_map(|(id, row)| {
            Some(JobFailure {
                id: JobId(id),
                kind: unpack(row.text(Column::Spec)?)?.kind.to_string(),
                attempt: row.num(Column::Attempt).unwrap_or(0).max(0) as u32,
                error: row.text(Column::Error).unwrap_or_default().to_string(),
                finished_at: row.num(Column::FinishedAt).map(Timestamp),
            })
        })
        .collect())
}

pub async fn job(b: &RedisBackend, id: JobId) -> Result<Option<JobRecord>, BackendError> {
    let row = read_jobs(b, &[id.0])
        .await
        .map_err(store("read job"))?
        .pop();
    let Some(row) = row.filter(|r| r.text(Column::State).is_some()) else {
        return Ok(None);
    };
    let errors: Vec<String> = redis::cmd("LRANGE")
        .arg(b.keys.errors(id.0))
        .arg(0)
        .arg(-1)
        .query_async(&mut b.conn())
        .await
        .map_err(store("read job"))?;
    let PackedSpec {
        kind,
        max_attempts,
        args,
        trace,
    } = row.text(Column::Spec).and_then(unpack).unwrap_or_default();
    let run = RunName::new(row.text(Column::Run).unwrap_or_default())
        .map_err(|e| BackendError::store("read job", e))?;
    let state = row
        .num(Column::State)
        .and_then(JobState::from_code)
        .unwrap_or(JobState::Failed);
    let errors = errors
        .iter()
        .filter_map(|e| {
            let mut parts = e.splitn(3, '|');
            Some(AttemptError {
                attempt: parts.next()?.parse().ok()?,
                at: Timestamp(parts.next()?.parse().ok()?),
                error: parts.next()?.to_string(),
            })
        })
        .collect();
    Ok(Some(JobRecord {
        id,
        run,
        kind: kind.to_string(),
        queue: row.owned(Column::Queue).unwrap_or_default(),
        state,
        attempt: row.num(Column::Attempt).unwrap_or(0).max(0) as u32,
        max_attempts,
        args: args.to_string(),
        input: row.owned(Column::Input),
        result: row.owned(Column::Result),
        error: row.owned(Column::Error),
        errors,
        unique_key: row.owned(Column::UniqueKey),
        next: row.num(Column::NextStep).map(JobId),
        created_at: Timestamp(row.num(Column::CreatedAt).unwrap_or(0)),
        available_at: Timestamp(row.num(Column::AvailableAt).unwrap_or(0)),
        started_at: row.num(Column::StartedAt).map(Timestamp),
        finished_at: row.num(Column::FinishedAt).map(Timestamp),
        trace: trace.map(str::to_string),
    }))
}

pub async fn unique_jobs(
    b: &RedisBackend,
    run: &RunName,
    keys: &[String],
) -> Result<Vec<Option<JobId>>, BackendError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Option<i64>> = redis::cmd("HMGET")
        .arg(b.keys.unique(run.as_str()))
        .arg(keys)
        .query_async(&mut b.conn())
        .await
        .map_err(store("find unique keys"))?;
    Ok(ids.into_iter().map(|id| id.map(JobId)).collect())
}

/// HSCAN over the run's unique keys: the cursor is Redis's own.
pub async fn unique_keys(
    b: &RedisBackend,
    run: &RunName,
    cursor: &str,
    limit: usize,
) -> Result<(Vec<(String, JobId)>, Option<String>), BackendError> {
    let from = if cursor.is_empty() { "0" } else { cursor };
    let (next, flat): (String, Vec<(String, i64)>) = redis::cmd("HSCAN")
        .arg(b.keys.unique(run.as_str()))
        .arg(from)
        .arg("COUNT")
        .arg(limit.max(1))
        .query_async(&mut b.conn())
        .await
        .map_err(store("list unique keys"))?;
    let page = flat.into_iter().map(|(k, id)| (k, JobId(id))).collect();
    Ok((page, (next != "0").then_some(next)))
}

pub async fn effect(b: &RedisBackend, key: &str) -> Result<Option<Effect>, BackendError> {
    let f: Fields = redis::cmd("HGETALL")
        .arg(b.keys.effect(key))
        .query_async(&mut b.conn())
        .await
        .map_err(store("read effect"))?;
    if f.is_empty() {
        return Ok(None);
    }
    Ok(Some(Effect {
        key: key.to_string(),
        job: opt_num(&f, "job").map(JobId),
        value: f.get("value").cloned().unwrap_or_default(),
        at: Timestamp(num(&f, "at")),
    }))
}

/// Ready plus scheduled: two counts, whatever the depth.
pub async fn queue_depth(b: &RedisBackend, queue: &str, cap: u64) -> Result<u64, BackendError> {
    let (ready, scheduled): (u64, u64) = redis::pipe()
        .cmd("ZCARD")
        .arg(b.keys.ready(queue))
        .cmd("ZCARD")
        .arg(b.keys.scheduled(queue))
        .query_async(&mut b.conn())
        .await
        .map_err(store("count queue depth"))?;
    Ok((ready + scheduled).min(cap))
}

/// Three counts per known queue; queues with nothing waiting or running are left out.
pub async fn queue_depths(b: &RedisBackend) -> Result<Vec<QueueDepth>, BackendError> {
    let mut conn = b.conn();
    let mut queues: Vec<String> = redis::cmd("SMEMBERS")
        .arg(b.keys.queues())
        .query_async(&mut conn)
        .await
        .map_err(store("count queue depths"))?;
    queues.sort();
    let mut pipe = redis::pipe();
    for q in &queues {
        pipe.cmd("ZCARD")
            .arg(b.keys.ready(q))
            .cmd("ZCARD")
            .arg(b.keys.scheduled(q))
            .cmd("HGET")
            .arg(b.keys.running())
            .arg(q);
    }
    let counts: Vec<Option<i64>> = pipe
        .query_async(&mut conn)
        .await
        .map_err(store("count queue depths"))?;
    Ok(queues
        .into_iter()
        .zip(counts.chunks(3))
        .filter_map(|(queue, c)| {
            let n = |i: usize| c.get(i).copied().flatten().unwrap_or(0).max(0) as u64;
            let d = QueueDepth {
                queue,
                available: n(0) + n(1),
                running: n(2),
            };
            (d.available > 0 || d.running > 0).then_some(d)
        })
        .collect())
}
