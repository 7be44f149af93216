//! Pausing and resuming a queue: the set `P paused`, which the reserve script checks
//! in the same script that leases, so a pause holds for every process of a fleet from
//! the moment it is applied.

use tranche_types::{check_queue_name, BackendError};

use crate::{store, RedisBackend};

pub async fn pause(b: &RedisBackend, queue: &str) -> Result<bool, BackendError> {
    check_queue_name(queue)?;
    let mut inv = b.invoke(&b.scripts.pause_queue);
    inv.arg(queue);
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("pause queue"))?;
    Ok(n == 1)
}

pub async fn resume(b: &RedisBackend, queue: &str) -> Result<bool, BackendError> {
    check_queue_name(queue)?;
    let mut inv = b.invoke(&b.scripts.resume_queue);
    inv.arg(queue);
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("resume queue"))?;
    Ok(n == 1)
}

pub async fn paused(b: &RedisBackend) -> Result<Vec<String>, BackendError> {
    let mut queues: Vec<String> = redis::cmd("SMEMBERS")
        .arg(b.keys.paused())
        .query_async(&mut b.conn())
        .await
        .map_err(store("list paused queues"))?;
    queues.sort();
    Ok(queues)
}
