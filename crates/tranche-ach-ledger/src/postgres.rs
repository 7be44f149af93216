//! The fleet ledger: see [`PostgresLedger`].

use std::str::FromStr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::NaiveDate;
use deadpool_postgres::{
    GenericClient, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::{IsolationLevel, NoTls, Row};
use tranche_ach::Entry;
use tranche_types::{Clock, SystemClock, Timestamp};

use crate::columns::{answered_id, intake, storable, EntryColumns};
use crate::error::{mask_url, LedgerError};
use crate::membership::repeated;
use crate::sqlite::{is_credit, ENTRY_COLUMNS};
use crate::types::*;
use crate::Ledger;

mod batch_keys;
mod runs;

use runs::{Runs, ENTRIES_IN_RUNS, ENTRIES_OF_MEMBER_RUN};

/// The environment variable holding the ledger database's password.
pub const PASSWORD_ENV: &str = "TRANCHE_LEDGER_PASSWORD";
/// The environment variable naming a file that holds the password (its first line).
pub const PASSWORD_FILE_ENV: &str = "TRANCHE_LEDGER_PASSWORD_FILE";

/// The schema's history, oldest first: migration N brings the database to version N
/// (the highest row of `ledger_version`). Append, never edit.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE entries (
    seq               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id          text NOT NULL UNIQUE,
    bank              text NOT NULL,
    company_name      text NOT NULL,
    company_id        text NOT NULL,
    sec_code          text NOT NULL,
    transaction_code  smallint NOT NULL,
    rdfi_routing      text NOT NULL,
    account_number    text NOT NULL,
    amount_cents      bigint NOT NULL,
    individual_id     text NOT NULL,
    individual_name   text NOT NULL,
    entry_description text NOT NULL,
    descriptive_date  text NOT NULL,
    effective_date    date NOT NULL,
    submission_date   date NOT NULL,
    same_day          boolean NOT NULL,
    addenda           text,
    state             smallint NOT NULL,
    rejection         text,
    file_id           text,
    imported_at       bigint NOT NULL,
    packaged_at       bigint,
    submitted_at      bigint
);
CREATE INDEX entries_eligible ON entries (bank, submission_date, same_day, seq) WHERE state = 0;
CREATE INDEX entries_file ON entries (file_id, seq) WHERE file_id IS NOT NULL;
CREATE INDEX entries_date ON entries (submission_date, bank);
CREATE TABLE cancellations (
    entry_id text PRIMARY KEY,
    reason   text NOT NULL,
    at       bigint NOT NULL
);
CREATE TABLE files (
    file_id           text PRIMARY KEY,
    bank              text NOT NULL,
    submission_date   date NOT NULL,
    same_day          boolean NOT NULL,
    submission_window text NOT NULL,
    name              text NOT NULL,
    hash              text NOT NULL,
    state             smallint NOT NULL,
    entries           bigint NOT NULL,
    credit_cents      bigint NOT NULL,
    debit_cents       bigint NOT NULL,
    created_at        bigint NOT NULL,
    destination       text,
    began_at          bigint,
    submitted_at      bigint
);
CREATE INDEX files_date ON files (submission_date, bank);
CREATE INDEX files_state ON files (state);
"#,
    // 2: which file holds an entry moves out of the entry's row into a narrow table (see
    // the SQLite ledger's MEMBERS for why), and one index serves the eligible range and
    // the status counts.
    r#"
CREATE TABLE members (
    seq     bigint PRIMARY KEY,
    file_id text NOT NULL
);
CREATE INDEX members_file ON members (file_id, seq);
INSERT INTO members (seq, file_id)
    SELECT seq, file_id FROM entries WHERE file_id IS NOT NULL AND state IN (1, 2);
UPDATE entries SET state = 0 WHERE state IN (1, 2);
DROP INDEX entries_file;
DROP INDEX entries_eligible;
DROP INDEX entries_date;
ALTER TABLE entries DROP COLUMN file_id, DROP COLUMN packaged_at, DROP COLUMN submitted_at;
CREATE INDEX entries_day ON entries (submission_date, bank, same_day, state, seq);
-- Bumped by every reject: a packager that checked its entries on a snapshot knows, by
-- one row, whether any row's state may have changed since (see package_seqs).
CREATE TABLE rejections_made (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    n        bigint NOT NULL
);
INSERT INTO rejections_made (n) VALUES (0);
"#,
    // 3: which file holds an entry, as runs of consecutive seqs: a file's entries are 1
    // to 300 runs (an employer's entries are imported together), so putting 25,000 in a
    // file inserts a few rows instead of 25,000, in the packagers' turn. The exclusion
    // constraint keeps an entry in one file, as the primary key on seq did.
    r#"
CREATE TABLE member_runs (
    seqs    int8range NOT NULL CHECK (NOT isempty(seqs)),
    file_id text NOT NULL,
    EXCLUDE USING gist (seqs WITH &&)
);
CREATE INDEX member_runs_file ON member_runs (file_id);
INSERT INTO member_runs (seqs, file_id)
    SELECT int8range(min(seq), max(seq), '[]'), file_id
    FROM (SELECT seq, file_id, seq - row_number() OVER (PARTITION BY file_id ORDER BY seq) AS run
          FROM members) AS m
    GROUP BY file_id, run;
DROP TABLE members;
"#,
    // 4: each entry's batch key as one hash, computed at import, for the groupers'
    // reads (see `batch_keys`). Adding it rewrites the table once.
    batch_keys::BATCH_KEY_COLUMN,
    // 5: whether a file's submission ever began, kept through a reset, so that a file
    // released before it began gives its name (its file ID modifier) back (see the
    // SQLite ledger's NAMES). Files recorded before are taken to have begun.
    r#"
ALTER TABLE files ADD COLUMN submission_began boolean NOT NULL DEFAULT true;
CREATE INDEX files_name ON files (bank, name);
"#,
];

/// Which file holds entry `e` (`m`; no row when none does) and that file (`f`).
const MEMBERSHIP: &str =
    "LEFT JOIN member_runs m ON m.seqs @> e.seq LEFT JOIN files f ON f.file_id = m.file_id";
/// Entry `e`'s state before the cancellations override it ([`MEMBERSHIP`] joined): its
/// row's (accepted or rejected) unless a file holds it, then packaged — also while the
/// file's submission is under way — or submitted.
const RECORDED_STATE: &str =
    "CASE WHEN m.file_id IS NULL THEN e.state WHEN f.state = 2 THEN 2::int2 ELSE 1::int2 END";
/// Entry `e` is in no file, checked by a lookup in `member_runs` per entry (a scalar
/// subquery, which the planner keeps as one) rather than `NOT EXISTS`, which it may
/// turn into an anti-join that walks `member_runs` for every page of eligible entries
/// once its statistics lag (see [`RECORDED_STATE_OF_MANY`]).
const UNHELD: &str = "(SELECT true FROM member_runs m WHERE m.seqs @> e.seq LIMIT 1) IS NULL";
/// [`RECORDED_STATE`] for reads of many entries, without [`MEMBERSHIP`]: a lookup in
/// `member_runs` per entry. Joined instead, the planner hashed all of the membership
/// for every read whenever its statistics lagged (they do while a night's packaging
/// fills it from empty faster than autovacuum analyses it): a grouper's read of 1,000
/// entries took 150 ms instead of 3.
const RECORDED_STATE_OF_MANY: &str = "coalesce((SELECT CASE WHEN f.state = 2 THEN 2::int2 \
    ELSE 1::int2 END FROM member_runs m JOIN files f ON f.file_id = m.file_id \
    WHERE m.seqs @> e.seq), e.state)";

/// The cancelled entries `e` with their cancellation `c`: driven from the
/// cancellations (a night has few), each entry a `LATERAL` lookup by id. Joined
/// plainly, the planner (on statistics that lag) scanned a whole day of entries
/// instead.
const CANCELLED_ENTRIES: &str = "cancellations c CROSS JOIN LATERAL \
    (SELECT * FROM entries WHERE entry_id = c.entry_id LIMIT 1) e";

const FILE_COLUMNS: &str = "file_id, bank, submission_date, same_day, submission_window, \
    name, hash, state, entries, credit_cents, debit_cents, created_at, destination, \
    began_at, submitted_at, submission_began";
const ENTRY_COLUMN_COUNT: usize = 17;
/// Rows per multi-row insert of an import.
const IMPORT_CHUNK: usize = 5_000;
/// Serialisation failures retried before the call gives up with the error.
const MAX_ATTEMPTS: u32 = 200;

