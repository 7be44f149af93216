//! Enqueue: specs are checked here, before the script runs, because a Lua script that
//! fails half way leaves its earlier writes in place; the script itself cannot fail.

use redis::ScriptInvocation;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, Enqueued, JobId, JobSpec, RunName};

use crate::packed::{pack, SEPARATOR};
use crate::{store, RedisBackend};

fn invalid(field: &'static str, expected: &str, got: &str) -> BackendError {
    BackendError::Invalid {
        field,
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

fn check(spec: &JobSpec) -> Result<(), BackendError> {
    if spec.kind.is_empty() {
        return Err(invalid("job kind", "a non-empty task kind", "\"\""));
    }
    if spec.kind.contains(SEPARATOR) {
        return Err(invalid(
            "job kind",
            "a task kind without control characters",
            &format!("{:?}", spec.kind),
        ));
    }
    if spec.queue.is_empty() {
        return Err(invalid("queue", "a non-empty queue name", "\"\""));
    }
    if spec.max_attempts == 0 {
        return Err(invalid("max_attempts", "at least 1", "0"));
    }
    spec.check_lengths()?;
    spec.check_trace()?;
    Ok(())
}

/// The 6 arguments of a spec, as `common.lua`'s `insert` reads them: what the scripts
/// look at on their own, then the rest packed into one field.
pub(crate) fn push_spec(inv: &mut ScriptInvocation<'_>, spec: &JobSpec, trace: Option<&str>) {
    inv.arg(&spec.queue)
        .arg(spec.priority)
        .arg(match (&spec.unique_key, spec.unique_for) {
            (None, _) => "0".to_string(),
            (Some(_), None) => "1".to_string(),
            (Some(_), Some(window)) => format!("w{}", window.as_micros()),
        })
        .arg(spec.unique_key.as_deref().unwrap_or(""))
        .arg(
            spec.not_before
                .map(|t| t.micros().to_string())
                .unwrap_or_default(),
        )
        .arg(pack(&spec.kind, spec.max_attempts, &spec.args, trace));
}

pub async fn enqueue(
    b: &RedisBackend,
    req: &EnqueueRequest,
) -> Result<Vec<Enqueued>, BackendError> {
    let mut inv = b.invoke(&b.scripts.enqueue);
    push_request(&mut inv, req)?;
    let out: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("enqueue"))?;
    enqueued(&out, req.items.len())
}

/// Check `req`, then add its arguments as `enqueue.lua` reads them (shared with
/// `fire_schedule.lua` and `commit.lua`, which enqueue through the same code).
pub(crate) fn push_request(
    inv: &mut ScriptInvocation<'_>,
    req: &EnqueueRequest,
) -> Result<(), BackendError> {
    req.check_unique_windows()?;
    if let Some(spec) = &req.on_done {
        check(spec)?;
        // Checked now: a name that is refused later would make the on-done job
        // unreadable when the run finishes.
        let hook_run = format!("{}/done", req.run);
        if let Err(e) = RunName::new(&hook_run) {
            return Err(invalid(
                "on_done",
                &format!("a run name short enough for its on-done run ({})", e.reason),
                &hook_run,
            ));
        }
    }
    for item in &req.items {
        match item {
            EnqueueItem::Job(spec) => check(spec)?,
            EnqueueItem::Chain(steps) => {
                if steps.is_empty() {
                    return Err(invalid("chain", "at least one step", "an empty chain"));
                }
                steps.iter().try_for_each(check)?;
            }
            EnqueueItem::Group { members, callback } => {
                members.iter().try_for_each(check)?;
                check(callback)?;
            }
            EnqueueItem::Gate { job, .. } => check(job)?,
        }
    }
    inv.arg(req.run.as_str());
    match &req.on_done {
        Some(spec) => {
            inv.arg("1");
            push_spec(inv, spec, spec.trace.as_deref());
        }
        None => {
            inv.arg("0");
            push_spec(inv, &JobSpec::new("-", "null"), None);
        }
    }
    for item in &req.items {
        match item {
            EnqueueItem::Job(spec) => {
                inv.arg("c").arg(1);
                push_spec(inv, spec, spec.trace.as_deref());
            }
            EnqueueItem::Chain(steps) => {
                inv.arg("c").arg(steps.len());
                match JobSpec::chain_traces(steps) {
                    None => steps.iter().for_each(|s| push_spec(inv, s, None)),
                    Some(traces) => steps
                        .iter()
                        .zip(traces)
                        .for_each(|(s, trace)| push_spec(inv, s, trace)),
                }
            }
            EnqueueItem::Group { members, callback } => {
                inv.arg("g").arg(members.len());
                members
                    .iter()
                    .for_each(|s| push_spec(inv, s, s.trace.as_deref()));
                push_spec(inv, callback, callback.trace.as_deref());
            }
            EnqueueItem::Gate { awaits, job } => {
                inv.arg("a").arg(*awaits);
                push_spec(inv, job, job.trace.as_deref());
            }
        }
    }
    Ok(())
}

/// The enqueue script's reply, for a request of `items` items.
pub(crate) fn enqueued(out: &[String], items: usize) -> Result<Vec<Enqueued>, BackendError> {
    let mut it = out.iter();
    let mut result = Vec::with_capacity(items);
    let bad = || BackendError::store("enqueue", "unexpected reply from the enqueue script");
    // Per item: existed, first id, count (its ids are consecutive).
    while let Some(existed) = it.next() {
        let first: i64 = it.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        let count: i64 = it.next().and_then(|n| n.parse().ok()).ok_or_else(bad)?;
        result.push(Enqueued {
            ids: (first..first + count).map(JobId).collect(),
            existed: existed == "1",
        });
    }
    if result.len() != items {
        return Err(bad());
    }
    Ok(result)
}
