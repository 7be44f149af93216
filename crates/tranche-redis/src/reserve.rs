//! Reserve (waiting on wake-ups, not polling), heartbeats and releases.

use std::time::Duration;

use tranche_backend::{long_poll, Answer};

use tranche_types::{
    BackendError, JobId, LeaseRef, ReserveRequest, ReservedJob, RunName, Timestamp,
};

use crate::packed::{unpack, PackedSpec};
use crate::{store, RedisBackend};

enum Reserved {
    Jobs(Vec<ReservedJob>),
    /// Nothing ready; the next scheduled job of the queue is due then.
    Empty(Option<Timestamp>),
}

pub async fn reserve(
    b: &RedisBackend,
    req: &ReserveRequest,
) -> Result<Vec<ReservedJob>, BackendError> {
    let wake = b.notifier.queue(&req.queue);
    long_poll(
        &wake,
        req.wait,
        b.options.poll_interval,
        b.options.clock.as_ref(),
        || async {
            Ok(match reserve_once(b, req).await? {
                Reserved::Jobs(jobs) => Answer::Ready(jobs),
                Reserved::Empty(next_due) => Answer::NotYet { next_due },
            })
        },
    )
    .await
}

async fn reserve_once(b: &RedisBackend, req: &ReserveRequest) -> Result<Reserved, BackendError> {
    let lease_until = b.options.clock.now().plus(req.lease);
    let mut inv = b.invoke(&b.scripts.reserve);
    inv.arg(&req.queue)
        .arg(req.max.max(1))
        .arg(lease_until.micros());
    let out: Vec<Option<String>> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("reserve"))?;
    if out.len() == 1 {
        let next = out[0].as_deref().unwrap_or("");
        return Ok(Reserved::Empty(next.parse().ok().map(Timestamp)));
    }
    let bad = |what: &str| {
        BackendError::store(
            "reserve",
            format!("unexpected reply from the reserve script: {what}"),
        )
    };
    let mut jobs = Vec::with_capacity(out.len() / 6);
    for row in out.chunks(6) {
        let [id, run, packed, input, attempt, avail] = row else {
            return Err(bad("a short row"));
        };
        let PackedSpec {
            kind,
            max_attempts,
            args,
            trace,
        } = packed
            .as_deref()
            .and_then(unpack)
            .ok_or_else(|| bad("a malformed job spec"))?;
        let text = |v: &Option<String>, what: &str| v.clone().ok_or_else(|| bad(what));
        let num = |v: &Option<String>, what: &str| -> Result<i64, BackendError> {
            v.as_deref()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(what))
        };
        jobs.push(ReservedJob {
            id: JobId(num(id, "id")?),
            run: RunName::new(text(run, "run")?).map_err(|e| BackendError::store("reserve", e))?,
            kind: kind.to_string(),
            queue: req.queue.clone(),
            args: args.to_string(),
            input: input.clone(),
            attempt: num(attempt, "attempt")? as u32,
            max_attempts,
            lease_until,
            available_at: Timestamp(num(avail, "available_at")?),
            trace: trace.map(str::to_string),
        });
    }
    Ok(Reserved::Jobs(jobs))
}

pub async fn heartbeat(
    b: &RedisBackend,
    leases: Vec<LeaseRef>,
    lease: Duration,
) -> Result<Vec<LeaseRef>, BackendError> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = b.invoke(&b.scripts.heartbeat);
    inv.arg(b.options.clock.now().plus(lease).micros());
    for l in &leases {
        inv.arg(l.job.0).arg(l.attempt);
    }
    let lost: Vec<usize> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("extend leases"))?;
    Ok(lost
        .into_iter()
        .filter_map(|i| leases.get(i.wrapping_sub(1)).copied())
        .collect())
}

pub async fn release(b: &RedisBackend, leases: &[LeaseRef]) -> Result<u64, BackendError> {
    if leases.is_empty() {
        return Ok(0);
    }
    let mut inv = b.invoke(&b.scripts.release);
    for l in leases {
        inv.arg(l.job.0).arg(l.attempt);
    }
    inv.invoke_async(&mut b.conn())
        .await
        .map_err(store("release jobs"))
}
