//! Per-queue statistics ([`QueueStats`]): attempts started, outcomes, retries, lease
//! expiries and wait/run histograms, recorded where the writer applies each of them,
//! so a reader sees the work of every process sharing the file.
//!
//! Each operation adds to an in-memory delta per queue (a fixed array of counters);
//! the transaction writes the non-zero ones once, just before it commits, with one
//! upsert per touched (queue, stat) row of `queue_stats` — a batch of a thousand
//! completions costs a handful of row writes, not a thousand.

use std::sync::Arc;

use rusqlite::{params, Connection};
use tranche_types::{latency_bucket, Histogram, QueueStats, LATENCY_BUCKETS_MS};

use super::{db, OpResult};

const BUCKETS: usize = LATENCY_BUCKETS_MS.len() + 1;

// The `stat` codes stored in `queue_stats`: on disk, so never renumbered.
const STARTED: usize = 0;
const SUCCEEDED: usize = 1;
const FAILED: usize = 2;
const RETRIED: usize = 3;
const EXPIRED: usize = 4;
/// Sum of wait times (µs), then the wait histogram's buckets.
const WAIT_SUM: usize = 5;
const WAIT: usize = WAIT_SUM + 1;
/// Sum of run times (µs), then the run histogram's buckets.
const RUN_SUM: usize = WAIT + BUCKETS;
const RUN: usize = RUN_SUM + 1;
const STATS: usize = RUN + BUCKETS;

/// How an attempt that held its lease until its result ended.
#[derive(Clone, Copy, Debug)]
pub enum AttemptEnd {
    Succeeded,
    /// Its job ended failed.
    Failed,
    /// Its job will run again.
    Retried,
}

/// Counter deltas per queue, for one operation or one transaction. A list, not a hash
/// map: a transaction touches a queue or a few, and hashing the queue name for every
/// job cost more than all the rest of the statistics.
#[derive(Default)]
pub struct QueueDeltas(Vec<(Arc<str>, [i64; STATS])>);

impl QueueDeltas {
    fn of(&mut self, queue: &str) -> &mut [i64; STATS] {
        let i = match self.0.iter().position(|(q, _)| **q == *queue) {
            Some(i) => i,
            None => {
                self.0.push((Arc::from(queue), [0; STATS]));
                self.0.len() - 1
            }
        };
        &mut self.0[i].1
    }

    /// Attempts reserved, given how long each job had been runnable (µs).
    pub fn started(&mut self, queue: &str, waits: impl Iterator<Item = i64>) {
        let d = self.of(queue);
        for wait in waits {
            let wait = wait.max(0);
            d[STARTED] += 1;
            d[WAIT_SUM] += wait;
            d[WAIT + latency_bucket(wait)] += 1;
        }
    }

    /// An attempt's result was applied, `run` µs after it was reserved.
    pub fn ended(&mut self, queue: &str, how: AttemptEnd, run: i64) {
        let run = run.max(0);
        let d = self.of(queue);
        d[match how {
            AttemptEnd::Succeeded => SUCCEEDED,
            AttemptEnd::Failed => FAILED,
            AttemptEnd::Retried => RETRIED,
        }] += 1;
        d[RUN_SUM] += run;
        d[RUN + latency_bucket(run)] += 1;
    }

    /// A lease expired and its job was recovered; `failed`: that was its last attempt.
    pub fn expired(&mut self, queue: &str, failed: bool) {
        let d = self.of(queue);
        d[EXPIRED] += 1;
        if failed {
            d[FAILED] += 1;
        }
    }

    pub fn merge(&mut self, other: QueueDeltas) {
        if self.0.is_empty() {
            self.0 = other.0;
            return;
        }
        for (queue, add) in other.0 {
            let d = self.of(&queue);
            for (n, a) in d.iter_mut().zip(add) {
                *n += a;
            }
        }
    }

    /// Add the deltas to `queue_stats` (one upsert per non-zero one) and clear them.
    pub fn write(&mut self, conn: &Connection) -> OpResult<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO queue_stats (queue, stat, n) VALUES (?1, ?2, ?3)
                 ON CONFLICT (queue, stat) DO UPDATE SET n = n + excluded.n",
            )
            .map_err(db("record queue stats"))?;
        for (queue, d) in self.0.drain(..) {
            for (stat, n) in d.iter().enumerate() {
                if *n != 0 {
                    stmt.execute(params![&*queue, stat as i64, n])
                        .map_err(db("record queue stats"))?;
                }
            }
        }
        Ok(())
    }
}

/// Every queue's statistics, sorted by queue: O(queues × stats) rows.
pub fn read(conn: &Connection) -> OpResult<Vec<QueueStats>> {
    let rows: Vec<(String, i64, i64)> = conn
        .prepare_cached("SELECT queue, stat, n FROM queue_stats ORDER BY queue")
        .and_then(|mut s| {
            s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        })
        .map_err(db("read queue stats"))?;
    let mut out: Vec<(String, [i64; STATS])> = Vec::new();
    for (queue, stat, n) in rows {
        if out.last().is_none_or(|(q, _)| *q != queue) {
            out.push((queue, [0; STATS]));
        }
        let d = &mut out.last_mut().expect("pushed above").1;
        // Codes a newer version added are not known here.
        if let Some(v) = usize::try_from(stat).ok().and_then(|i| d.get_mut(i)) {
            *v = n;
        }
    }
    Ok(out.into_iter().map(|(q, d)| decode(q, &d)).collect())
}

fn decode(queue: String, d: &[i64; STATS]) -> QueueStats {
    let n = |i: usize| d[i].max(0) as u64;
    let histogram = |sum: usize, first: usize| {
        Histogram::from_parts((first..first + BUCKETS).map(n).collect(), d[sum])
    };
    QueueStats {
        started: n(STARTED),
        succeeded: n(SUCCEEDED),
        failed: n(FAILED),
        retried: n(RETRIED),
        expired: n(EXPIRED),
        wait: histogram(WAIT_SUM, WAIT),
        run: histogram(RUN_SUM, RUN),
        queue,
    }
}
