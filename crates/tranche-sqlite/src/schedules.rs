//! The schedules table and its read. The table is made by the first schedule write
//! (`write/schedules.rs`), not by a migration: no other writer keeps it up to date, so
//! the file's version, and older binaries' access to it, are unchanged.

use rusqlite::Connection;
use tranche_types::{StoredSchedule, Timestamp};

use crate::write::{db, OpResult};

pub const TABLE: &str = "CREATE TABLE IF NOT EXISTS schedules (
    name       TEXT PRIMARY KEY,
    timing     TEXT NOT NULL,
    spec       TEXT NOT NULL,
    through    INTEGER NOT NULL,
    last_fired INTEGER
) WITHOUT ROWID;";

pub fn list(conn: &Connection) -> OpResult<Vec<StoredSchedule>> {
    let exists: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schedules'",
        )
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db("look for schedules"))?;
    if exists == 0 {
        return Ok(Vec::new());
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, timing, spec, through, last_fired FROM schedules ORDER BY name",
        )
        .map_err(db("read schedules"))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(StoredSchedule {
                name: r.get(0)?,
                timing: r.get(1)?,
                spec: r.get(2)?,
                through: Timestamp(r.get(3)?),
                last_fired: r.get::<_, Option<i64>>(4)?.map(Timestamp),
            })
        })
        .map_err(db("read schedules"))?;
    rows.collect::<Result<_, _>>().map_err(db("read schedules"))
}
