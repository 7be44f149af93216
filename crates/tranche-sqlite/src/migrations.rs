//! The schema's history, oldest first: migration N brings a file to schema version N
//! (SQLite's `user_version`). A new file runs them all; an older one only those past
//! its version. Append, never edit: files of every version exist.
//!
//! Each statement is written as if it might already have run (`IF NOT EXISTS`): two
//! processes opening an older file together can both apply the same migration, one
//! after the other. Texts are kept as the first versions wrote them, so every file has
//! the same `sqlite_master`, whichever path it came by.
//!
//! Older binaries refuse a file of a newer version (their changes would be missing
//! from the tables they do not know), so a version is added only when a new table or
//! column must be kept up to date by every writer.

use const_format::formatcp;
use rusqlite_migration::{Migrations, M};

use crate::states::{AVAILABLE, FAILED, RUNNING};

const HISTORY: &[M<'static>] = &[
    M::up(JOBS).comment("1: runs, jobs, groups, locks, effects, finish hooks"),
    M::up(CHANGE_FEED).comment("2: the change feed (events)"),
    M::up(QUEUE_STATS).comment("3: per-queue statistics (queue_stats), from zero on upgrade"),
    M::up(UNIQUE_WINDOWS).comment("4: unique keys with a window, across runs (unique_windows)"),
    M::up(PAUSED_QUEUES).comment("5: paused queues (paused_queues), none on upgrade"),
    M::up(JOB_LISTING).comment("6: deleted job ids are never given again (job_id_floor)"),
    M::up(JOB_TRACES).comment("7: trace contexts of traced jobs (job_traces), none on upgrade"),
    M::up(LIMITS)
        .comment("8: rate limits and running caps (limits, limit_starts), none on upgrade"),
    M::up(COMMITS).comment("9: records and gates, for workflows' commits, none on upgrade"),
    M::up(RECORD_RETENTION)
        .comment("10: records written ended are forgotten after the retention (ended_at)"),
];

pub const MIGRATIONS: Migrations<'static> = Migrations::from_slice(HISTORY);

/// The schema version this binary writes.
pub const VERSION: usize = HISTORY.len();

const JOBS: &str = formatcp!(
    r#"
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
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(queue, priority, available_at, id) WHERE state = {AVAILABLE};
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs(lease_until) WHERE state = {RUNNING};
CREATE INDEX IF NOT EXISTS jobs_run ON jobs(run_id);
CREATE INDEX IF NOT EXISTS jobs_failed ON jobs(run_id, id) WHERE state = {FAILED};
{JOBS_GROUP}
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
CREATE TABLE IF NOT EXISTS finish_hooks (
    run_id INTEGER NOT NULL,
    hook   TEXT NOT NULL,
    finish INTEGER NOT NULL,
    PRIMARY KEY (run_id, hook, finish)
) WITHOUT ROWID;
"#
);

/// Group members, indexed so collecting a group's outcomes reads only them. Added
/// while files stayed at version 1, so version 2 creates it too for those files.
const JOBS_GROUP: &str =
    "CREATE INDEX IF NOT EXISTS jobs_group ON jobs(group_id, id) WHERE group_id IS NOT NULL;";

/// See write/events.rs. AUTOINCREMENT: an id is never reused, even if the newest rows
/// were ever pruned.
const CHANGE_FEED: &str = formatcp!(
    r#"
{JOBS_GROUP}
CREATE TABLE IF NOT EXISTS events (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    at     INTEGER,
    run_id INTEGER,
    state  INTEGER,
    jobs   BLOB
);
"#
);

/// See write/stats.rs for the `stat` codes. Written only by the writer, which always
/// sets every column (no NOT NULL, as for jobs).
const QUEUE_STATS: &str = r#"
CREATE TABLE IF NOT EXISTS queue_stats (
    queue TEXT,
    stat  INTEGER,
    n     INTEGER,
    PRIMARY KEY (queue, stat)
) WITHOUT ROWID;
"#;