/// How to reach the fleet ledger.
#[derive(Clone)]
pub struct PostgresOptions {
    /// `postgres://user@host:port/database`, without a password.
    pub url: String,
    /// The password ([`PostgresOptions::from_env`] reads it from
    /// `TRANCHE_LEDGER_PASSWORD(_FILE)`); `None` when the server trusts the client.
    pub password: Option<String>,
    /// Connections kept open.
    pub pool_size: usize,
    /// The clock the ledger stamps times with.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for PostgresOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresOptions")
            .field("url", &mask_url(&self.url))
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

impl PostgresOptions {
    /// `url` with the password from `TRANCHE_LEDGER_PASSWORD`, or the first line of the
    /// file `TRANCHE_LEDGER_PASSWORD_FILE` names (none when neither is set).
    pub fn from_env(url: &str) -> Result<PostgresOptions, LedgerError> {
        let password = tranche_types::secret::from_env(PASSWORD_ENV)
            .map_err(|e| LedgerError::Config(tranche_types::one_line(&e)))?;
        Ok(PostgresOptions {
            url: url.to_string(),
            password,
            pool_size: 8,
            clock: Arc::new(SystemClock),
        })
    }
}

/// The fleet ledger: one PostgreSQL database shared by several machines.
///
/// Connections come from a pool (deadpool); a broken one is dropped and a new one
/// made on the next call, so the ledger rides out a server restart by itself (calls
/// made while the server is down fail with [`LedgerError::Unavailable`]).
///
/// # Concurrency
///
/// Imports run at `READ COMMITTED`: one multi-row `INSERT … SELECT FROM unnest(…)
/// ON CONFLICT (entry_id) DO NOTHING` per chunk, then the rows that were not inserted
/// are read back and compared. Two machines importing the same id: the second insert
/// waits for the first to commit and then does nothing.
///
/// Every other write — cancel, reject, package, begin/mark/reset a submission,
/// release — runs `SERIALIZABLE` and is retried when PostgreSQL reports a
/// serialisation failure (SQLSTATE 40001) or a deadlock (40P01). SSI gives the
/// outcome of *some* serial order of the committed transactions, which is what the
/// checks need:
///
/// - *package* vs *cancel*: package reads the cancellations of its entries and writes
///   their `member_runs` rows; cancel reads the entry's membership (and its file's state)
///   and writes only the cancellations table. If they overlap, SSI aborts one (each read what the
///   other wrote): either the cancel is first (package then sees it and refuses) or
///   the package is (the cancel then answers `Cancelled { file_id }`, and the file is
///   rebuilt). A cancel never waits for a row lock: it locks no entry row and a
///   packager locks no cancellation.
/// - *begin_submission* vs *cancel*: begin reads the file's cancellations and writes
///   the file's state; cancel reads that state and writes a cancellation: the same
///   dangerous structure, so either the begin refuses or the cancel is `TooLate`.
/// - two *packagers*: both insert overlapping `member_runs` rows; the exclusion
///   constraint makes the second wait for the first and then fail (a serialisation
///   failure or an exclusion violation, both retried), and its retry sees the entries
///   packaged. The insert's count is checked besides.
///
/// Which file holds an entry is a row of `member_runs` per run of consecutive seqs in
/// a file (1 to 300 rows for a file of 25,000: an employer's entries are imported
/// together). Inserting 25,000 one-entry rows took 0.2-0.5 s under load, one
/// packager's turn after another; a few runs take milliseconds. Reads of many entries
/// look the runs up by range (see `runs`), never by a join the planner may plan on
/// statistics that lag: the membership fills from empty during a night's packaging
/// much faster than autovacuum analyses it.
///
/// Cheap to clone.
#[derive(Clone)]
pub struct PostgresLedger {
    pool: Pool,
    location: Arc<str>,
    clock: Arc<dyn Clock>,
    /// Since when the server has been unreachable, if it is: an outage is said once
    /// when it begins and once when it ends (see [`Outage`]).
    outage: Arc<Outage>,
}

/// The ledger's server unreachable: one line when it is lost and one when it is back.
/// Every call of every step fails meanwhile (and the pool's own warnings, one per
/// broken connection, are kept out of the default log by `tranche`): a line each
/// would bury what happened under dozens a second.
#[derive(Default)]
struct Outage {
    since: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Outage {
    fn lost(&self, location: &str, cause: &(dyn std::error::Error + 'static)) {
        let mut since = self
            .since
            .lock()
            .expect("the outage lock is never poisoned");
        if since.is_none() {
            *since = Some(std::time::Instant::now());
            tracing::warn!(
                "the ACH ledger at {location} is unreachable ({}): its calls fail and are \
                 retried until it is back",
                tranche_types::one_line(cause)
            );
        }
    }

    fn reached(&self, location: &str) {
        let mut since = self
            .since
            .lock()
            .expect("the outage lock is never poisoned");
        if let Some(began) = since.take() {
            tracing::warn!(
                "the ACH ledger at {location} is back after {:.1} s",
                began.elapsed().as_secs_f64()
            );
        }
    }
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger")
            .field("location", &self.location)
            .finish()
    }
}

/// A failure inside a call, before it is given its location.
enum Fail {
    Pool(PoolError),
    Db(tokio_postgres::Error),
    Corrupt {
        what: String,
        expected: String,
        got: String,
    },
    /// A check inside a serialisable transaction saw what SSI should have prevented:
    /// roll back and try again.
    Retry,
}

impl From<tokio_postgres::Error> for Fail {
    fn from(e: tokio_postgres::Error) -> Self {
        Fail::Db(e)
    }
}

impl From<PoolError> for Fail {
    fn from(e: PoolError) -> Self {
        Fail::Pool(e)
    }
}

type R<T> = Result<T, Fail>;

fn corrupt(what: impl Into<String>, expected: &str, got: impl ToString) -> Fail {
    Fail::Corrupt {
        what: what.into(),
        expected: expected.to_string(),
        got: got.to_string(),
    }
}

fn retryable(f: &Fail) -> bool {
    match f {
        Fail::Retry => true,
        Fail::Db(e) => matches!(
            e.code(),
            Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
        ),
        _ => false,
    }
}

/// Run `$body` (an expression using the transaction `$tx`, giving a future of
/// `R<T>`) in a serialisable transaction, retried on serialisation failures.
macro_rules! serializable {
    ($self:ident, $doing:expr, |$tx:ident, $now:ident| $body:expr) => {
        in_transaction!($self, None, $doing, |$tx, $now| $body)
    };
}

/// [`serializable!`] in the packagers' turn (see [`PACKAGING_LOCK`]): the session
/// takes the advisory lock before the transaction begins, so the transaction's
/// snapshot is taken after the previous packager committed.
macro_rules! serializable_in_turn {
    ($self:ident, $doing:expr, |$tx:ident, $now:ident| $body:expr) => {
        in_transaction!($self, Some(PACKAGING_LOCK), $doing, |$tx, $now| $body)
    };
}

macro_rules! in_transaction {
    ($self:ident, $turn:expr, $doing:expr, |$tx:ident, $now:ident| $body:expr) => {{
        let turn: Option<i64> = $turn;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result: R<_> = async {
                let mut client = $self.client().await?;
                if let Some(key) = turn {
                    client
                        .execute("SELECT pg_advisory_lock($1)", &[&key])
                        .await?;
                }
                let out: R<_> = async {
                    let $tx = client
                        .build_transaction()
                        .isolation_level(IsolationLevel::Serializable)
                        .start()
                        .await?;
                    let $now = $self.clock.now();
                    let out = $body.await?;
                    $tx.commit().await?;
                    Ok(out)
                }
                .await;
                if let Some(key) = turn {
                    let unlocked = client
                        .execute("SELECT pg_advisory_unlock($1)", &[&key])
                        .await;
                    if unlocked.is_err() {
                        // A session that may still hold the turn must not go back to
                        // the pool: closing it releases the lock.
                        drop(deadpool_postgres::Object::take(client));
                    }
                }
                out
            }
            .await;
            match result {
                Err(f) if retryable(&f) && attempt < MAX_ATTEMPTS => {
                    tokio::task::yield_now().await;
                    continue;
                }
                other => break $self.finish($doing, other),
            }
        }
    }};
}

impl PostgresLedger {
    /// Connect to `url` with the password from the environment
    /// ([`PostgresOptions::from_env`]), creating or migrating the schema.
    pub async fn connect(url: &str) -> Result<PostgresLedger, LedgerError> {
        Self::connect_with(PostgresOptions::from_env(url)?).await
    }

