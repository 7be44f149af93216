//! Commits (`commit.lua` + `enqueue.lua`, one script) and the records they write.
//! What can refuse a commit without looking at Redis (a record key, a spec) is checked
//! here, before the script runs: a Lua script that fails half way keeps its writes.

use tranche_types::{BackendError, Commit, CommitAck, Record, RecordWrite};

use crate::complete::push_completion;
use crate::enqueue::{enqueued, push_request};
use crate::{store, RedisBackend};

fn check_key(key: &str) -> Result<(), BackendError> {
    if key.is_empty() || key.len() > RecordWrite::MAX_KEY_LEN {
        return Err(BackendError::Invalid {
            field: "record key",
            expected: format!("1 to {} bytes", RecordWrite::MAX_KEY_LEN),
            got: format!("{} bytes", key.len()),
        });
    }
    Ok(())
}

pub async fn commit(b: &RedisBackend, commit: &Commit) -> Result<CommitAck, BackendError> {
    for write in &commit.records {
        check_key(&write.key)?;
    }
    let mut inv = b.invoke(&b.scripts.commit);
    match &commit.completion {
        Some(c) => {
            inv.arg("1");
            push_completion(&mut inv, c);
        }
        None => {
            inv.arg("0");
        }
    }
    inv.arg(commit.records.len());
    for write in &commit.records {
        inv.arg(&write.key)
            .arg(write.expect)
            .arg(&write.value)
            .arg(if write.ended { "1" } else { "0" });
    }
    inv.arg(commit.arrive.len());
    for gate in &commit.arrive {
        inv.arg(gate.0);
    }
    match &commit.enqueue {
        Some(req) => {
            inv.arg("1");
            push_request(&mut inv, req)?;
        }
        None => {
            inv.arg("0");
        }
    }
    let out: Vec<String> = inv
        .invoke_async(&mut b.conn())
        .await
        .map_err(store("commit"))?;
    match out.first().map(String::as_str) {
        Some("stale") => Ok(CommitAck::Stale),
        Some("conflict") => {
            let bad = || BackendError::store("commit", "unexpected conflict reply");
            let write = out
                .get(1)
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| commit.records.get(i.checked_sub(1)?))
                .ok_or_else(bad)?;
            let found = out.get(2).and_then(|f| f.parse().ok()).ok_or_else(bad)?;
            Err(BackendError::Conflict {
                key: write.key.clone(),
                expected: write.expect,
                found,
            })
        }
        _ => {
            let items = commit.enqueue.as_ref().map_or(0, |r| r.items.len());
            enqueued(&out, items).map(CommitAck::Applied)
        }
    }
}

/// One HMGET per key, in one MULTI: the records as of one moment.
pub async fn records(
    b: &RedisBackend,
    keys: &[String],
) -> Result<Vec<Option<Record>>, BackendError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    for key in keys {
        pipe.cmd("HMGET").arg(b.keys.record(key)).arg("v").arg("d");
    }
    let rows: Vec<(Option<u64>, Option<String>)> = pipe
        .query_async(&mut b.conn())
        .await
        .map_err(store("read records"))?;
    Ok(rows
        .into_iter()
        .map(|(version, value)| {
            Some(Record {
                version: version?,
                value: value.unwrap_or_default(),
            })
        })
        .collect())
}
