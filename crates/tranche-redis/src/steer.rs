//! Steering and coordination: cancel, retry a run, locks, effects, finish hooks.

use std::time::Duration;

use tranche_types::{BackendError, CancelTarget, JobId, LockClaim, RunName};

use crate::{store, RedisBackend};

pub async fn cancel(
    b: &RedisBackend,
    target: &CancelTarget,
    reason: &str,
) -> Result<u64, BackendError> {
    let mut inv = b.invoke(&b.scripts.cancel);
    match target {
        CancelTarget::Job(id) => inv.arg("job").arg(id.0),
        CancelTarget::Chain(id) => inv.arg("chain").arg(id.0),
        CancelTarget::Run(run) => inv.arg("run").arg(run.as_str()),
    };
    inv.arg(reason);
    inv.invoke_async(&mut b.conn())
        .await
        .map_err(store("cancel"))
}

pub async fn retry_run(b: &RedisBackend, run: &RunName) -> Result<u64, BackendError> {
    let mut inv = b.invoke(&b.scripts.retry_run);
    inv.arg(run.as_str());
    inv.invoke_async(&mut b.conn())
        .await
        .map_err(store("retry run"))
}

pub async fn claim_locks(
    b: &RedisBackend,
    owner: &str,
    keys: &[String],
    ttl: Duration,
) -> Result<LockClaim, BackendError> {
    if keys.is_empty() {
        return Ok(LockClaim::Claimed);
    }
    let now = b.options.clock.now();
    let mut inv = b.invoke(&b.scripts.claim_locks);
    // Redis' own expiry only reclaims memory, well after the clock says a lock is free.
    let memory_ttl = ttl.as_secs() + b.options.retention.as_secs().max(1);
    inv.arg(owner).arg(now.plus(ttl).micros()).arg(memory_ttl);
    for k in keys {
        inv.arg(k);
    }
    let out: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("claim locks"))?;
    Ok(match <[String; 2]>::try_from(out) {
        Ok([key, owner]) => LockClaim::Conflict { key, owner },
        Err(_) => LockClaim::Claimed,
    })
}

pub async fn release_locks(
    b: &RedisBackend,
    owner: &str,
    keys: &[String],
) -> Result<u64, BackendError> {
    if keys.is_empty() {
        return Ok(0);
    }
    let mut inv = b.invoke(&b.scripts.release_locks);
    inv.arg(owner);
    for k in keys {
        inv.arg(k);
    }
    inv.invoke_async(&mut b.conn())
        .await
        .map_err(store("release locks"))
}

pub async fn record_effect(
    b: &RedisBackend,
    key: &str,
    job: Option<JobId>,
    value: &str,
) -> Result<bool, BackendError> {
    let mut inv = b.invoke(&b.scripts.record_effect);
    inv.arg(key)
        .arg(job.map(|j| j.0.to_string()).unwrap_or_default())
        .arg(value);
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("record effect"))?;
    Ok(n == 1)
}

pub async fn claim_finish_hook(
    b: &RedisBackend,
    run: &RunName,
    hook: &str,
    finish: u32,
) -> Result<bool, BackendError> {
    let mut inv = b.invoke(&b.scripts.claim_finish_hook);
    inv.arg(run.as_str()).arg(hook).arg(finish);
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("claim finish hook"))?;
    Ok(n == 1)
}