    /// Connect with explicit options, creating or migrating the schema.
    pub async fn connect_with(options: PostgresOptions) -> Result<PostgresLedger, LedgerError> {
        let location: Arc<str> = mask_url(&options.url).into();
        let mut config = tokio_postgres::Config::from_str(&options.url).map_err(|_| {
            LedgerError::Config(format!(
                "expected a URL postgres://user@host:port/database, got {location}"
            ))
        })?;
        if config.get_password().is_some() {
            return Err(LedgerError::Config(format!(
                "expected no password in the ledger URL ({location}): give it in \
                 {PASSWORD_ENV} or {PASSWORD_FILE_ENV}"
            )));
        }
        if let Some(p) = &options.password {
            config.password(p.as_bytes());
        }
        // The ledger's statements are many and short, but reads of thousands of
        // entries have high estimated costs, and past `jit_above_cost` PostgreSQL
        // compiles each with LLVM first: hundreds of milliseconds a read, every time.
        let session = match config.get_options() {
            Some(given) => format!("{given} -c jit=off"),
            None => "-c jit=off".to_string(),
        };
        config.options(&session);
        config.connect_timeout(Duration::from_secs(5));
        config.application_name("tranche-ach-ledger");
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(Duration::from_secs(10)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .map_err(|e| LedgerError::Config(format!("connection pool: {e}")))?;
        let ledger = PostgresLedger {
            pool,
            location,
            clock: options.clock,
            outage: Arc::default(),
        };
        ledger.migrate().await?;
        Ok(ledger)
    }

    async fn migrate(&self) -> Result<(), LedgerError> {
        let known = MIGRATIONS.len() as i64;
        let result: R<Result<(), LedgerError>> = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // Machines connecting together migrate one after the other.
            tx.execute("SELECT pg_advisory_xact_lock(7406392816)", &[])
                .await?;
            tx.batch_execute("CREATE TABLE IF NOT EXISTS ledger_version (version bigint NOT NULL)")
                .await?;
            let found: Option<i64> = tx
                .query_one("SELECT max(version) FROM ledger_version", &[])
                .await?
                .get(0);
            let found = found.unwrap_or(0);
            if found > known {
                return Ok(Err(LedgerError::Newer {
                    location: self.location.to_string(),
                    found,
                    known,
                }));
            }
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
                tx.batch_execute(sql).await?;
                tx.execute(
                    "INSERT INTO ledger_version (version) VALUES ($1)",
                    &[&(i as i64 + 1)],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(Ok(()))
        }
        .await;
        self.finish("migrating the schema", result)?
    }

    async fn client(&self) -> R<Object> {
        Ok(self.pool.get().await?)
    }

    fn finish<T>(&self, doing: &'static str, result: R<T>) -> Result<T, LedgerError> {
        let out = self.outcome(doing, result);
        match &out {
            Err(LedgerError::Unavailable { source, .. }) => {
                self.outage.lost(&self.location, &**source);
            }
            // Any answer, an error too, means the server is there.
            _ => self.outage.reached(&self.location),
        }
        out
    }

    fn outcome<T>(&self, doing: &'static str, result: R<T>) -> Result<T, LedgerError> {
        let location = self.location.to_string();
        match result {
            Ok(v) => Ok(v),
            Err(Fail::Pool(e)) => Err(LedgerError::Unavailable {
                location,
                source: Box::new(e),
            }),
            Err(Fail::Db(e)) => {
                let down = match e.code() {
                    None => true,
                    Some(c) => {
                        *c == SqlState::ADMIN_SHUTDOWN
                            || *c == SqlState::CRASH_SHUTDOWN
                            || *c == SqlState::CANNOT_CONNECT_NOW
                    }
                };
                if down {
                    Err(LedgerError::Unavailable {
                        location,
                        source: Box::new(e),
                    })
                } else {
                    Err(LedgerError::Database {
                        location,
                        doing,
                        source: Box::new(e),
                    })
                }
            }
            Err(Fail::Corrupt {
                what,
                expected,
                got,
            }) => Err(LedgerError::Corrupt {
                location,
                what,
                expected,
                got,
            }),
            Err(Fail::Retry) => Err(LedgerError::Database {
                location,
                doing,
                source: format!("gave up after {MAX_ATTEMPTS} serialisation failures").into(),
            }),
        }
    }

    /// Package `seqs` in `file` in the packagers' turn. `checked`: the entries were
    /// found fit on a snapshot when `rejections_made` was the count given, with these
    /// totals. What no other transaction can change — each entry known, of the file's
    /// bank, date and same-day flag, its amount — then holds; an entry's row state
    /// changes only by `reject`, which bumps `rejections_made` and takes the turn
    /// itself, so an unchanged count in the turn means the snapshot's states still
    /// hold. The turn then only writes, the insert itself checking what can change (a
    /// cancellation; another file taking an entry, by the exclusion constraint).
    /// Unchecked, or on any surprise, it goes the careful way: everything in the turn.
    async fn package_in_turn(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
        checked: Option<(i64, Totals)>,
    ) -> Result<PackageOutcome, LedgerError> {
        let careful = std::sync::atomic::AtomicBool::new(checked.is_none());
        serializable_in_turn!(self, "packaging a file", |tx, now| async {
            if let (Some((made, totals)), false) = (&checked, careful.load(Ordering::Relaxed)) {
                match package_checked_tx(&tx, &file, &seqs, *made, totals, now).await? {
                    Some(out) => return Ok(out),
                    None => {
                        // Roll back; the retry goes the careful way, which says why.
                        careful.store(true, Ordering::Relaxed);
                        return Err(Fail::Retry);
                    }
                }
            }
            package_seqs_tx(&tx, &file, &seqs, now).await
        })
    }

    /// Run `f` on a pooled connection in a read-only repeatable-read transaction (one
    /// snapshot for every query of the call).
    async fn read<T>(
        &self,
        doing: &'static str,
        f: impl for<'c> FnOnce(&'c deadpool_postgres::Transaction<'c>) -> BoxFuture<'c, R<T>>,
    ) -> Result<T, LedgerError> {
        let result: R<T> = async {
            let mut client = self.client().await?;
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let out = f(&tx).await?;
            tx.commit().await?;
            Ok(out)
        }
        .await;
        self.finish(doing, result)
    }
}

/// The entries of `runs` with their effective states, in seq order.
async fn entries_in<C: GenericClient>(tx: &C, runs: &Runs) -> R<Vec<SeqEntry>> {
    runs::by_index(tx).await?;
    let sql = format!(
        "SELECT {ENTRY_COLUMNS}, e.seq, e.state, c.entry_id IS NOT NULL \
         FROM {ENTRIES_IN_RUNS} \
         LEFT JOIN cancellations c ON c.entry_id = e.entry_id"
    );
    let n = ENTRY_COLUMN_COUNT;
    let read = tx.prepare_cached(&sql).await?;
    let rows = by_seq(tx.query(&read, &[&runs.lo, &runs.hi]).await?, n)?;
    let held = runs::held(tx, runs).await?;
    rows.iter()
        .map(|r| {
            let seq = r.try_get(n)?;
            let cancelled: bool = r.try_get(n + 2)?;
            Ok(SeqEntry {
                entry: entry_at(r)?,
                seq,
                state: if cancelled {
                    State::Cancelled
                } else {
                    let recorded = held.recorded(seq, r.try_get(n + 1)?);
                    state(recorded, "entries.state")?
                },
            })
        })
        .collect()
}

/// The count `reject` bumps: unchanged between two reads, no entry's row changed state.
async fn rejections_made<C: GenericClient>(tx: &C) -> R<i64> {
    Ok(tx
        .query_one("SELECT n FROM rejections_made", &[])
        .await?
        .try_get(0)?)
}

/// `rows` in the order of their seq (column `at`). Sorted here rather than by the
/// server: a writer's 25,000 wide rows passed `work_mem`, so PostgreSQL sorted them on
/// disk, about half of each read's time.
fn by_seq(rows: Vec<Row>, at: usize) -> R<Vec<Row>> {
    let mut keyed = rows
        .into_iter()
        .map(|r| Ok((r.try_get::<_, i64>(at)?, r)))
        .collect::<R<Vec<_>>>()?;
    keyed.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(keyed.into_iter().map(|(_, r)| r).collect())
}

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

fn ts(micros: i64) -> Timestamp {
    Timestamp(micros)
}

fn state(code: i16, what: &str) -> R<State> {
    State::from_code(i64::from(code)).ok_or_else(|| corrupt(what, "an entry state", code))
}

fn file_state(code: i16) -> R<FileState> {
    FileState::from_code(i64::from(code))
        .ok_or_else(|| corrupt("files.state", "a file state", code))
}

fn entry_at(row: &Row) -> R<Entry> {
    let cols = EntryColumns {
        entry_id: row.try_get(0)?,
        bank: row.try_get(1)?,
        company_name: row.try_get(2)?,
        company_id: row.try_get(3)?,
        sec_code: row.try_get(4)?,
        transaction_code: i64::from(row.try_get::<_, i16>(5)?),
        rdfi_routing: row.try_get(6)?,
        account_number: row.try_get(7)?,
        amount_cents: row.try_get(8)?,
        individual_id: row.try_get(9)?,
        individual_name: row.try_get(10)?,
        entry_description: row.try_get(11)?,
        descriptive_date: row.try_get(12)?,
        effective_date: row.try_get(13)?,
        submission_date: row.try_get(14)?,
        same_day: row.try_get(15)?,
        addenda: row.try_get(16)?,
    };
    let id = cols.entry_id.clone();
    cols.into_entry()
        .map_err(|(col, expected, got)| corrupt(format!("entries.{col} of {id}"), expected, got))
}

fn stored_sql(filter: &str) -> String {
    format!(
        "SELECT {ENTRY_COLUMNS}, e.seq, {RECORDED_STATE}, e.rejection, m.file_id, \
         e.imported_at, f.created_at, CASE WHEN f.state = 2 THEN f.submitted_at END, \
         c.reason, c.at \
         FROM entries e {MEMBERSHIP} LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
         WHERE {filter}"
    )
}

fn stored_at(row: &Row) -> R<StoredEntry> {
    let n = ENTRY_COLUMN_COUNT;
    let entry = entry_at(row)?;
    let recorded = state(row.try_get(n + 1)?, "entries.state")?;
    let cancellation = match row.try_get::<_, Option<String>>(n + 7)? {
        Some(reason) => Some(Cancellation {
            reason,
            at: ts(row.try_get(n + 8)?),
        }),
        None => None,
    };
    Ok(StoredEntry {
        seq: row.try_get(n)?,
        entry,
        state: if cancellation.is_some() {
            State::Cancelled
        } else {
            recorded
        },
        recorded,
        rejection: row.try_get(n + 2)?,
        file_id: row.try_get(n + 3)?,
        imported_at: ts(row.try_get(n + 4)?),
        packaged_at: row.try_get::<_, Option<i64>>(n + 5)?.map(ts),
        submitted_at: row.try_get::<_, Option<i64>>(n + 6)?.map(ts),
        cancellation,
    })
}

fn file_at(row: &Row) -> R<FileRecord> {
    let destination: Option<String> = row.try_get(12)?;
    let began_at: Option<i64> = row.try_get(13)?;
    let submitted_at: Option<i64> = row.try_get(14)?;
    Ok(FileRecord {
        file: NewFile {
            file_id: row.try_get(0)?,
            bank: row.try_get(1)?,
            submission_date: row.try_get(2)?,
            same_day: row.try_get(3)?,
            window: row.try_get(4)?,
            name: row.try_get(5)?,
            hash: row.try_get(6)?,
        },
        state: file_state(row.try_get(7)?)?,
        entries: row.try_get::<_, i64>(8)? as u64,
        credit_cents: row.try_get::<_, i64>(9)? as u64,
        debit_cents: row.try_get::<_, i64>(10)? as u64,
        created_at: ts(row.try_get(11)?),
        submission: destination.map(|destination| SubmissionRecord {
            destination,
            began_at: began_at.map(ts),
            submitted_at: submitted_at.map(ts),
        }),
        submission_began: row.try_get(15)?,
    })
}

async fn file_record<C: GenericClient>(c: &C, file_id: &str) -> R<Option<FileRecord>> {
    let sql = format!("SELECT {FILE_COLUMNS} FROM files WHERE file_id = $1");
    match c.query_opt(&sql, &[&file_id]).await? {
        Some(row) => file_at(&row).map(Some),
        None => Ok(None),
    }
}

async fn file_entries<C: GenericClient>(c: &C, file_id: &str) -> R<Vec<(String, bool)>> {
    let rows = c
        .query(
            &format!(
                "SELECT e.entry_id, c.entry_id IS NOT NULL FROM member_runs m \
                 {ENTRIES_OF_MEMBER_RUN} LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
                 WHERE m.file_id = $1 ORDER BY e.seq"
            ),
            &[&file_id],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

async fn cancelled_in<C: GenericClient>(c: &C, file_id: &str) -> R<Vec<String>> {
    let rows = c
        .query(
            &format!(
                "SELECT e.entry_id FROM member_runs m {ENTRIES_OF_MEMBER_RUN} \
                 JOIN cancellations c ON c.entry_id = e.entry_id \
                 WHERE m.file_id = $1 ORDER BY e.seq"
            ),
            &[&file_id],
        )
        .await?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

async fn effective_state<C: GenericClient>(c: &C, entry_id: &str) -> R<Option<State>> {
    let row = c
        .query_opt(
            &format!(
                "SELECT {RECORDED_STATE}, c.entry_id IS NOT NULL FROM entries e {MEMBERSHIP} \
                 LEFT JOIN cancellations c ON c.entry_id = e.entry_id WHERE e.entry_id = $1"
            ),
            &[&entry_id],
        )
        .await?;
    match row {
        None => Ok(None),
        Some(r) if r.try_get::<_, bool>(1)? => Ok(Some(State::Cancelled)),
        Some(r) => state(r.try_get(0)?, "entries.state").map(Some),
    }
}

/// The columns of one chunk of an import, as arrays for `unnest`.
#[derive(Default)]
struct Chunk {
    entry_id: Vec<String>,
    bank: Vec<String>,
    company_name: Vec<String>,
    company_id: Vec<String>,
    sec_code: Vec<&'static str>,
    transaction_code: Vec<i16>,
    rdfi_routing: Vec<String>,
    account_number: Vec<String>,
    amount_cents: Vec<i64>,
    individual_id: Vec<String>,
    individual_name: Vec<String>,
    entry_description: Vec<String>,
    descriptive_date: Vec<String>,
    effective_date: Vec<NaiveDate>,
    submission_date: Vec<NaiveDate>,
    same_day: Vec<bool>,
    addenda: Vec<Option<String>>,
    state: Vec<i16>,
    rejection: Vec<Option<String>>,
}

impl Chunk {
    fn push(&mut self, e: &Entry, reason: Option<String>) {
        self.entry_id.push(e.entry_id.clone());
        self.bank.push(e.bank.clone());
        self.company_name.push(e.company_name.clone());
        self.company_id.push(e.company_id.clone());
        self.sec_code.push(e.sec_code.as_str());
        self.transaction_code
            .push(i16::from(e.transaction_code.code()));
        self.rdfi_routing.push(e.rdfi_routing.as_str().to_string());
        self.account_number
            .push(e.account_number.expose().to_string());
        self.amount_cents.push(e.amount_cents as i64);
        self.individual_id.push(e.individual_id.clone());
        self.individual_name.push(e.individual_name.clone());
        self.entry_description.push(e.entry_description.clone());
        self.descriptive_date.push(e.descriptive_date.clone());
        self.effective_date.push(e.effective_date);
        self.submission_date.push(e.submission_date);
        self.same_day.push(e.same_day);
        self.addenda.push(e.addenda.clone());
        let s = if reason.is_some() {
            State::Rejected
        } else {
            State::Accepted
        };
        self.state.push(s.code() as i16);
        self.rejection.push(reason);
    }
}

const INSERT_CHUNK: &str = "INSERT INTO entries (entry_id, bank, company_name, company_id, \
    sec_code, transaction_code, rdfi_routing, account_number, amount_cents, individual_id, \
    individual_name, entry_description, descriptive_date, effective_date, submission_date, \
    same_day, addenda, state, rejection, imported_at) \
    SELECT u.*, $20::bigint FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], \
    $5::text[], $6::int2[], $7::text[], $8::text[], $9::int8[], $10::text[], $11::text[], \
    $12::text[], $13::text[], $14::date[], $15::date[], $16::bool[], $17::text[], \
    $18::int2[], $19::text[]) AS u \
    ON CONFLICT (entry_id) DO NOTHING RETURNING entry_id";

/// Import entries as [`intake`] made them (bounded, with their rejection).
async fn import_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    intakes: &[(Entry, Option<String>)],
    now: Timestamp,
) -> R<Vec<Imported>> {
    let entries: Vec<&Entry> = intakes.iter().map(|(e, _)| e).collect();
    // First occurrence of each storable id goes to the insert; the rest are compared.
    let mut first = std::collections::HashSet::with_capacity(entries.len());
    let mut plan: Vec<Option<String>> = Vec::with_capacity(entries.len()); // Some(why): unstorable
    let mut to_insert: Vec<usize> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match storable(e) {
            Err(why) => plan.push(Some(why)),
            Ok(()) => {
                plan.push(None);
                if first.insert(e.entry_id.as_str()) {
                    to_insert.push(i);
                }
            }
        }
    }
    let insert = tx.prepare_cached(INSERT_CHUNK).await?;
    let mut inserted = std::collections::HashSet::new();
    for part in to_insert.chunks(IMPORT_CHUNK) {
        let mut c = Chunk::default();
        for &i in part {
            c.push(entries[i], intakes[i].1.clone());
        }
        let rows = tx
            .query(
                &insert,
                &[
                    &c.entry_id,
                    &c.bank,
                    &c.company_name,
                    &c.company_id,
                    &c.sec_code,
                    &c.transaction_code,
                    &c.rdfi_routing,
                    &c.account_number,
                    &c.amount_cents,
                    &c.individual_id,
                    &c.individual_name,
                    &c.entry_description,
                    &c.descriptive_date,
                    &c.effective_date,
                    &c.submission_date,
                    &c.same_day,
                    &c.addenda,
                    &c.state,
                    &c.rejection,
                    &now.0,
                ],
            )
            .await?;
        for r in rows {
            inserted.insert(r.try_get::<_, String>(0)?);
        }
    }
    // New rows whose id was cancelled before they came.
    let new_ids: Vec<&str> = inserted.iter().map(String::as_str).collect();
    let mut cancelled = std::collections::HashSet::new();
    if !new_ids.is_empty() {
        for r in tx
            .query(
                "SELECT entry_id FROM cancellations WHERE entry_id = ANY($1)",
                &[&new_ids],
            )
            .await?
        {
            cancelled.insert(r.try_get::<_, String>(0)?);
        }
    }
    // Everything else that is storable: read back and compare.
    let mut newly = std::collections::HashSet::new();
    let mut others: Vec<&str> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if plan[i].is_none() {
            if inserted.contains(&e.entry_id) && newly.insert(e.entry_id.as_str()) {
                continue;
            }
            others.push(&e.entry_id);
        }
    }
    let mut stored = std::collections::HashMap::new();
    if !others.is_empty() {
        others.sort_unstable();
        others.dedup();
        for r in tx
            .query(&stored_sql("e.entry_id = ANY($1)"), &[&others])
            .await?
        {
            let s = stored_at(&r)?;
            stored.insert(s.entry.entry_id.clone(), s);
        }
    }
    let mut out = Vec::with_capacity(entries.len());
    let mut answered_new = std::collections::HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        let outcome = if let Some(why) = &plan[i] {
            ImportOutcome::Unstorable(why.clone())
        } else if inserted.contains(&e.entry_id) && answered_new.insert(e.entry_id.as_str()) {
            ImportOutcome::New(if cancelled.contains(&e.entry_id) {
                State::Cancelled
            } else if intakes[i].1.is_some() {
                State::Rejected
            } else {
                State::Accepted
            })
        } else {
            let s = stored
                .get(&e.entry_id)
                .ok_or_else(|| corrupt("entries", "the conflicting row", "none"))?;
            if s.entry == **e {
                ImportOutcome::Existing(s.state)
            } else {
                ImportOutcome::Conflict(s.state)
            }
        };
        out.push(Imported {
            entry_id: answered_id(&e.entry_id),
            outcome,
        });
    }
    Ok(out)
}

/// The advisory lock packagers take in turn (any number, unique to this use).
///
/// Packagers take turns: each reads and writes thousands of entry rows, so under SSI
/// any two running at once conflicted (their predicate locks grow to the whole table)
/// and aborted each other over and over, at any number of files. One at a time, each
/// is quick; cancels and submissions take no part in the turn and never wait for it,
/// and SSI still orders a packager against a cancel.
const PACKAGING_LOCK: i64 = 0x7472_616e_6368_6501;

async fn package_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    entry_ids: &[String],
    now: Timestamp,
) -> R<PackageOutcome> {
    if entry_ids.is_empty() {
        return Ok(PackageOutcome::Empty);
    }
    if let Some(existing) = file_record(tx, &file.file_id).await? {
        let held = file_entries(tx, &file.file_id)
            .await?
            .into_iter()
            .map(|(id, _)| id);
        return Ok(repeated(existing, file, held, entry_ids.to_vec()));
    }
    let rows = tx
        .query(
            &format!(
                "SELECT e.entry_id, {RECORDED_STATE_OF_MANY}, c.entry_id IS NOT NULL, e.bank, \
                 e.submission_date, e.same_day, e.transaction_code, e.amount_cents, e.seq \
                 FROM entries e \
                 LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
                 WHERE e.entry_id = ANY($1)"
            ),
            &[&entry_ids],
        )
        .await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get(0)?;
        found.insert(id, r);
    }
    let mut conflicts = Vec::new();
    let mut seen = std::collections::HashSet::with_capacity(entry_ids.len());
    let mut totals = Totals::default();
    let mut seqs = Vec::with_capacity(entry_ids.len());
    for id in entry_ids {
        if !seen.insert(id.as_str()) {
            conflicts.push(PackageConflict {
                entry_id: id.clone(),
                why: ConflictReason::Duplicate,
            });
            continue;
        }
        let why = match found.get(id) {
            None => Some(ConflictReason::Unknown),
            Some(r) => {
                seqs.push(r.try_get::<_, i64>(8)?);
                totals.check(r, r.try_get(1)?, 2, file)?
            }
        };
        if let Some(why) = why {
            conflicts.push(PackageConflict {
                entry_id: id.clone(),
                why,
            });
        }
    }
    if !conflicts.is_empty() {
        return Ok(PackageOutcome::Refused(conflicts));
    }
    if let Some(holder) = insert_file(tx, file, entry_ids.len(), &totals, now).await? {
        return Ok(PackageOutcome::NameTaken { file_id: holder });
    }
    let joined = join_file(tx, file, &seqs).await?;
    recorded(tx, file, joined, entry_ids.len()).await
}

