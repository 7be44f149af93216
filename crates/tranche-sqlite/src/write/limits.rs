//! Rate limits and running caps (tables `limits` and `limit_starts`, migration 7).
//!
//! The writer keeps the declared limits in its cache ([`LimitSet`]), loaded on the
//! first reserve after a change: by this writer (put or delete), or by another process
//! (its commit moves `data_version`, which the writer reads at the start of every
//! transaction anyway, and which clears the cache). So a reserve of a queue with no
//! limit, while no kind has one, costs no read at all: the bulk path is unchanged.
//!
//! A limited reserve (see [`reserve`]) counts the scope's running jobs (the partial
//! index of running jobs: O(running)) and its starts in the window (`limit_starts`, one
//! row per granting reserve, the expired ones deleted as it goes), so every count is
//! read from the jobs themselves and nothing can leak: a job leaving running in any
//! way (a killed worker's expired lease included) frees its slot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use const_format::formatcp;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};
use tranche_types::{BackendError, Limit, LimitScope, LimitStatus, StartRate, Timestamp};

use super::reserve::{lease_rows, next_scheduled, ReadyRow, Reserved};
use super::{db, Op, OpResult};
use crate::states::{AVAILABLE, RUNNING};

/// One scope's limit as the writer applies it.
#[derive(Clone, Copy, Debug)]
pub struct Conf {
    /// (starts, window in µs).
    pub starts: Option<(u64, i64)>,
    pub running: Option<u64>,
}

/// Every declared limit, by queue and by kind.
#[derive(Debug, Default)]
pub struct LimitSet {
    queues: HashMap<String, Conf>,
    kinds: HashMap<String, Conf>,
}

impl LimitSet {
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty() && self.kinds.is_empty()
    }

    /// Whether a reserve of `queue` must look at limits: the queue has one, or some
    /// kind does (any queue may hold jobs of it).
    fn applies_to(&self, queue: &str) -> bool {
        !self.kinds.is_empty() || self.queues.contains_key(queue)
    }
}

/// The limits as this transaction sees them, from the cache or read once.
pub fn current(op: &Op<'_>) -> OpResult<Arc<LimitSet>> {
    if let Some(set) = op.cache().limits.borrow().as_ref() {
        return Ok(set.clone());
    }
    let set = Arc::new(load(op.conn)?);
    *op.cache().limits.borrow_mut() = Some(set.clone());
    Ok(set)
}

/// Whether `queue`'s reserve is limited; `None` (no read made) for the bulk path.
pub fn for_queue(op: &Op<'_>, queue: &str) -> OpResult<Option<Arc<LimitSet>>> {
    let set = current(op)?;
    Ok(set.applies_to(queue).then_some(set))
}

fn load(conn: &Connection) -> OpResult<LimitSet> {
    let mut set = LimitSet::default();
    for (scope, conf) in rows(conn)? {
        match scope {
            LimitScope::Queue(q) => set.queues.insert(q, conf),
            LimitScope::Kind(k) => set.kinds.insert(k, conf),
        };
    }
    Ok(set)
}

fn rows(conn: &Connection) -> OpResult<Vec<(LimitScope, Conf)>> {
    conn.prepare_cached(
        "SELECT scope, name, starts, per_us, running FROM limits ORDER BY scope DESC, name",
    )
    .and_then(|mut s| {
        s.query_map([], |r| {
            let scope: String = r.get(0)?;
            let name: String = r.get(1)?;
            let starts: Option<i64> = r.get(2)?;
            let per_us: Option<i64> = r.get(3)?;
            let running: Option<i64> = r.get(4)?;
            Ok((scope, name, starts, per_us, running))
        })?
        .collect::<Result<Vec<_>, _>>()
    })
    .map_err(db("read limits"))?
    .into_iter()
    .map(|(scope, name, starts, per_us, running)| {
        let scope =
            LimitScope::parse(&scope, &name).map_err(|e| BackendError::store("read limits", e))?;
        let conf = Conf {
            starts: starts.zip(per_us).map(|(n, per)| (n as u64, per)),
            running: running.map(|k| k as u64),
        };
        Ok((scope, conf))
    })
    .collect()
}

fn forget_cached(op: &Op<'_>) {
    *op.cache().limits.borrow_mut() = None;
}

pub fn put(op: &mut Op<'_>, limit: &Limit) -> OpResult<bool> {
    limit.check()?;
    let (scope, name) = (limit.scope.scope_type(), limit.scope.name());
    let existed = op
        .conn
        .prepare_cached("SELECT 1 FROM limits WHERE scope = ?1 AND name = ?2")
        .and_then(|mut s| s.query_row([scope, name], |_| Ok(())).optional())
        .map_err(db("read limit"))?
        .is_some();
    op.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO limits (scope, name, starts, per_us, running)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![
                scope,
                name,
                limit.starts.map(|r| r.count),
                limit.starts.map(|r| r.per_us()),
                limit.running,
            ])
        })
        .map_err(db("store limit"))?;
    if limit.starts.is_none() {
        clear_window(op, scope, name)?;
    }
    forget_cached(op);
    // A raised limit lets waiting reserves go now.
    op.wake_all();
    Ok(!existed)
}

