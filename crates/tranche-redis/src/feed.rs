//! The change feed: a stream with one entry per script that changed jobs, appended by
//! that script, so events appear in commit order and all at once. An entry's id is its
//! last event's seq (`<seq>-0`) and it carries its events packed (see [`unpack`]), so
//! a batch of a thousand changes costs Redis one XADD.

use std::collections::HashMap;
use std::time::Duration;

use redis::streams::StreamRangeReply;
use tranche_backend::{long_poll, Answer};
use tranche_types::{BackendError, JobEvent, JobId, JobState, RunName, Timestamp};

use crate::{store, RedisBackend};

pub async fn events(
    b: &RedisBackend,
    after: u64,
    limit: usize,
    wait: Duration,
) -> Result<Vec<JobEvent>, BackendError> {
    let limit = limit.max(1);
    long_poll(
        b.notifier.feed(),
        wait,
        b.options.poll_interval,
        b.options.clock.as_ref(),
        || async move {
            let events = read(b, after, limit).await?;
            Ok(if events.is_empty() {
                Answer::NotYet { next_due: None }
            } else {
                Answer::Ready(events)
            })
        },
    )
    .await
}

/// Entries fetched per XRANGE: each holds one script's events (up to a batch of
/// thousands), so a few entries usually fill a page.
const ENTRIES_PER_READ: usize = 16;

async fn read(b: &RedisBackend, after: u64, limit: usize) -> Result<Vec<JobEvent>, BackendError> {
    let mut events = Vec::new();
    let mut from = after;
    loop {
        let reply: StreamRangeReply = redis::cmd("XRANGE")
            .arg(b.keys.feed())
            .arg(format!("({from}-0"))
            .arg("+")
            .arg("COUNT")
            .arg(ENTRIES_PER_READ)
            .query_async(&mut b.conn())
            .await
            .map_err(store("read events"))?;
        let entries = reply.ids.len();
        for entry in &reply.ids {
            from = unpack(entry, after, &mut events)?;
            if events.len() >= limit {
                events.truncate(limit);
                return Ok(events);
            }
        }
        if entries < ENTRIES_PER_READ {
            return Ok(events);
        }
    }
}

/// Appends an entry's events newer than `after`; returns the entry's last seq. An entry
/// (written by `emit_events` in common.lua) has id `<last seq>-0` and fields `n` (event
/// count), `a` (time), `r` (its runs, space-separated) and `e` (per event
/// `job,state,run index`, space-separated, in seq order).
fn unpack(
    entry: &redis::streams::StreamId,
    after: u64,
    events: &mut Vec<JobEvent>,
) -> Result<u64, BackendError> {
    let bad = |what: String| BackendError::store("read events", what);
    let last: u64 = entry
        .id
        .split('-')
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("unexpected entry id {}", entry.id)))?;
    let map: &HashMap<String, redis::Value> = &entry.map;
    let field = |k: &str| -> Result<String, BackendError> {
        map.get(k)
            .and_then(|v| redis::from_redis_value::<String>(v).ok())
            .ok_or_else(|| bad(format!("feed entry {last} has no {k}")))
    };
    let number = |text: &str, what: &str| -> Result<i64, BackendError> {
        text.parse().map_err(|_| {
            bad(format!(
                "feed entry {last}: {what} {text:?} is not a number"
            ))
        })
    };
    let n = number(&field("n")?, "n")? as u64;
    let at = Timestamp(number(&field("a")?, "a")?);
    let runs = field("r")?
        .split(' ')
        .map(|r| RunName::new(r).map_err(|e| BackendError::store("read events", e)))
        .collect::<Result<Vec<_>, _>>()?;
    let first = (last + 1).saturating_sub(n);
    let packed = field("e")?;
    let mut count = 0u64;
    for (i, event) in packed.split(' ').enumerate() {
        count += 1;
        let seq = first + i as u64;
        if seq <= after {
            continue;
        }
        let mut parts = event.split(',');
        let (Some(job), Some(state), Some(run), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad(format!("feed entry {last}: malformed event {event:?}")));
        };
        let code = number(state, "state")?;
        let run = runs
            .get((number(run, "run index")? as usize).wrapping_sub(1))
            .ok_or_else(|| bad(format!("feed entry {last}: no run {run}")))?;
        events.push(JobEvent {
            seq,
            at,
            job: JobId(number(job, "job")?),
            run: run.clone(),
            state: JobState::from_code(code)
                .ok_or_else(|| bad(format!("unknown job state code {code}")))?,
        });
    }
    if count != n {
        return Err(bad(format!(
            "feed entry {last}: {count} events, expected {n}"
        )));
    }
    Ok(last)
}

pub async fn last(b: &RedisBackend) -> Result<u64, BackendError> {
    let seq: Option<u64> = redis::cmd("GET")
        .arg(b.keys.feed_seq())
        .query_async(&mut b.conn())
        .await
        .map_err(store("read the newest event"))?;
    Ok(seq.unwrap_or(0))
}