/// [`package_tx`] with the entries named by seq.
async fn package_seqs_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    seqs: &[i64],
    now: Timestamp,
) -> R<PackageOutcome> {
    if seqs.is_empty() {
        return Ok(PackageOutcome::Empty);
    }
    if let Some(existing) = file_record(tx, &file.file_id).await? {
        let mut held: Vec<i64> = Vec::new();
        for r in tx
            .query(
                "SELECT lower(seqs), upper(seqs) FROM member_runs WHERE file_id = $1",
                &[&file.file_id],
            )
            .await?
        {
            held.extend(r.try_get::<_, i64>(0)?..r.try_get::<_, i64>(1)?);
        }
        return Ok(repeated(existing, file, held, seqs.to_vec()));
    }
    let totals = match probe_seqs(tx, file, seqs).await? {
        Ok(totals) => totals,
        Err(conflicts) => return Ok(PackageOutcome::Refused(conflicts)),
    };
    if let Some(holder) = insert_file(tx, file, seqs.len(), &totals, now).await? {
        return Ok(PackageOutcome::NameTaken { file_id: holder });
    }
    let joined = join_file(tx, file, seqs).await?;
    recorded(tx, file, joined, seqs.len()).await
}

/// Whether every entry `seqs` names may go in `file`: their totals, or every conflict.
async fn probe_seqs<C: GenericClient>(
    tx: &C,
    file: &NewFile,
    seqs: &[i64],
) -> R<Result<Totals, Vec<PackageConflict>>> {
    let runs = Runs::of(seqs);
    runs::by_index(tx).await?;
    let rows = tx
        .query(
            &format!(
                "SELECT e.seq, e.entry_id, e.state, c.entry_id IS NOT NULL, e.bank, \
                 e.submission_date, e.same_day, e.transaction_code, e.amount_cents \
                 FROM {ENTRIES_IN_RUNS} \
                 LEFT JOIN cancellations c ON c.entry_id = e.entry_id"
            ),
            &[&runs.lo, &runs.hi],
        )
        .await?;
    let held = runs::held(tx, &runs).await?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        found.insert(r.try_get::<_, i64>(0)?, r);
    }
    let mut conflicts = Vec::new();
    let mut seen = std::collections::HashSet::with_capacity(seqs.len());
    let mut totals = Totals::default();
    for &seq in seqs {
        let Some(r) = found.get(&seq) else {
            conflicts.push(PackageConflict {
                entry_id: crate::membership::unknown_seq(seq),
                why: ConflictReason::Unknown,
            });
            continue;
        };
        let why = if seen.insert(seq) {
            totals.check(r, held.recorded(seq, r.try_get(2)?), 3, file)?
        } else {
            Some(ConflictReason::Duplicate)
        };
        if let Some(why) = why {
            conflicts.push(PackageConflict {
                entry_id: r.try_get(1)?,
                why,
            });
        }
    }
    Ok(if conflicts.is_empty() {
        Ok(totals)
    } else {
        Err(conflicts)
    })
}