pub fn delete(op: &mut Op<'_>, scope: &LimitScope) -> OpResult<bool> {
    scope.check()?;
    let (kind, name) = (scope.scope_type(), scope.name());
    let n = op
        .conn
        .prepare_cached("DELETE FROM limits WHERE scope = ?1 AND name = ?2")
        .and_then(|mut s| s.execute([kind, name]))
        .map_err(db("delete limit"))?;
    clear_window(op, kind, name)?;
    forget_cached(op);
    if n == 1 {
        op.wake_all();
    }
    Ok(n == 1)
}

fn clear_window(op: &Op<'_>, scope: &str, name: &str) -> OpResult<()> {
    op.conn
        .prepare_cached("DELETE FROM limit_starts WHERE scope = ?1 AND name = ?2")
        .and_then(|mut s| s.execute([scope, name]))
        .map_err(db("clear limit window"))?;
    Ok(())
}

/// Every limit with its use now, on the read connection.
pub fn read(conn: &Connection, now: Timestamp) -> OpResult<Vec<LimitStatus>> {
    let mut out = Vec::new();
    for (scope, conf) in rows(conn)? {
        let running_now = running(conn, &scope)?;
        let starts_in_window = match conf.starts {
            Some((_, per)) => conn
                .prepare_cached(
                    "SELECT COALESCE(SUM(n), 0) FROM limit_starts
                     WHERE scope = ?1 AND name = ?2 AND at > ?3",
                )
                .and_then(|mut s| {
                    s.query_row(
                        params![scope.scope_type(), scope.name(), now.0 - per],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .map_err(db("count starts in window"))? as u64,
            None => 0,
        };
        out.push(LimitStatus {
            limit: Limit {
                scope,
                starts: conf.starts.map(|(count, per)| StartRate {
                    count: count as u32,
                    per_ms: (per / 1000) as u64,
                }),
                running: conf.running.map(|k| k as u32),
            },
            running_now,
            starts_in_window,
        });
    }
    Ok(out)
}

/// The scope's jobs running now (the partial index of running jobs).
fn running(conn: &Connection, scope: &LimitScope) -> OpResult<u64> {
    let sql = match scope {
        LimitScope::Queue(_) => {
            formatcp!("SELECT COUNT(*) FROM jobs WHERE state = {RUNNING} AND queue = ?1")
        }
        LimitScope::Kind(_) => {
            formatcp!("SELECT COUNT(*) FROM jobs WHERE state = {RUNNING} AND kind = ?1")
        }
    };
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_row([scope.name()], |r| r.get::<_, i64>(0)))
        .map(|n| n as u64)
        .map_err(db("count running jobs"))
}

/// How many of the scope's jobs may start now, and, when none may, when one may
/// (`None`: only a job leaving running frees one).
fn budget(op: &Op<'_>, scope: &LimitScope, conf: &Conf) -> OpResult<(u64, Option<Timestamp>)> {
    let mut free = u64::MAX;
    if let Some(k) = conf.running {
        free = k.saturating_sub(running(op.conn, scope)?);
    }
    let mut next = None;
    if let Some((count, per)) = conf.starts {
        let (used, next_free) = window(op, scope, count, per)?;
        let by_rate = count.saturating_sub(used);
        if by_rate < free {
            free = by_rate;
        }
        if by_rate == 0 {
            next = next_free;
        }
    }
    Ok((free, if free == 0 { next } else { None }))
}

/// Starts within the window ending now, after dropping the expired ones, and when
/// the window next has room (when it is full).
fn window(
    op: &Op<'_>,
    scope: &LimitScope,
    count: u64,
    per: i64,
) -> OpResult<(u64, Option<Timestamp>)> {
    let (kind, name) = (scope.scope_type(), scope.name());
    op.conn
        .prepare_cached("DELETE FROM limit_starts WHERE scope = ?1 AND name = ?2 AND at <= ?3")
        .and_then(|mut s| s.execute(params![kind, name, op.now.0 - per]))
        .map_err(db("expire limit starts"))?;
    let entries: Vec<(i64, i64)> = op
        .conn
        .prepare_cached("SELECT at, n FROM limit_starts WHERE scope = ?1 AND name = ?2 ORDER BY at")
        .and_then(|mut s| {
            s.query_map([kind, name], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
        .map_err(db("read limit starts"))?;
    let used: u64 = entries.iter().map(|(_, n)| *n as u64).sum();
    if used < count {
        return Ok((used, None));
    }
    // The window has room once enough of its oldest starts have aged out of it.
    let mut left = used;
    for (at, n) in entries {
        left -= n as u64;
        if left < count {
            return Ok((used, Some(Timestamp(at + per))));
        }
    }
    Ok((used, None))
}

fn record_starts(op: &Op<'_>, scope: &LimitScope, n: u64) -> OpResult<()> {
    op.conn
        .prepare_cached(
            "INSERT INTO limit_starts (scope, name, at, n) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, name, at) DO UPDATE SET n = n + excluded.n",
        )
        .and_then(|mut s| {
            s.execute(params![
                scope.scope_type(),
                scope.name(),
                op.now.0,
                n as i64
            ])
        })
        .map_err(db("record limit starts"))?;
    Ok(())
}

/// The earlier of two optional times.
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// A reserve of `queue` under limits: as many jobs as the queue's limit leaves room
/// for, in ready order, skipping (not leasing, no attempt used) jobs whose kind is at
/// its limit.
pub fn reserve(
    op: &mut Op<'_>,
    set: &LimitSet,
    queue: &str,
    max: usize,
    lease: Duration,
) -> OpResult<Reserved> {
    let queue_scope = LimitScope::Queue(queue.to_string());
    let queue_conf = set.queues.get(queue);
    let mut room = max as u64;
    if let Some(conf) = queue_conf {
        let (free, next) = budget(op, &queue_scope, conf)?;
        room = room.min(free);
        if room == 0 {
            return Ok(Reserved {
                jobs: Vec::new(),
                next_at: next,
            });
        }
    }
    // Kinds met so far: how many more may start, and when a full one has room again.
    let mut kind_room: HashMap<String, u64> = HashMap::new();
    let mut kind_next: Option<Timestamp> = None;
    let mut full: Vec<String> = Vec::new();
    let mut taken: Vec<ReadyRow> = Vec::new();
    let mut started_kinds: HashMap<String, u64> = HashMap::new();
    let lease_until = op.now.plus(lease);
    while room > 0 {
        let rows = ready_rows(op, queue, &full, room)?;
        let mut newly_full = false;
        for row in rows {
            if room == 0 {
                break;
            }
            if let Some(conf) = set.kinds.get(&row.kind) {
                let left = match kind_room.get(&row.kind) {
                    Some(left) => *left,
                    None => {
                        let (free, next) = budget(op, &LimitScope::Kind(row.kind.clone()), conf)?;
                        kind_next = earliest(kind_next, next);
                        kind_room.insert(row.kind.clone(), free);
                        free
                    }
                };
                if left == 0 {
                    if !full.contains(&row.kind) {
                        full.push(row.kind.clone());
                        newly_full = true;
                    }
                    continue;
                }
                kind_room.insert(row.kind.clone(), left - 1);
                if conf.starts.is_some() {
                    *started_kinds.entry(row.kind.clone()).or_default() += 1;
                }
            }
            lease_one(op, row.id, lease_until)?;
            taken.push(row);
            room -= 1;
        }
        // Either the room is filled or the queue has no more ready jobs, unless a kind
        // filled up in this batch: its jobs took rows that others behind may have.
        if !newly_full {
            break;
        }
    }
    if !taken.is_empty() {
        if queue_conf.is_some_and(|c| c.starts.is_some()) {
            record_starts(op, &queue_scope, taken.len() as u64)?;
        }
        for (kind, n) in started_kinds {
            record_starts(op, &LimitScope::Kind(kind), n)?;
        }
    }
    let jobs = lease_rows(op, queue, taken, lease_until)?;
    let next_at = if jobs.is_empty() {
        earliest(kind_next, next_scheduled(op, queue)?)
    } else {
        None
    };
    Ok(Reserved { jobs, next_at })
}

/// Up to `limit` ready jobs of `queue` in ready order, leaving out the kinds in `full`.
fn ready_rows(op: &Op<'_>, queue: &str, full: &[String], limit: u64) -> OpResult<Vec<ReadyRow>> {
    let mut sql = String::from(formatcp!(
        "SELECT id, run_id, kind, args, input, attempt, max_attempts, available_at, next_id, group_id
         FROM jobs WHERE state = {AVAILABLE} AND queue = ?1 AND available_at <= ?2"
    ));
    if !full.is_empty() {
        sql.push_str(" AND kind NOT IN (");
        for i in 0..full.len() {
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&format!("?{}", i + 4));
        }
        sql.push(')');
    }
    sql.push_str(" ORDER BY priority, available_at, id LIMIT ?3");
    let mut values: Vec<rusqlite::types::Value> = vec![
        queue.to_string().into(),
        op.now.0.into(),
        (limit.min(i64::MAX as u64) as i64).into(),
    ];
    values.extend(full.iter().map(|k| k.clone().into()));
    op.conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(params_from_iter(values), ReadyRow::from_row)?
                .collect()
        })
        .map_err(db("find ready jobs"))
}

fn lease_one(op: &Op<'_>, id: i64, lease_until: Timestamp) -> OpResult<()> {
    op.conn
        .prepare_cached(formatcp!(
            "UPDATE jobs SET state = {RUNNING}, attempt = attempt + 1, lease_until = ?1, started_at = ?2
             WHERE id = ?3 AND state = {AVAILABLE}"
        ))
        .and_then(|mut s| s.execute(params![lease_until.0, op.now.0, id]))
        .map_err(db("lease job"))?;
    Ok(())
}
