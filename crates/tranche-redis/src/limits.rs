//! Rate limits and running caps: `P lim`, `P lw:<scope>`, `P lsum` and `P krun` (see
//! `scripts/limits.lua`). The reserve script reads `P lim` in the same call that
//! leases, so a limit holds for every process of a fleet from the moment it is
//! stored, and a queue without limits pays one HMGET inside the script, no round trip.

use tranche_types::{BackendError, Limit, LimitScope, LimitStatus, StartRate};

use crate::{store, RedisBackend};

/// `q:<queue>` or `k:<kind>`.
fn scope_field(scope: &LimitScope) -> String {
    match scope {
        LimitScope::Queue(q) => format!("q:{q}"),
        LimitScope::Kind(k) => format!("k:{k}"),
    }
}

/// `count|per_us|running`, a part empty when unset.
fn pack(limit: &Limit) -> String {
    let (count, per) = match limit.starts {
        Some(r) => (r.count.to_string(), r.per_us().to_string()),
        None => (String::new(), String::new()),
    };
    let running = limit.running.map(|k| k.to_string()).unwrap_or_default();
    format!("{count}|{per}|{running}")
}

fn unpack(scope: &str, packed: &str) -> Option<Limit> {
    let scope = match scope.split_once(':')? {
        ("q", name) => LimitScope::Queue(name.to_string()),
        ("k", name) => LimitScope::Kind(name.to_string()),
        _ => return None,
    };
    let mut parts = packed.split('|');
    let (count, per, running) = (parts.next()?, parts.next()?, parts.next()?);
    let starts = match (count, per) {
        ("", "") => None,
        (c, p) => Some(StartRate {
            count: c.parse().ok()?,
            per_ms: p.parse::<u64>().ok()? / 1000,
        }),
    };
    let running = match running {
        "" => None,
        k => Some(k.parse().ok()?),
    };
    Some(Limit {
        scope,
        starts,
        running,
    })
}

pub async fn put(b: &RedisBackend, limit: &Limit) -> Result<bool, BackendError> {
    limit.check()?;
    let mut inv = b.invoke(&b.scripts.put_limit);
    inv.arg(scope_field(&limit.scope)).arg(pack(limit));
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("store limit"))?;
    Ok(n == 1)
}

pub async fn delete(b: &RedisBackend, scope: &LimitScope) -> Result<bool, BackendError> {
    scope.check()?;
    let mut inv = b.invoke(&b.scripts.delete_limit);
    inv.arg(scope_field(scope));
    let n: i64 = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("delete limit"))?;
    Ok(n == 1)
}

pub async fn list(b: &RedisBackend) -> Result<Vec<LimitStatus>, BackendError> {
    let inv = b.invoke(&b.scripts.read_limits);
    let rows: Vec<(String, String, i64, i64)> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("read limits"))?;
    let mut out = Vec::with_capacity(rows.len());
    for (scope, packed, running_now, in_window) in rows {
        let limit = unpack(&scope, &packed).ok_or_else(|| {
            BackendError::store(
                "read limits",
                format!("limit {scope:?}: expected count|per_us|running, got {packed:?}"),
            )
        })?;
        out.push(LimitStatus {
            limit,
            running_now: running_now.max(0) as u64,
            starts_in_window: in_window.max(0) as u64,
        });
    }
    out.sort_by(|a, b| a.limit.scope.cmp(&b.limit.scope));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_packs_and_unpacks() {
        for limit in [
            Limit {
                scope: LimitScope::Queue("bank".into()),
                starts: Some(StartRate {
                    count: 1,
                    per_ms: 15_000,
                }),
                running: None,
            },
            Limit {
                scope: LimitScope::Kind("smtp:send".into()),
                starts: None,
                running: Some(2),
            },
        ] {
            let field = scope_field(&limit.scope);
            assert_eq!(unpack(&field, &pack(&limit)), Some(limit));
        }
    }
}