/// [`package_seqs_tx`] for entries [`probe_seqs`] found fit on a snapshot when
/// `rejections_made` was `made`; `None` when something may have changed since (the
/// caller rolls back and goes the careful way).
async fn package_checked_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    seqs: &[i64],
    made: i64,
    totals: &Totals,
    now: Timestamp,
) -> R<Option<PackageOutcome>> {
    if rejections_made(tx).await? != made || file_record(tx, &file.file_id).await?.is_some() {
        return Ok(None);
    }
    if let Some(holder) = insert_file(tx, file, seqs.len(), totals, now).await? {
        return Ok(Some(PackageOutcome::NameTaken { file_id: holder }));
    }
    match join_file(tx, file, seqs).await {
        Ok(joined) if joined == seqs.len() as u64 => {
            recorded(tx, file, joined, seqs.len()).await.map(Some)
        }
        Ok(_) | Err(Fail::Retry) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Put the entries `seqs` (checked fit in this transaction) in `file`: a row per run of
/// consecutive seqs, never a rewrite of the entries' own rows. Answers how many joined:
/// none when one was cancelled since the check, and a seq another file took since fails
/// the exclusion constraint — both retried (the retry's check answers why).
async fn join_file(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    seqs: &[i64],
) -> R<u64> {
    let runs = Runs::of(seqs);
    runs::by_index(tx).await?;
    let cancelled: i64 = tx
        .query_one(
            &format!(
                "SELECT count(*) FROM {CANCELLED_ENTRIES} \
                 WHERE EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) \
                 WHERE e.seq BETWEEN r.lo AND r.hi)"
            ),
            &[&runs.lo, &runs.hi],
        )
        .await?
        .try_get(0)?;
    if cancelled > 0 {
        return Ok(0);
    }
    let joined = tx
        .execute(
            "INSERT INTO member_runs (seqs, file_id) \
             SELECT int8range(r.lo, r.hi, '[]'), $3 FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi)",
            &[&runs.lo, &runs.hi, &file.file_id],
        )
        .await;
    match joined {
        Ok(_) => Ok(runs.entries()),
        Err(e) if e.code() == Some(&SqlState::EXCLUSION_VIOLATION) => Err(Fail::Retry),
        Err(e) => Err(e.into()),
    }
}

/// Credits and debits of the entries found fit for a file.
#[derive(Default)]
struct Totals {
    credit: u64,
    debit: u64,
}

impl Totals {
    /// Whether the probed entry in `r` (cancelled, bank, date, same-day, code, amount
    /// from column `at`), its recorded state `recorded`, may go in `file`; counted if so.
    fn check(
        &mut self,
        r: &Row,
        recorded: i16,
        at: usize,
        file: &NewFile,
    ) -> R<Option<ConflictReason>> {
        let member = crate::membership::Member {
            state: state(recorded, "entries.state")?,
            cancelled: r.try_get(at)?,
            bank: r.try_get(at + 1)?,
            submission_date: r.try_get(at + 2)?,
            same_day: r.try_get(at + 3)?,
        };
        let why = member.conflict(file);
        if why.is_none() {
            let amount = r.try_get::<_, i64>(at + 5)? as u64;
            if is_credit(i64::from(r.try_get::<_, i16>(at + 4)?)) {
                self.credit += amount;
            } else {
                self.debit += amount;
            }
        }
        Ok(why)
    }
}

/// Record `file`, unless another file of its bank holds its name
/// ([`FileRecord::holds_name`]): then nothing is written and that file is answered.
async fn insert_file(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    entries: usize,
    totals: &Totals,
    now: Timestamp,
) -> R<Option<String>> {
    if let Some(holder) = tx
        .query_opt(
            "SELECT file_id FROM files WHERE bank = $1 AND name = $2 \
             AND (state <> 3 OR submission_began) LIMIT 1",
            &[&file.bank, &file.name],
        )
        .await?
    {
        return Ok(Some(holder.try_get(0)?));
    }
    tx.execute(
        "INSERT INTO files (file_id, bank, submission_date, same_day, submission_window, name, \
         hash, state, entries, credit_cents, debit_cents, created_at, submission_began) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $10, $11, false)",
        &[
            &file.file_id,
            &file.bank,
            &file.submission_date,
            &file.same_day,
            &file.window,
            &file.name,
            &file.hash,
            &(entries as i64),
            &(totals.credit as i64),
            &(totals.debit as i64),
            &now.0,
        ],
    )
    .await?;
    Ok(None)
}

/// The file just recorded, once every entry was marked (else the transaction is retried:
/// a concurrent change slipped past the probe).
async fn recorded(
    tx: &deadpool_postgres::Transaction<'_>,
    file: &NewFile,
    marked: u64,
    wanted: usize,
) -> R<PackageOutcome> {
    if marked != wanted as u64 {
        return Err(Fail::Retry);
    }
    let record = file_record(tx, &file.file_id)
        .await?
        .ok_or_else(|| corrupt("files", "the file just inserted", "none"))?;
    Ok(PackageOutcome::Packaged(record))
}

async fn cancel_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    reason: &str,
    now: Timestamp,
) -> R<CancelOutcome> {
    if let Some(r) = tx
        .query_opt(
            "SELECT reason, at FROM cancellations WHERE entry_id = $1",
            &[&id],
        )
        .await?
    {
        return Ok(CancelOutcome::AlreadyCancelled(Cancellation {
            reason: r.try_get(0)?,
            at: ts(r.try_get(1)?),
        }));
    }
    let row = tx
        .query_opt(
            &format!("SELECT m.file_id, f.state FROM entries e {MEMBERSHIP} WHERE e.entry_id = $1"),
            &[&id],
        )
        .await?;
    let mut file_of = None;
    if let Some(r) = &row {
        let file_id: Option<String> = r.try_get(0)?;
        let fstate = r
            .try_get::<_, Option<i16>>(1)?
            .map(file_state)
            .transpose()?;
        if let (Some(file_id), Some(fs)) = (file_id, fstate) {
            if matches!(fs, FileState::Submitting | FileState::Submitted) {
                return Ok(CancelOutcome::TooLate {
                    file_id,
                    file_state: fs,
                });
            }
            file_of = Some(file_id);
        }
    }
    let n = tx
        .execute(
            "INSERT INTO cancellations (entry_id, reason, at) VALUES ($1, $2, $3) \
             ON CONFLICT (entry_id) DO NOTHING",
            &[&id, &reason, &now.0],
        )
        .await?;
    if n != 1 {
        return Err(Fail::Retry); // a concurrent cancel of the same id won: answer as second
    }
    Ok(CancelOutcome::Cancelled {
        known: row.is_some(),
        file_id: file_of,
    })
}

async fn begin_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    destination: &str,
    now: Timestamp,
) -> R<BeginOutcome> {
    let Some(record) = file_record(tx, id).await? else {
        return Ok(BeginOutcome::UnknownFile);
    };
    match record.state {
        FileState::Released => return Ok(BeginOutcome::Released),
        FileState::Submitted => {
            return Ok(BeginOutcome::AlreadySubmitted(
                record
                    .submission
                    .ok_or_else(|| corrupt("files.destination", "a destination", "none"))?,
            ))
        }
        FileState::Submitting => {
            let s = record
                .submission
                .ok_or_else(|| corrupt("files.destination", "a destination", "none"))?;
            return Ok(BeginOutcome::InDoubt {
                began_at: s.began_at.unwrap_or(record.created_at),
                destination: s.destination,
            });
        }
        FileState::Packaged => {}
    }
    let cancelled = cancelled_in(tx, id).await?;
    if !cancelled.is_empty() {
        return Ok(BeginOutcome::Refused { cancelled });
    }
    tx.execute(
        "UPDATE files SET state = 1, destination = $2, began_at = $3, submission_began = true \
         WHERE file_id = $1",
        &[&id, &destination, &now.0],
    )
    .await?;
    Ok(BeginOutcome::Started { began_at: now })
}