/// One row per job enqueued with `unique_for` (see write/unique.rs): its key and when
/// its window ends. Kept as long as its job (retention removes it with the job), so the job's
/// record still shows its key. The index finds a key's newest job: an index on `key`
/// keeps its entries in rowid (job id) order within the key.
const UNIQUE_WINDOWS: &str = r#"
CREATE TABLE IF NOT EXISTS unique_windows (
    job_id     INTEGER PRIMARY KEY,
    key        TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS unique_windows_key ON unique_windows(key);
"#;

/// See write/pause.rs. Every writer must check it before leasing (an older binary
/// would serve a paused queue), hence a version of its own.
const PAUSED_QUEUES: &str = r#"
CREATE TABLE IF NOT EXISTS paused_queues (
    queue TEXT PRIMARY KEY,
    since INTEGER
) WITHOUT ROWID;
"#;

/// `job_id_floor` keeps the largest id ever deleted (a job delete, retention), so that
/// an id is never given to another job (enqueue allocates past it): a listing's cursor
/// and the feed's events name one job forever. Listing jobs adds no index: an index per
/// filter cost the bulk path more than half its throughput (every state change moved
/// four index entries; `bench engine` 180,000 → 77,000 jobs/s), so a page reads a
/// bounded window of ids instead (`read_jobs.rs`).
const JOB_LISTING: &str = r#"
CREATE TABLE IF NOT EXISTS job_id_floor (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id  INTEGER NOT NULL
);
"#;

/// A job's trace context (see write/trace.rs), a row only for a job that has one: a
/// table rather than a column of `jobs`, because the bulk of jobs carry none (no
/// extra bound value per inserted row), and `ALTER TABLE ADD COLUMN` cannot be
/// written to run twice (two processes may migrate one file one after the other).
/// Rows go with their job (delete, retention).
const JOB_TRACES: &str = r#"
CREATE TABLE IF NOT EXISTS job_traces (
    job_id INTEGER PRIMARY KEY,
    trace  TEXT
);
"#;

/// See write/limits.rs. One row per declared limit (`scope` is 'queue' or 'kind'),
/// and per limit with a start rate the starts of its last window, one row per granting
/// reserve (`n` starts at `at`). Every writer must enforce them in reserve (an older
/// binary would not), hence a version of its own.
const LIMITS: &str = r#"
CREATE TABLE IF NOT EXISTS limits (
    scope       TEXT NOT NULL,
    name        TEXT NOT NULL,
    starts      INTEGER,
    per_us      INTEGER,
    running     INTEGER,
    PRIMARY KEY (scope, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS limit_starts (
    scope TEXT NOT NULL,
    name  TEXT NOT NULL,
    at    INTEGER NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (scope, name, at)
) WITHOUT ROWID;
"#;

/// See write/commit.rs. `records` are versioned documents (a workflow's state),
/// written only by commits; `gates` count the arrivals a pending job still awaits (a
/// workflow's JOIN), a row per gate until it is released. A version of its own: an
/// older writer would not release a gate.
const COMMITS: &str = r#"
CREATE TABLE IF NOT EXISTS records (
    key     TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    value   TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gates (
    job_id    INTEGER PRIMARY KEY,
    remaining INTEGER NOT NULL
);
"#;

/// See write/commit.rs: the records written ended (`RecordWrite::ended`) and when, so
/// the retention removes them with the finished runs; a record kept has no row. A
/// table of its own rather than a column of `records`, so that the migration can run
/// twice. Records written before this version stay kept.
const RECORD_RETENTION: &str = r#"
CREATE TABLE IF NOT EXISTS record_ends (
    key      TEXT PRIMARY KEY,
    ended_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS record_ends_at ON record_ends (ended_at);
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_valid() {
        MIGRATIONS.validate().expect("valid migrations");
    }
}
