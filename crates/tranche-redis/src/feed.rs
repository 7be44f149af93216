//! The change feed: a stream whose entry ids are the seqs (`<seq>-0`), appended by the
//! same script as each change, so entries appear in commit order and all at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::streams::StreamRangeReply;
use tranche_types::{BackendError, JobEvent, JobId, JobState, RunName, Timestamp};

use crate::{store, RedisBackend};

pub async fn events(
    b: &RedisBackend,
    after: u64,
    limit: usize,
    wait: Duration,
) -> Result<Vec<JobEvent>, BackendError> {
    let deadline = Instant::now() + wait;
    let limit = limit.max(1);
    loop {
        // Registered before reading, so an append between the read and the wait still
        // wakes us.
        let notified = b.notifier.feed().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let events = read(b, after, limit).await?;
        let now = Instant::now();
        if !events.is_empty() || now >= deadline {
            return Ok(events);
        }
        let pause = (deadline - now).min(b.options.poll_interval);
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

async fn read(b: &RedisBackend, after: u64, limit: usize) -> Result<Vec<JobEvent>, BackendError> {
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(b.keys.feed())
        .arg(format!("({after}-0"))
        .arg("+")
        .arg("COUNT")
        .arg(limit)
        .query_async(&mut b.conn())
        .await
        .map_err(store("read events"))?;
    let bad = |what: String| BackendError::store("read events", what);
    reply
        .ids
        .into_iter()
        .map(|entry| {
            let seq = entry
                .id
                .split('-')
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(format!("unexpected entry id {}", entry.id)))?;
            let map: &HashMap<String, redis::Value> = &entry.map;
            let field = |k: &str| -> Result<String, BackendError> {
                map.get(k)
                    .and_then(|v| redis::from_redis_value::<String>(v).ok())
                    .ok_or_else(|| bad(format!("event {seq} has no {k}")))
            };
            let int = |k: &str| -> Result<i64, BackendError> {
                field(k)?
                    .parse()
                    .map_err(|_| bad(format!("event {seq}: {k} is not a number")))
            };
            let code = int("s")?;
            Ok(JobEvent {
                seq,
                at: Timestamp(int("a")?),
                job: JobId(int("j")?),
                run: RunName::new(field("r")?).map_err(|e| bad(e.to_string()))?,
                state: JobState::from_code(code)
                    .ok_or_else(|| bad(format!("unknown job state code {code}")))?,
            })
        })
        .collect()
}

pub async fn last(b: &RedisBackend) -> Result<u64, BackendError> {
    let seq: Option<u64> = redis::cmd("GET")
        .arg(b.keys.feed_seq())
        .query_async(&mut b.conn())
        .await
        .map_err(store("read the newest event"))?;
    Ok(seq.unwrap_or(0))
}