async fn submitted_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    submission: &Submission,
) -> R<SubmitOutcome> {
    let Some(record) = file_record(tx, id).await? else {
        return Ok(SubmitOutcome::UnknownFile);
    };
    match record.state {
        FileState::Released => return Ok(SubmitOutcome::Released),
        FileState::Submitted => {
            return Ok(SubmitOutcome::AlreadySubmitted(
                record
                    .submission
                    .ok_or_else(|| corrupt("files.destination", "a destination", "none"))?,
            ))
        }
        FileState::Packaged | FileState::Submitting => {}
    }
    if submission.hash != record.file.hash {
        return Ok(SubmitOutcome::HashMismatch {
            expected: record.file.hash,
        });
    }
    let cancelled = cancelled_in(tx, id).await?;
    if !cancelled.is_empty() {
        return Ok(SubmitOutcome::Refused { cancelled });
    }
    tx.execute(
        "UPDATE files SET state = 2, destination = $2, submitted_at = $3, \
         submission_began = true WHERE file_id = $1",
        &[&id, &submission.destination, &submission.at.0],
    )
    .await?;
    Ok(SubmitOutcome::Submitted)
}

async fn reset_tx(tx: &deadpool_postgres::Transaction<'_>, id: &str) -> R<ResetOutcome> {
    let Some(record) = file_record(tx, id).await? else {
        return Ok(ResetOutcome::UnknownFile);
    };
    if record.state != FileState::Submitting {
        return Ok(ResetOutcome::NotSubmitting(record.state));
    }
    tx.execute(
        "UPDATE files SET state = 0, destination = NULL, began_at = NULL WHERE file_id = $1",
        &[&id],
    )
    .await?;
    Ok(ResetOutcome::Reset)
}

