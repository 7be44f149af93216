//! Retention on demand (`scripts/prune.lua`): the same removal as the retention's key
//! expiry, for runs finished before a given time. Each script call is bounded (a few
//! hundred runs looked at, [`JOBS_PER_CALL`] job ids), so a large prune never holds
//! Redis for long; this loop carries the position in `P runs` between calls.

use tranche_types::{BackendError, Pruned, Timestamp};

use crate::{store, RedisBackend};

/// Job ids one script call may remove: about a millisecond of Redis's time.
const JOBS_PER_CALL: u64 = 1000;

pub async fn prune(
    b: &RedisBackend,
    before: Timestamp,
    limit: usize,
) -> Result<Pruned, BackendError> {
    let mut total = Pruned::default();
    let mut at = 0i64;
    loop {
        let max_runs = (limit as u64).saturating_sub(total.runs);
        if max_runs == 0 {
            return Ok(total);
        }
        let mut inv = b.invoke(&b.scripts.prune);
        inv.arg(before.micros())
            .arg(at)
            .arg(max_runs)
            .arg(JOBS_PER_CALL);
        let out: Vec<i64> = inv
            .invoke_async(&mut b.conn())
            .await
            .map_err(store("prune"))?;
        let [runs, jobs, next, done] = <[i64; 4]>::try_from(out).map_err(|out| {
            BackendError::store(
                "prune",
                format!("expected 4 numbers from prune.lua, got {out:?}"),
            )
        })?;
        total.add(Pruned {
            runs: runs.max(0) as u64,
            jobs: jobs.max(0) as u64,
            // Records written ended go by key expiry (commit.lua), not here.
            records: 0,
        });
        at = next;
        if done == 1 {
            return Ok(total);
        }
    }
}
