//! One job at a time: retry it, delete it, list jobs a page at a time.

use tranche_types::{
    BackendError, JobFilter, JobId, JobPage, JobState, JobSummary, RunName, Timestamp,
};

use crate::packed::unpack;
use crate::{store, RedisBackend};

/// Jobs a listing examines per call at most, matching or not: a call holds Redis for
/// about a millisecond per thousand (one bucket read each), whatever the filter.
const LIST_BUDGET: usize = 5_000;

fn state_name(code: i64) -> String {
    JobState::from_code(code).map_or_else(|| format!("state {code}"), |s| s.to_string())
}

fn refused(id: JobId, expected: &str, got: String) -> BackendError {
    BackendError::Invalid {
        field: "job",
        expected: expected.to_string(),
        got: format!("job {id}, {got}"),
    }
}

pub async fn retry_job(b: &RedisBackend, id: JobId) -> Result<u64, BackendError> {
    let mut inv = b.invoke(&b.scripts.retry_job);
    inv.arg(id.0);
    let (status, n): (String, i64) = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("retry job"))?;
    match status.as_str() {
        "ok" => Ok(n.max(0) as u64),
        "missing" => Err(BackendError::NotFound {
            what: format!("job {id}"),
        }),
        "upstream" => Err(refused(
            id,
            "a job that failed or was cancelled itself",
            "cancelled because an earlier step of its chain failed: retry that step".into(),
        )),
        _ => Err(refused(id, "a failed or cancelled job", state_name(n))),
    }
}

pub async fn delete_job(b: &RedisBackend, id: JobId) -> Result<bool, BackendError> {
    let mut inv = b.invoke(&b.scripts.delete_job);
    inv.arg(id.0);
    let (status, state): (String, i64) = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("delete job"))?;
    match status.as_str() {
        "ok" => Ok(true),
        "missing" => Ok(false),
        _ => Err(refused(
            id,
            "an ended job (succeeded, failed or cancelled)",
            state_name(state),
        )),
    }
}

/// Values per job in `list_jobs.lua`'s answer.
const ROW: usize = 9;

pub async fn list_jobs(
    b: &RedisBackend,
    filter: &JobFilter,
    after: Option<JobId>,
    limit: usize,
) -> Result<JobPage, BackendError> {
    let mut inv = b.invoke(&b.scripts.list_jobs);
    inv.arg(after.map_or(0, |a| a.0.max(0)))
        .arg(limit.clamp(1, LIST_BUDGET))
        .arg(LIST_BUDGET)
        .arg(filter.run.as_ref().map_or("", RunName::as_str))
        .arg(filter.state.map_or(String::new(), |s| s.code().to_string()))
        .arg(filter.queue.as_deref().unwrap_or(""))
        .arg(filter.kind.as_deref().unwrap_or(""));
    let flat: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("list jobs"))?;
    let bad = |what: &str| BackendError::store("list jobs", format!("unexpected {what}"));
    let (next, rows) = flat.split_first().ok_or_else(|| bad("empty answer"))?;
    let next = if next.is_empty() {
        None
    } else {
        Some(JobId(next.parse().map_err(|_| bad("cursor"))?))
    };
    let num = |v: &str| v.parse::<i64>().map_err(|_| bad("number"));
    let mut jobs = Vec::with_capacity(rows.len() / ROW);
    for row in rows.chunks(ROW) {
        let [id, state, attempt, created_at, finished_at, run, queue, spec, error] = row else {
            return Err(bad("row length"));
        };
        let spec = unpack(spec).ok_or_else(|| bad("job spec"))?;
        let finished_at = num(finished_at)?;
        jobs.push(JobSummary {
            id: JobId(num(id)?),
            run: RunName::new(run.as_str()).map_err(|e| BackendError::store("list jobs", e))?,
            kind: spec.kind.to_string(),
            queue: queue.clone(),
            state: JobState::from_code(num(state)?).ok_or_else(|| bad("state"))?,
            attempt: num(attempt)?.max(0) as u32,
            max_attempts: spec.max_attempts,
            created_at: Timestamp(num(created_at)?),
            finished_at: (finished_at != 0).then_some(Timestamp(finished_at)),
            error: (!error.is_empty()).then(|| error.clone()),
        });
    }
    Ok(JobPage { jobs, next })
}
