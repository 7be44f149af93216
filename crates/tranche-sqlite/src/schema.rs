//! The database layout. Run counters live on the run row and move with every state
//! change; partial indexes cover only the rows a hot query needs (ready jobs, leased
//! jobs, failed jobs), so finished jobs cost nothing on the hot path.

use rusqlite::Connection;

/// 2: the change feed (`events`). Older binaries must not write to a database that
/// has one: their changes would be missing from it.
/// 3: per-queue statistics (`queue_stats`), for the same reason. A database of an
/// older version gets the table on open; its counters start from zero then.
pub const VERSION: i64 = 3;

const DDL: &str = r#"
CREATE TABLE IF NOT EXISTS runs (
    id           INTEGER PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    total        INTEGER NOT NULL DEFAULT 0,
    pending      INTEGER NOT NULL DEFAULT 0,
    available    INTEGER NOT NULL DEFAULT 0,
    running      INTEGER NOT NULL DEFAULT 0,
    succeeded    INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    cancelled    INTEGER NOT NULL DEFAULT 0,
    finished_at  INTEGER,
    finishes     INTEGER NOT NULL DEFAULT 0,
    on_done      TEXT
);
-- No NOT NULL constraints on jobs: a constraint that can fail makes SQLite open a
-- statement journal for every UPDATE, which cost a third of the writer's time. The
-- writer is the only code that writes these rows and always sets every column.
CREATE TABLE IF NOT EXISTS jobs (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER,
    kind            TEXT,
    queue           TEXT,
    state           INTEGER,
    priority        INTEGER DEFAULT 0,
    attempt         INTEGER DEFAULT 0,
    max_attempts    INTEGER,
    available_at    INTEGER,
    lease_until     INTEGER,
    created_at      INTEGER,
    started_at      INTEGER,
    finished_at     INTEGER,
    next_id         INTEGER,
    group_id        INTEGER,
    upstream_failed INTEGER DEFAULT 0,
    unique_key      TEXT,
    args            TEXT,
    input           TEXT,
    result          TEXT,
    error           TEXT
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(queue, priority, available_at, id) WHERE state = 1;
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs(lease_until) WHERE state = 2;
CREATE INDEX IF NOT EXISTS jobs_run ON jobs(run_id);
CREATE INDEX IF NOT EXISTS jobs_failed ON jobs(run_id, id) WHERE state = 4;
CREATE INDEX IF NOT EXISTS jobs_group ON jobs(group_id, id) WHERE group_id IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON jobs(run_id, unique_key) WHERE unique_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS groups (
    id          INTEGER PRIMARY KEY,
    remaining   INTEGER NOT NULL,
    callback_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS job_errors (
    job_id  INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    at      INTEGER NOT NULL,
    error   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_errors_job ON job_errors(job_id);
CREATE TABLE IF NOT EXISTS locks (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS effects (
    key    TEXT PRIMARY KEY,
    job_id INTEGER,
    value  TEXT NOT NULL,
    at     INTEGER NOT NULL
) WITHOUT ROWID;
-- The change feed; see write/events.rs. AUTOINCREMENT: an id is never reused, even
-- if the newest rows were ever pruned.
CREATE TABLE IF NOT EXISTS events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER,
    run_id INTEGER,
    state  INTEGER,
    jobs   BLOB
);
-- Cumulative statistics per queue; see write/stats.rs for the `stat` codes. Written
-- only by the writer, which always sets every column (no NOT NULL, as for jobs).
CREATE TABLE IF NOT EXISTS queue_stats (
    queue TEXT,
    stat  INTEGER,
    n     INTEGER,
    PRIMARY KEY (queue, stat)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS finish_hooks (
    run_id INTEGER NOT NULL,
    hook   TEXT NOT NULL,
    finish INTEGER NOT NULL,
    PRIMARY KEY (run_id, hook, finish)
) WITHOUT ROWID;
"#;

/// Connection settings: WAL so readers (`tranche status`) never block the writer;
/// `synchronous=NORMAL` is durable against a killed process (the WAL is in the OS page
/// cache), though not against power loss (use `Durability::Full` for that).
pub fn configure(conn: &Connection, full_sync: bool) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(
        None,
        "synchronous",
        if full_sync { "FULL" } else { "NORMAL" },
    )?;
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

pub fn migrate(conn: &Connection) -> Result<(), String> {
    let current: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if current > VERSION {
        return Err(format!(
            "expected a database of schema version {VERSION} or older, got {current}: it was written by a newer tranche"
        ));
    }
    conn.execute_batch(DDL).map_err(|e| e.to_string())?;
    conn.pragma_update(None, "user_version", VERSION)
        .map_err(|e| e.to_string())?;
    Ok(())
}
