//! Schedules: `P sch:<name>` (hash: timing, spec, through, fired) and `P schs` (the
//! names). Writes are scripts; firing a due time claims it and enqueues in one
//! (`fire_schedule.lua` + `enqueue.lua`).

use std::collections::HashMap;

use tranche_types::ScheduleWrite;
use tranche_types::{BackendError, EnqueueRequest, Enqueued, StoredSchedule, Timestamp};

use crate::enqueue::{enqueued, push_request};
use crate::{store, RedisBackend};

pub async fn put(b: &RedisBackend, schedule: ScheduleWrite<'_>) -> Result<bool, BackendError> {
    let mut inv = b.invoke(&b.scripts.put_schedule);
    inv.arg(schedule.name)
        .arg(schedule.timing)
        .arg(schedule.spec)
        .arg(schedule.through.micros());
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("store schedule"))?;
    Ok(n == 1)
}

pub async fn delete(b: &RedisBackend, name: &str) -> Result<bool, BackendError> {
    let mut inv = b.invoke(&b.scripts.delete_schedule);
    inv.arg(name);
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("delete schedule"))?;
    Ok(n == 1)
}

pub async fn list(b: &RedisBackend) -> Result<Vec<StoredSchedule>, BackendError> {
    let mut conn = b.conn();
    let mut names: Vec<String> = redis::cmd("SMEMBERS")
        .arg(b.keys.schedules())
        .query_async(&mut conn)
        .await
        .map_err(store("read schedules"))?;
    names.sort();
    let mut pipe = redis::pipe();
    for name in &names {
        pipe.cmd("HGETALL").arg(b.keys.schedule(name));
    }
    let rows: Vec<HashMap<String, String>> = pipe
        .query_async(&mut conn)
        .await
        .map_err(store("read schedules"))?;
    let num = |f: &HashMap<String, String>, k: &str| f.get(k).and_then(|v| v.parse().ok());
    Ok(names
        .into_iter()
        .zip(rows)
        // Deleted between the two reads.
        .filter(|(_, f)| !f.is_empty())
        .map(|(name, f)| StoredSchedule {
            timing: f.get("timing").cloned().unwrap_or_default(),
            spec: f.get("spec").cloned().unwrap_or_default(),
            through: Timestamp(num(&f, "through").unwrap_or(0)),
            last_fired: num(&f, "fired").map(Timestamp),
            name,
        })
        .collect())
}

pub async fn fire(
    b: &RedisBackend,
    name: &str,
    due: Timestamp,
    req: Option<&EnqueueRequest>,
) -> Result<Option<Vec<Enqueued>>, BackendError> {
    let mut inv = b.invoke(&b.scripts.fire_schedule);
    inv.arg(name)
        .arg(due.micros())
        .arg(if req.is_some() { "1" } else { "0" });
    if let Some(req) = req {
        push_request(&mut inv, req)?;
    }
    let out: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("fire schedule"))?;
    if out.first().map(String::as_str) == Some("lost") {
        return Ok(None);
    }
    enqueued(&out, req.map_or(0, |r| r.items.len())).map(Some)
}
