//! Completions: one script call per batch, one ack per completion in order.

use redis::ScriptInvocation;
use tranche_types::{BackendError, Completion, CompletionAck, Resolution};

use crate::{store, RedisBackend};

/// The 5 arguments of a completion, as `common.lua`'s `apply_resolution` takes them:
/// job, attempt, kind, payload, at (shared with `commit.lua`).
pub(crate) fn push_completion(inv: &mut ScriptInvocation<'_>, c: &Completion) {
    let (kind, payload, at) = match &c.resolution {
        Resolution::Succeeded { result } => ("s", result.as_str(), 0),
        Resolution::SucceededTraced { result, trace } => {
            // The trace context rides in `at`, unused by a success.
            inv.arg(c.lease.job.0)
                .arg(c.lease.attempt)
                .arg("t")
                .arg(result.as_str())
                .arg(trace.as_str());
            return;
        }
        Resolution::Retry { error, at } => ("r", error.as_str(), at.micros()),
        Resolution::Snooze { at } => ("z", "", at.micros()),
        Resolution::Cancelled { reason } => ("c", reason.as_str(), 0),
        Resolution::Failed { error } => ("f", error.as_str(), 0),
    };
    inv.arg(c.lease.job.0)
        .arg(c.lease.attempt)
        .arg(kind)
        .arg(payload)
        .arg(at);
}

pub async fn complete(
    b: &RedisBackend,
    batch: &[Completion],
) -> Result<Vec<CompletionAck>, BackendError> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = b.invoke(&b.scripts.complete);
    for c in batch {
        push_completion(&mut inv, c);
    }
    let acks: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("complete jobs"))?;
    if acks.len() != batch.len() {
        return Err(BackendError::store(
            "complete jobs",
            format!("expected {} acks, got {}", batch.len(), acks.len()),
        ));
    }
    Ok(acks
        .into_iter()
        .map(|a| {
            if a == "1" {
                CompletionAck::Applied
            } else {
                CompletionAck::Stale
            }
        })
        .collect())
}