async fn release_tx(tx: &deadpool_postgres::Transaction<'_>, id: &str) -> R<ReleaseOutcome> {
    let Some(record) = file_record(tx, id).await? else {
        return Ok(ReleaseOutcome::UnknownFile);
    };
    match record.state {
        FileState::Released => return Ok(ReleaseOutcome::AlreadyReleased),
        FileState::Submitting | FileState::Submitted => {
            return Ok(ReleaseOutcome::NotReleasable(record.state))
        }
        FileState::Packaged => {}
    }
    let cancelled = cancelled_in(tx, id).await?.len() as u64;
    let mut moved = 0u64;
    for r in tx
        .query(
            "DELETE FROM member_runs WHERE file_id = $1 RETURNING upper(seqs) - lower(seqs)",
            &[&id],
        )
        .await?
    {
        moved += r.try_get::<_, i64>(0)? as u64;
    }
    tx.execute("UPDATE files SET state = 3 WHERE file_id = $1", &[&id])
        .await?;
    Ok(ReleaseOutcome::Released {
        returned: moved - cancelled,
        cancelled,
    })
}

async fn reject_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    reason: &str,
) -> R<RejectOutcome> {
    Ok(match effective_state(tx, id).await? {
        None => RejectOutcome::Unknown,
        Some(State::Accepted) => {
            tx.execute(
                "UPDATE entries SET state = 3, rejection = $2 WHERE entry_id = $1",
                &[&id, &reason],
            )
            .await?;
            tx.execute("UPDATE rejections_made SET n = n + 1", &[])
                .await?;
            RejectOutcome::Rejected
        }
        Some(s) => RejectOutcome::NotAccepted(s),
    })
}

