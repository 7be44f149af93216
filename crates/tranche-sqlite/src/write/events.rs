//! The change feed, written compactly: one row per stretch of consecutive changes of
//! one transaction that share a run and a new state (a reserve of 1,000 jobs, a batch
//! of completions, a bulk enqueue), with the job ids packed as varint ranges. A row
//! per change would have cost the writer a fifth of its throughput.
//!
//! An event's `seq` is `row id << 16 | index in the row`. Row ids come from
//! AUTOINCREMENT inside the writer's serialised transactions, so they increase in
//! commit order and are never reused, and a reader's snapshot that holds a row holds
//! every row before it: the feed has no gaps.

use rusqlite::{params, Connection, OptionalExtension};
use tranche_types::{JobEvent, JobId, JobState, RunName, Timestamp};

use crate::error::UnknownState;

use super::{db, OpResult};

/// Most events in one row, so an index fits the low 16 bits of a seq.
const PER_ROW: usize = 1 << 16;

/// One job's move to a new state, for the feed.
#[derive(Clone, Copy, Debug)]
pub struct Change {
    pub job: i64,
    pub run: i64,
    pub state: JobState,
}

pub fn append(conn: &Connection, at: Timestamp, events: &[Change]) -> OpResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut stmt = conn
        .prepare_cached("INSERT INTO events (at, run_id, state, jobs) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db("record events"))?;
    let mut start = 0;
    while start < events.len() {
        let Change { run, state, .. } = events[start];
        let mut end = start + 1;
        while end < events.len()
            && end - start < PER_ROW
            && events[end].run == run
            && events[end].state == state
        {
            end += 1;
        }
        let jobs = pack(events[start..end].iter().map(|e| e.job));
        stmt.execute(params![at.0, run, state.code(), jobs])
            .map_err(db("record events"))?;
        start = end;
    }
    Ok(())
}

/// Events with `seq > after`, in order, at most `limit`.
pub fn read(conn: &Connection, after: u64, limit: usize) -> OpResult<Vec<JobEvent>> {
    let (after_row, after_index) = ((after >> 16) as i64, (after & 0xFFFF) as usize);
    let mut stmt = conn
        .prepare_cached(
            "SELECT e.id, e.at, r.name, e.state, e.jobs FROM events e JOIN runs r ON r.id = e.run_id
             WHERE e.id >= ?1 ORDER BY e.id LIMIT ?2",
        )
        .map_err(db("read events"))?;
    // One row more than events wanted: the cursor's own row may have nothing left.
    let mut rows = stmt
        .query(params![after_row, limit as i64 + 1])
        .map_err(db("read events"))?;
    let mut out = Vec::with_capacity(limit.min(4096));
    while let Some(r) = rows.next().map_err(db("read events"))? {
        let (row, at, name, state, jobs): (i64, i64, String, i64, Vec<u8>) = (
            r.get(0).map_err(db("read events"))?,
            r.get(1).map_err(db("read events"))?,
            r.get(2).map_err(db("read events"))?,
            r.get(3).map_err(db("read events"))?,
            r.get(4).map_err(db("read events"))?,
        );
        let run =
            RunName::new(name).map_err(|e| tranche_types::BackendError::store("read events", e))?;
        let state = JobState::from_code(state).ok_or_else(|| {
            tranche_types::BackendError::store("read events", UnknownState(state))
        })?;
        for (i, job) in unpack(&jobs).enumerate() {
            if row == after_row && i <= after_index {
                continue;
            }
            if out.len() == limit {
                return Ok(out);
            }
            out.push(JobEvent {
                seq: ((row as u64) << 16) | i as u64,
                at: Timestamp(at),
                job: JobId(job),
                run: run.clone(),
                state,
            });
        }
    }
    Ok(out)
}

pub fn last(conn: &Connection) -> OpResult<u64> {
    let row: Option<(i64, Vec<u8>)> = conn
        .prepare_cached("SELECT id, jobs FROM events ORDER BY id DESC LIMIT 1")
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db("read the newest event"))?;
    Ok(row.map_or(0, |(id, jobs)| {
        let n = unpack(&jobs).count() as u64;
        ((id as u64) << 16) | n.saturating_sub(1)
    }))
}

/// Ids as (gap from the previous range's end, zig-zagged; length) varint pairs, in the
/// order given: consecutive ids, the common case, cost two or three bytes per range.
fn pack(ids: impl Iterator<Item = i64>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev_end = 0i64;
    let mut range: Option<(i64, u64)> = None;
    let flush = |out: &mut Vec<u8>, (start, len): (i64, u64), prev_end: &mut i64| {
        let gap = start.wrapping_sub(*prev_end);
        varint(out, ((gap << 1) ^ (gap >> 63)) as u64);
        varint(out, len);
        *prev_end = start + len as i64;
    };
    for id in ids {
        range = match range {
            Some((start, len)) if start + len as i64 == id => Some((start, len + 1)),
            Some(r) => {
                flush(&mut out, r, &mut prev_end);
                Some((id, 1))
            }
            None => Some((id, 1)),
        };
    }
    if let Some(r) = range {
        flush(&mut out, r, &mut prev_end);
    }
    out
}

fn unpack(bytes: &[u8]) -> impl Iterator<Item = i64> + '_ {
    let mut pos = 0;
    let mut prev_end = 0i64;
    std::iter::from_fn(move || {
        if pos >= bytes.len() {
            return None;
        }
        let zz = read_varint(bytes, &mut pos);
        let len = read_varint(bytes, &mut pos);
        let gap = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        let start = prev_end.wrapping_add(gap);
        prev_end = start + len as i64;
        Some(start..prev_end)
    })
    .flatten()
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(bytes: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = bytes.get(*pos) {
        *pos += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_in_order() {
        let cases: Vec<Vec<i64>> = vec![
            vec![1],
            (1..=1000).collect(),
            vec![5, 6, 7, 3, 4, 100, 99, 98, 1 << 40, 2],
        ];
        for ids in cases {
            let packed = pack(ids.iter().copied());
            assert_eq!(unpack(&packed).collect::<Vec<_>>(), ids);
        }
        assert!(pack(1..=1000).len() <= 4, "a range packs to a few bytes");
    }
}
