//! Per-queue statistics ([`QueueStats`]). The scripts count them where each thing
//! happens — `reserve.lua` (attempts started, waits, expired leases) and
//! `apply_resolution` in `common.lua` (outcomes, run times) — in a Lua table per
//! script call, and add them with one HINCRBY per (queue, field) to `P qst:<queue>`:
//! a batch of a thousand jobs costs a few calls, and the work per job is a subtraction
//! and five comparisons. Every process sharing the prefix thus sees the whole fleet.

use tranche_types::{BackendError, Histogram, QueueStats, LATENCY_BUCKETS_MS};

use crate::{store, RedisBackend};

/// One hash per known queue; queues that never had an attempt are left out.
pub async fn queue_stats(b: &RedisBackend) -> Result<Vec<QueueStats>, BackendError> {
    let mut conn = b.conn();
    let mut queues: Vec<String> = redis::cmd("SMEMBERS")
        .arg(b.keys.queues())
        .query_async(&mut conn)
        .await
        .map_err(store("read queue stats"))?;
    queues.sort();
    let mut pipe = redis::pipe();
    for q in &queues {
        pipe.cmd("HGETALL").arg(b.keys.stats(q));
    }
    let hashes: Vec<Vec<(String, i64)>> = pipe
        .query_async(&mut conn)
        .await
        .map_err(store("read queue stats"))?;
    Ok(queues
        .into_iter()
        .zip(hashes)
        .filter(|(_, fields)| !fields.is_empty())
        .map(|(queue, fields)| decode(queue, &fields))
        .collect())
}

fn decode(queue: String, fields: &[(String, i64)]) -> QueueStats {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(f, _)| f == name)
            .map_or(0, |(_, n)| *n)
    };
    let n = |name: &str| get(name).max(0) as u64;
    // Buckets are `w1`..`w19` (1-based, see common.lua).
    let histogram = |letter: char| {
        let buckets = (1..=LATENCY_BUCKETS_MS.len() + 1)
            .map(|i| n(&format!("{letter}{i}")))
            .collect();
        Histogram::from_parts(buckets, get(&format!("{letter}s")))
    };
    QueueStats {
        started: n("started"),
        succeeded: n("succeeded"),
        failed: n("failed"),
        retried: n("retried"),
        expired: n("expired"),
        wait: histogram('w'),
        run: histogram('r'),
        queue,
    }
}