#[async_trait]
impl Ledger for PostgresLedger {
    async fn import(&self, entries: Vec<Entry>) -> Result<Vec<Imported>, LedgerError> {
        let intakes: Vec<(Entry, Option<String>)> = entries.into_iter().map(intake).collect();
        let result: R<Vec<Imported>> = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let out = import_tx(&tx, &intakes, self.clock.now()).await?;
            tx.commit().await?;
            Ok(out)
        }
        .await;
        self.finish("importing entries", result)
    }

    async fn reject(&self, entry_id: &str, reason: &str) -> Result<RejectOutcome, LedgerError> {
        // In the packagers' turn: no reject commits while a packager trusts what it
        // checked before its turn (see package_seqs).
        serializable_in_turn!(self, "rejecting an entry", |tx, _now| reject_tx(
            &tx, entry_id, reason
        ))
    }

    async fn entry(&self, entry_id: &str) -> Result<Option<StoredEntry>, LedgerError> {
        let id = entry_id.to_string();
        self.read("reading an entry", move |tx| {
            Box::pin(async move {
                match tx.query_opt(&stored_sql("e.entry_id = $1"), &[&id]).await? {
                    Some(r) => stored_at(&r).map(Some),
                    None => Ok(None),
                }
            })
        })
        .await
    }

    async fn cancel(&self, entry_id: &str, reason: &str) -> Result<CancelOutcome, LedgerError> {
        serializable!(self, "cancelling an entry", |tx, now| cancel_tx(
            &tx, entry_id, reason, now
        ))
    }

    async fn eligible(&self, query: &EligibleQuery) -> Result<Vec<EligibleEntry>, LedgerError> {
        let q = query.clone();
        self.read("listing eligible entries", move |tx| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {ENTRY_COLUMNS}, e.seq FROM entries e \
                     WHERE e.state = 0 AND e.bank = $1 AND e.submission_date = $2 \
                     AND e.same_day = $3 AND e.seq > $4 \
                     AND {UNHELD} \
                     AND NOT EXISTS (SELECT 1 FROM cancellations c WHERE c.entry_id = e.entry_id) \
                     ORDER BY e.seq LIMIT $5"
                );
                let rows = tx
                    .query(
                        &sql,
                        &[
                            &q.bank,
                            &q.submission_date,
                            &q.same_day,
                            &q.after.unwrap_or(i64::MIN),
                            &i64::from(q.limit),
                        ],
                    )
                    .await?;
                rows.iter()
                    .map(|r| {
                        Ok(EligibleEntry {
                            entry: entry_at(r)?,
                            seq: r.try_get(ENTRY_COLUMN_COUNT)?,
                        })
                    })
                    .collect()
            })
        })
        .await
    }

    async fn eligible_seqs(&self, query: &EligibleQuery) -> Result<Vec<i64>, LedgerError> {
        let q = query.clone();
        self.read("listing eligible entries", move |tx| {
            Box::pin(async move {
                // Pages of the accepted range (the index alone, in its order), then the
                // held among each page taken out by a probe of `member_runs` per run of
                // the page (see `runs`): no plan for both at once stays good while
                // `member_runs` grows faster than its statistics.
                // The cancelled are taken out the same way, from the (small)
                // cancellations table: checked per entry in the page's query, the
                // planner walked the primary key filtering every row instead of the
                // day's index alone.
                runs::by_index(tx).await?;
                let mut after = q.after.unwrap_or(i64::MIN);
                let cancelled: std::collections::HashSet<i64> = tx
                    .query(
                        &format!(
                            "SELECT e.seq FROM {CANCELLED_ENTRIES} WHERE e.bank = $1 \
                             AND e.submission_date = $2 AND e.same_day = $3 AND e.seq > $4"
                        ),
                        &[&q.bank, &q.submission_date, &q.same_day, &after],
                    )
                    .await?
                    .iter()
                    .map(|r| r.try_get(0))
                    .collect::<Result<_, _>>()?;
                let mut seqs = Vec::with_capacity(q.limit as usize);
                loop {
                    let want = i64::from(q.limit) - seqs.len() as i64;
                    let page: Vec<i64> = tx
                        .query(
                            "SELECT e.seq FROM entries e \
                             WHERE e.state = 0 AND e.bank = $1 AND e.submission_date = $2 \
                             AND e.same_day = $3 AND e.seq > $4 ORDER BY e.seq LIMIT $5",
                            &[&q.bank, &q.submission_date, &q.same_day, &after, &want],
                        )
                        .await?
                        .iter()
                        .map(|r| r.try_get(0))
                        .collect::<Result<_, _>>()?;
                    let Some(&last) = page.last() else { break };
                    let full = page.len() as i64 == want;
                    after = last;
                    let held = runs::held(tx, &Runs::of(&page)).await?;
                    seqs.extend(
                        page.into_iter()
                            .filter(|s| !held.holds(*s) && !cancelled.contains(s)),
                    );
                    if !full || seqs.len() as u32 >= q.limit {
                        break;
                    }
                }
                Ok(seqs)
            })
        })
        .await
    }

    async fn entries_at(&self, seqs: &[i64]) -> Result<Vec<SeqEntry>, LedgerError> {
        let runs = Runs::of(seqs);
        self.read("reading entries by seq", move |tx| {
            Box::pin(async move { entries_in(tx, &runs).await })
        })
        .await
    }

    async fn entries_to_package(
        &self,
        seqs: &[i64],
    ) -> Result<(Vec<SeqEntry>, ReadMark), LedgerError> {
        let runs = Runs::of(seqs);
        self.read("reading entries by seq", move |tx| {
            Box::pin(async move {
                let made = rejections_made(tx).await?;
                let entries = entries_in(tx, &runs).await?;
                let mark = ReadMark {
                    seen: Some(SeenAccepted::of(made, &entries)),
                };
                Ok((entries, mark))
            })
        })
        .await
    }

    async fn batch_keys_at(&self, seqs: &[i64]) -> Result<SeqKeys, LedgerError> {
        let runs = Runs::of(seqs);
        self.read("reading batch keys by seq", move |tx| {
            Box::pin(async move { batch_keys::batch_keys_in(tx, &runs).await })
        })
        .await
    }

    async fn package(
        &self,
        file: NewFile,
        entry_ids: Vec<String>,
    ) -> Result<PackageOutcome, LedgerError> {
        serializable_in_turn!(self, "packaging a file", |tx, now| package_tx(
            &tx, &file, &entry_ids, now
        ))
    }

    async fn package_seqs(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
    ) -> Result<PackageOutcome, LedgerError> {
        // Reading and checking 25,000 entries took most of a packager's turn, and
        // turns are taken one at a time across the fleet: what can be is checked on a
        // snapshot before the turn (see `package_in_turn`).
        let distinct = {
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            sorted.windows(2).all(|w| w[0] != w[1])
        };
        let checked = if distinct && !seqs.is_empty() {
            let (f, s) = (file.clone(), seqs.clone());
            self.read("checking a file's entries", move |tx| {
                Box::pin(async move {
                    let made = rejections_made(tx).await?;
                    Ok(probe_seqs(tx, &f, &s).await?.ok().map(|t| (made, t)))
                })
            })
            .await?
        } else {
            None
        };
        self.package_in_turn(file, seqs, checked).await
    }

    async fn package_read(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
        mark: &ReadMark,
    ) -> Result<PackageOutcome, LedgerError> {
        let seen = mark.seen.as_ref().and_then(|seen| {
            let (credit, debit) = seen.totals(&file, &seqs)?;
            Some((seen.at, Totals { credit, debit }))
        });
        match seen {
            Some(checked) => self.package_in_turn(file, seqs, Some(checked)).await,
            None => self.package_seqs(file, seqs).await,
        }
    }

    async fn file(&self, file_id: &str) -> Result<Option<FileDetail>, LedgerError> {
        let id = file_id.to_string();
        self.read("reading a file", move |tx| {
            Box::pin(async move {
                let Some(record) = file_record(tx, &id).await? else {
                    return Ok(None);
                };
                let entries = file_entries(tx, &id).await?;
                Ok(Some(FileDetail {
                    record,
                    cancelled: entries
                        .iter()
                        .filter(|(_, c)| *c)
                        .map(|(id, _)| id.clone())
                        .collect(),
                    entry_ids: entries.into_iter().map(|(id, _)| id).collect(),
                }))
            })
        })
        .await
    }

    async fn files(&self, filter: &FileFilter) -> Result<Vec<FileRecord>, LedgerError> {
        let f = filter.clone();
        self.read("listing files", move |tx| {
            Box::pin(async move {
                let sql = format!(
                    "SELECT {FILE_COLUMNS} FROM files WHERE ($1::text IS NULL OR bank = $1) \
                     AND ($2::date IS NULL OR submission_date = $2) \
                     AND ($3::int2 IS NULL OR state = $3) ORDER BY file_id"
                );
                let state = f.state.map(|s| s.code() as i16);
                let rows = tx
                    .query(&sql, &[&f.bank, &f.submission_date, &state])
                    .await?;
                rows.iter().map(file_at).collect()
            })
        })
        .await
    }

    async fn begin_submission(
        &self,
        file_id: &str,
        destination: &str,
    ) -> Result<BeginOutcome, LedgerError> {
        serializable!(self, "beginning a submission", |tx, now| begin_tx(
            &tx,
            file_id,
            destination,
            now
        ))
    }

    async fn mark_submitted(
        &self,
        file_id: &str,
        submission: Submission,
    ) -> Result<SubmitOutcome, LedgerError> {
        serializable!(self, "recording a submission", |tx, _now| submitted_tx(
            &tx,
            file_id,
            &submission
        ))
    }

    async fn reset_submission(&self, file_id: &str) -> Result<ResetOutcome, LedgerError> {
        serializable!(self, "resetting a submission", |tx, _now| reset_tx(
            &tx, file_id
        ))
    }

    async fn unsubmitted_files_with_cancellations(
        &self,
    ) -> Result<Vec<FileWithCancellations>, LedgerError> {
        self.read("listing files with cancellations", |tx| {
            Box::pin(async move {
                let rows = tx
                    .query(
                        &format!(
                            "SELECT m.file_id, e.entry_id FROM {CANCELLED_ENTRIES} \
                             JOIN member_runs m ON m.seqs @> e.seq \
                             JOIN files f ON f.file_id = m.file_id \
                             WHERE f.state = 0 ORDER BY m.file_id, e.seq"
                        ),
                        &[],
                    )
                    .await?;
                let mut out: Vec<FileWithCancellations> = Vec::new();
                for r in rows {
                    let (file_id, entry_id): (String, String) = (r.try_get(0)?, r.try_get(1)?);
                    match out.last_mut() {
                        Some(last) if last.file_id == file_id => last.cancelled.push(entry_id),
                        _ => out.push(FileWithCancellations {
                            file_id,
                            cancelled: vec![entry_id],
                        }),
                    }
                }
                Ok(out)
            })
        })
        .await
    }

    async fn release_file(&self, file_id: &str) -> Result<ReleaseOutcome, LedgerError> {
        serializable!(self, "releasing a file", |tx, _now| release_tx(
            &tx, file_id
        ))
    }

    async fn status(&self, date: NaiveDate) -> Result<Status, LedgerError> {
        self.read("counting entries and files", move |tx| {
            Box::pin(async move {
                let mut banks: std::collections::BTreeMap<String, BankStatus> = Default::default();
                // Every entry of the date by its row's state or cancelled; then the held
                // ones moved from accepted to their file's state (a file holds only
                // accepted rows), counted from the files' own totals less their
                // cancelled entries. Joined to `member_runs` entry by entry instead, a
                // million entries took 20 s.
                let rows = tx
                    .query(
                        "SELECT e.bank, CASE WHEN c.entry_id IS NULL THEN e.state ELSE 4::int2 END \
                         AS s, count(*), coalesce(sum(e.amount_cents), 0)::bigint FROM entries e \
                         LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
                         WHERE e.submission_date = $1 GROUP BY e.bank, s",
                        &[&date],
                    )
                    .await?;
                for r in rows {
                    let bank: String = r.try_get(0)?;
                    let s = state(r.try_get(1)?, "entries.state")?;
                    let b = banks.entry(bank.clone()).or_insert_with(|| BankStatus {
                        bank,
                        ..Default::default()
                    });
                    b.entries[s.code() as usize] = Tally {
                        entries: r.try_get::<_, i64>(2)? as u64,
                        cents: r.try_get::<_, i64>(3)? as u64,
                    };
                }
                let rows = tx
                    .query(
                        &format!(
                            "SELECT bank, s, sum(n)::bigint, sum(cents)::bigint FROM ( \
                           SELECT bank, CASE WHEN state = 2 THEN 2::int2 ELSE 1::int2 END AS s, \
                           entries AS n, credit_cents + debit_cents AS cents \
                           FROM files WHERE submission_date = $1 AND state <> 3 \
                         UNION ALL \
                           SELECT f.bank, CASE WHEN f.state = 2 THEN 2::int2 ELSE 1::int2 END, \
                           -1, -e.amount_cents FROM {CANCELLED_ENTRIES} \
                           JOIN member_runs m ON m.seqs @> e.seq \
                           JOIN files f ON f.file_id = m.file_id WHERE f.submission_date = $1 \
                         ) AS held GROUP BY bank, s"
                        ),
                        &[&date],
                    )
                    .await?;
                for r in rows {
                    let bank: String = r.try_get(0)?;
                    let s = state(r.try_get(1)?, "files.state")?;
                    let held = Tally {
                        entries: r.try_get::<_, i64>(2)? as u64,
                        cents: r.try_get::<_, i64>(3)? as u64,
                    };
                    let b = banks.get_mut(&bank).ok_or_else(|| {
                        corrupt(format!("member_runs of bank {bank}"), "its entries", "none")
                    })?;
                    let accepted = &mut b.entries[State::Accepted.code() as usize];
                    match (
                        accepted.entries.checked_sub(held.entries),
                        accepted.cents.checked_sub(held.cents),
                    ) {
                        (Some(entries), Some(cents)) => *accepted = Tally { entries, cents },
                        _ => {
                            return Err(corrupt(
                                format!("entries of bank {bank}"),
                                "held entries among the accepted rows",
                                format!("{} held of {}", held.entries, accepted.entries),
                            ))
                        }
                    }
                    b.entries[s.code() as usize] = held;
                }
                let rows = tx
                    .query(
                        "SELECT bank, state, count(*) FROM files WHERE submission_date = $1 \
                         GROUP BY bank, state",
                        &[&date],
                    )
                    .await?;
                for r in rows {
                    let bank: String = r.try_get(0)?;
                    let s = file_state(r.try_get(1)?)?;
                    let b = banks.entry(bank.clone()).or_insert_with(|| BankStatus {
                        bank,
                        ..Default::default()
                    });
                    b.files[s.code() as usize] = r.try_get::<_, i64>(2)? as u64;
                }
                Ok(Status {
                    date,
                    banks: banks.into_values().collect(),
                })
            })
        })
        .await
    }
}
