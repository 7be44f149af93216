//! The embedded ledger: see [`SqliteLedger`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::NaiveDate;
use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use rusqlite_migration::{Migrations, SchemaVersion, M};
use tranche_ach::{Direction, Entry};
use tranche_types::{Clock, SystemClock, Timestamp};

use crate::columns::{
    answered_id, day_number, from_day_number, intake, storable, EntryColumns, KeyColumns,
};
use crate::error::LedgerError;
use crate::types::{seq_runs, *};
use crate::Ledger;

/// The ledger's file name in its directory.
pub const FILE_NAME: &str = "ledger.sqlite";

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS entries (
    seq               INTEGER PRIMARY KEY,
    entry_id          TEXT NOT NULL UNIQUE,
    bank              TEXT NOT NULL,
    company_name      TEXT NOT NULL,
    company_id        TEXT NOT NULL,
    sec_code          TEXT NOT NULL,
    transaction_code  INTEGER NOT NULL,
    rdfi_routing      TEXT NOT NULL,
    account_number    TEXT NOT NULL,
    amount_cents      INTEGER NOT NULL,
    individual_id     TEXT NOT NULL,
    individual_name   TEXT NOT NULL,
    entry_description TEXT NOT NULL,
    descriptive_date  TEXT NOT NULL,
    effective_date    INTEGER NOT NULL,
    submission_date   INTEGER NOT NULL,
    same_day          INTEGER NOT NULL,
    addenda           TEXT,
    state             INTEGER NOT NULL,
    rejection         TEXT,
    file_id           TEXT,
    imported_at       INTEGER NOT NULL,
    packaged_at       INTEGER,
    submitted_at      INTEGER
);
-- What the packager pages through: only accepted rows are in it.
CREATE INDEX IF NOT EXISTS entries_eligible
    ON entries (bank, submission_date, same_day, seq) WHERE state = 0;
CREATE INDEX IF NOT EXISTS entries_file ON entries (file_id, seq) WHERE file_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS entries_date ON entries (submission_date, bank);
-- Overrides the entries' state: an id here is cancelled, whatever its row says.
CREATE TABLE IF NOT EXISTS cancellations (
    entry_id TEXT PRIMARY KEY,
    reason   TEXT NOT NULL,
    at       INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files (
    file_id           TEXT PRIMARY KEY,
    bank              TEXT NOT NULL,
    submission_date   INTEGER NOT NULL,
    same_day          INTEGER NOT NULL,
    submission_window TEXT NOT NULL,
    name              TEXT NOT NULL,
    hash              TEXT NOT NULL,
    state             INTEGER NOT NULL,
    entries           INTEGER NOT NULL,
    credit_cents      INTEGER NOT NULL,
    debit_cents       INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    destination       TEXT,
    began_at          INTEGER,
    submitted_at      INTEGER
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_date ON files (submission_date, bank);
CREATE INDEX IF NOT EXISTS files_state ON files (state);
"#;

/// Which file holds an entry moves out of the entry's row into a narrow table of its
/// own. Packaging a file of 25,000 entries rewrote 25,000 wide rows (and two indexes)
/// in one transaction, about 60 ms on SQLite's single writer; inserting 25,000 pairs
/// of numbers and names takes about 8. Submitting and releasing a file no longer touch
/// the entries at all. An entry's row keeps what intake decided (accepted or
/// rejected); whether it is packaged or submitted is its membership and its file's
/// state.
///
/// With rows no longer moving out of `accepted`, one index serves both the packager's
/// eligible range and the status counts, instead of two maintained on every import.
const MEMBERS: &str = r#"
CREATE TABLE members (
    seq     INTEGER PRIMARY KEY,
    file_id TEXT NOT NULL
);
CREATE INDEX members_file ON members (file_id, seq);
INSERT INTO members (seq, file_id)
    SELECT seq, file_id FROM entries WHERE file_id IS NOT NULL AND state IN (1, 2);
UPDATE entries SET state = 0 WHERE state IN (1, 2);
DROP INDEX entries_file;
ALTER TABLE entries DROP COLUMN file_id;
ALTER TABLE entries DROP COLUMN packaged_at;
ALTER TABLE entries DROP COLUMN submitted_at;
DROP INDEX entries_eligible;
DROP INDEX entries_date;
CREATE INDEX entries_day ON entries (submission_date, bank, same_day, state, seq);
"#;

/// Whether a file's submission ever began, kept through a reset: a released file whose
/// submission never began never reached the bank, and its name (its file ID modifier)
/// may be taken by a file rebuilt from its entries ([`FileRecord::holds_name`]). Files
/// recorded before this column are taken to have begun (the default 1): nothing says
/// they did not, and keeping a name spent is the safe side.
const NAMES: &str = r#"
ALTER TABLE files ADD COLUMN submission_began INTEGER NOT NULL DEFAULT 1;
CREATE INDEX files_name ON files (bank, name);
"#;

const HISTORY: &[M<'static>] = &[
    M::up(SCHEMA).comment("1: entries, cancellations, files"),
    M::up(MEMBERS).comment("2: file membership out of the entries' rows"),
    M::up(NAMES).comment("3: files keep whether their submission ever began"),
];
const MIGRATIONS: Migrations<'static> = Migrations::from_slice(HISTORY);

/// The entry columns every read selects, in [`EntryColumns`] order (`e` is `entries`).
pub(crate) const ENTRY_COLUMNS: &str = "e.entry_id, e.bank, e.company_name, e.company_id, \
    e.sec_code, e.transaction_code, e.rdfi_routing, e.account_number, e.amount_cents, \
    e.individual_id, e.individual_name, e.entry_description, e.descriptive_date, \
    e.effective_date, e.submission_date, e.same_day, e.addenda";
const ENTRY_COLUMN_COUNT: usize = 17;

/// Which file holds entry `e` (`m`; no row when none does) and that file (`f`).
const MEMBERSHIP: &str =
    "LEFT JOIN members m ON m.seq = e.seq LEFT JOIN files f ON f.file_id = m.file_id";
/// Entry `e`'s state before the cancellations override it ([`MEMBERSHIP`] joined): its
/// row's (accepted or rejected) unless a file holds it, then packaged — also while the
/// file's submission is under way — or submitted.
const RECORDED_STATE: &str =
    "CASE WHEN m.seq IS NULL THEN e.state WHEN f.state = 2 THEN 2 ELSE 1 END";

const FILE_COLUMNS: &str = "file_id, bank, submission_date, same_day, submission_window, \
    name, hash, state, entries, credit_cents, debit_cents, created_at, destination, \
    began_at, submitted_at, submission_began";

/// The embedded ledger: `ledger.sqlite` in a data directory.
///
/// One connection per handle, behind a mutex, used on tokio's blocking pool. Every
/// write is one `BEGIN IMMEDIATE` transaction: SQLite's write lock serialises the
/// writes of every handle and process on the file, which is what makes packaging,
/// cancelling and submitting race-free here (a cancel waits at most for the
/// transaction in progress, never for a packager's whole run). Reads see the last
/// committed state (WAL).
///
/// Cheap to clone.
#[derive(Clone)]
pub struct SqliteLedger {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    /// Reads go through connections of their own (WAL lets them run beside a write and
    /// beside each other), one per core: a pass's groupers and writers read their
    /// entries at once instead of in turn, and never wait for a write.
    readers: Vec<Mutex<Connection>>,
    /// The reader the next read tries first.
    next_reader: std::sync::atomic::AtomicUsize,
    path: PathBuf,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SqliteLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteLedger")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// A failure inside a transaction, before it is given its location.
enum Fail {
    Sql(rusqlite::Error),
    Corrupt {
        what: String,
        expected: String,
        got: String,
    },
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
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

impl SqliteLedger {
    /// Open (creating it and its directory if needed) `dir/ledger.sqlite`, on the
    /// system clock.
    pub fn open(dir: &Path) -> Result<SqliteLedger, LedgerError> {
        Self::open_with_clock(dir, Arc::new(SystemClock))
    }

    /// Open with a given clock (the times the ledger stamps).
    pub fn open_with_clock(dir: &Path, clock: Arc<dyn Clock>) -> Result<SqliteLedger, LedgerError> {
        let path = dir.join(FILE_NAME);
        let location = path.display().to_string();
        let db = |doing: &'static str| {
            let location = location.clone();
            move |e: rusqlite::Error| LedgerError::Database {
                location,
                doing,
                source: Box::new(e),
            }
        };
        std::fs::create_dir_all(dir).map_err(|e| LedgerError::Database {
            location: location.clone(),
            doing: "creating its directory",
            source: Box::new(e),
        })?;
        let mut conn = Connection::open(&path).map_err(db("opening"))?;
        configure(&conn).map_err(db("configuring"))?;
        if let SchemaVersion::Outside(found) =
            MIGRATIONS
                .current_version(&conn)
                .map_err(|e| LedgerError::Database {
                    location: location.clone(),
                    doing: "reading the schema version",
                    source: Box::new(e),
                })?
        {
            return Err(LedgerError::Newer {
                location,
                found: found.get() as i64,
                known: HISTORY.len() as i64,
            });
        }
        conn.set_transaction_behavior(TransactionBehavior::Immediate);
        let migrated = MIGRATIONS.to_latest(&mut conn);
        conn.set_transaction_behavior(TransactionBehavior::Deferred);
        migrated.map_err(|e| LedgerError::Database {
            location: location.clone(),
            doing: "migrating the schema",
            source: Box::new(e),
        })?;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut readers = Vec::with_capacity(cores.clamp(2, 8));
        for _ in 0..readers.capacity() {
            let reader = Connection::open(&path).map_err(db("opening a reader"))?;
            configure(&reader).map_err(db("configuring a reader"))?;
            readers.push(Mutex::new(reader));
        }
        Ok(SqliteLedger {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                readers,
                next_reader: std::sync::atomic::AtomicUsize::new(0),
                path,
                clock,
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Run `f` in one immediate transaction on the blocking pool.
    async fn write<T: Send + 'static>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>, Timestamp) -> R<T> + Send + 'static,
    ) -> Result<T, LedgerError> {
        self.blocking(doing, move |conn, now| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(&tx, now)?;
            tx.commit()?;
            Ok(out)
        })
        .await
    }

    /// Run `f` in one deferred (read) transaction on the blocking pool.
    async fn read<T: Send + 'static>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&rusqlite::Transaction<'_>) -> R<T> + Send + 'static,
    ) -> Result<T, LedgerError> {
        self.on(true, doing, move |conn, _| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
            let out = f(&tx)?;
            tx.finish()?;
            Ok(out)
        })
        .await
    }

    async fn blocking<T: Send + 'static>(
        &self,
        doing: &'static str,
        f: impl FnOnce(&mut Connection, Timestamp) -> R<T> + Send + 'static,
    ) -> Result<T, LedgerError> {
        self.on(false, doing, f).await
    }

    /// Run `f` on the reader connection (`read`) or the writer one, on the blocking
    /// pool.
    async fn on<T: Send + 'static>(
        &self,
        read: bool,
        doing: &'static str,
        f: impl FnOnce(&mut Connection, Timestamp) -> R<T> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let inner = self.inner.clone();
        let location = || inner_location(&self.inner);
        let result = tokio::task::spawn_blocking(move || {
            let now = inner.clock.now();
            let mut conn = if read {
                inner.reader()
            } else {
                inner.conn.lock().unwrap_or_else(|p| p.into_inner())
            };
            f(&mut conn, now)
        })
        .await;
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(Fail::Sql(e))) => Err(LedgerError::Database {
                location: location(),
                doing,
                source: Box::new(e),
            }),
            Ok(Err(Fail::Corrupt {
                what,
                expected,
                got,
            })) => Err(LedgerError::Corrupt {
                location: location(),
                what,
                expected,
                got,
            }),
            Err(join) => Err(LedgerError::Database {
                location: location(),
                doing,
                source: Box::new(join),
            }),
        }
    }
}

/// How many seqs `runs` cover.
fn seqs_len(runs: &[(i64, i64)]) -> usize {
    runs.iter().map(|(a, b)| (b - a + 1) as usize).sum()
}

impl Inner {
    /// A free reader if there is one (starting from the next in turn), else the next in
    /// turn once it is free.
    fn reader(&self) -> std::sync::MutexGuard<'_, Connection> {
        let n = self.readers.len();
        let first = self
            .next_reader
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for i in 0..n {
            if let Ok(guard) = self.readers[(first + i) % n].try_lock() {
                return guard;
            }
        }
        self.readers[first % n]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

fn inner_location(inner: &Inner) -> String {
    inner.path.display().to_string()
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -65536)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    Ok(())
}

fn ts(micros: i64) -> Timestamp {
    Timestamp(micros)
}

fn date(n: i64, what: &str) -> R<NaiveDate> {
    from_day_number(n).ok_or_else(|| corrupt(what, "a date", n))
}

fn state(code: i64, what: &str) -> R<State> {
    State::from_code(code).ok_or_else(|| corrupt(what, "an entry state", code))
}

fn file_state(code: i64) -> R<FileState> {
    FileState::from_code(code).ok_or_else(|| corrupt("files.state", "a file state", code))
}

/// The entry in the first [`ENTRY_COLUMN_COUNT`] columns of `row`.
fn entry_at(row: &Row<'_>) -> R<Entry> {
    let cols = EntryColumns {
        entry_id: row.get(0)?,
        bank: row.get(1)?,
        company_name: row.get(2)?,
        company_id: row.get(3)?,
        sec_code: row.get(4)?,
        transaction_code: row.get(5)?,
        rdfi_routing: row.get(6)?,
        account_number: row.get(7)?,
        amount_cents: row.get(8)?,
        individual_id: row.get(9)?,
        individual_name: row.get(10)?,
        entry_description: row.get(11)?,
        descriptive_date: row.get(12)?,
        effective_date: date(row.get(13)?, "entries.effective_date")?,
        submission_date: date(row.get(14)?, "entries.submission_date")?,
        same_day: row.get(15)?,
        addenda: row.get(16)?,
    };
    let id = cols.entry_id.clone();
    cols.into_entry()
        .map_err(|(col, expected, got)| corrupt(format!("entries.{col} of {id}"), expected, got))
}

fn stored_entry(tx: &rusqlite::Transaction<'_>, entry_id: &str) -> R<Option<StoredEntry>> {
    let sql = format!(
        "SELECT {ENTRY_COLUMNS}, e.seq, {RECORDED_STATE}, e.rejection, m.file_id, \
         e.imported_at, f.created_at, CASE WHEN f.state = 2 THEN f.submitted_at END, \
         c.reason, c.at \
         FROM entries e {MEMBERSHIP} LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
         WHERE e.entry_id = ?1"
    );
    let mut stmt = tx.prepare_cached(&sql)?;
    let mut rows = stmt.query([entry_id])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let n = ENTRY_COLUMN_COUNT;
    let entry = entry_at(row)?;
    let recorded = state(row.get(n + 1)?, "entries.state")?;
    let cancellation = match row.get::<_, Option<String>>(n + 7)? {
        Some(reason) => Some(Cancellation {
            reason,
            at: ts(row.get(n + 8)?),
        }),
        None => None,
    };
    Ok(Some(StoredEntry {
        seq: row.get(n)?,
        entry,
        state: if cancellation.is_some() {
            State::Cancelled
        } else {
            recorded
        },
        recorded,
        rejection: row.get(n + 2)?,
        file_id: row.get(n + 3)?,
        imported_at: ts(row.get(n + 4)?),
        packaged_at: row.get::<_, Option<i64>>(n + 5)?.map(ts),
        submitted_at: row.get::<_, Option<i64>>(n + 6)?.map(ts),
        cancellation,
    }))
}

fn effective_state(tx: &rusqlite::Transaction<'_>, entry_id: &str) -> R<Option<State>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {RECORDED_STATE}, c.entry_id IS NOT NULL FROM entries e {MEMBERSHIP} \
         LEFT JOIN cancellations c ON c.entry_id = e.entry_id WHERE e.entry_id = ?1"
    ))?;
    let found: Option<(i64, bool)> = stmt
        .query_row([entry_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match found {
        None => Ok(None),
        Some((_, true)) => Ok(Some(State::Cancelled)),
        Some((code, false)) => state(code, "entries.state").map(Some),
    }
}

fn file_record(tx: &rusqlite::Transaction<'_>, file_id: &str) -> R<Option<FileRecord>> {
    let sql = format!("SELECT {FILE_COLUMNS} FROM files WHERE file_id = ?1");
    let mut stmt = tx.prepare_cached(&sql)?;
    let mut rows = stmt.query([file_id])?;
    match rows.next()? {
        Some(row) => file_at(row).map(Some),
        None => Ok(None),
    }
}

fn file_at(row: &Row<'_>) -> R<FileRecord> {
    let destination: Option<String> = row.get(12)?;
    let began_at: Option<i64> = row.get(13)?;
    let submitted_at: Option<i64> = row.get(14)?;
    Ok(FileRecord {
        file: NewFile {
            file_id: row.get(0)?,
            bank: row.get(1)?,
            submission_date: date(row.get(2)?, "files.submission_date")?,
            same_day: row.get(3)?,
            window: row.get(4)?,
            name: row.get(5)?,
            hash: row.get(6)?,
        },
        state: file_state(row.get(7)?)?,
        entries: row.get::<_, i64>(8)? as u64,
        credit_cents: row.get::<_, i64>(9)? as u64,
        debit_cents: row.get::<_, i64>(10)? as u64,
        created_at: ts(row.get(11)?),
        submission: destination.map(|destination| SubmissionRecord {
            destination,
            began_at: began_at.map(ts),
            submitted_at: submitted_at.map(ts),
        }),
        submission_began: row.get(15)?,
    })
}

/// The file's entries, in import order, with whether each is cancelled.
fn file_entries(tx: &rusqlite::Transaction<'_>, file_id: &str) -> R<Vec<(String, bool)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT e.entry_id, c.entry_id IS NOT NULL FROM members m \
         JOIN entries e ON e.seq = m.seq \
         LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
         WHERE m.file_id = ?1 ORDER BY m.seq",
    )?;
    let rows = stmt.query_map([file_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn cancelled_in(tx: &rusqlite::Transaction<'_>, file_id: &str) -> R<Vec<String>> {
    let mut stmt = tx.prepare_cached(
        "SELECT e.entry_id FROM members m JOIN entries e ON e.seq = m.seq \
         JOIN cancellations c ON c.entry_id = e.entry_id \
         WHERE m.file_id = ?1 ORDER BY m.seq",
    )?;
    let rows = stmt.query_map([file_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn import_tx(
    tx: &rusqlite::Transaction<'_>,
    entries: Vec<Entry>,
    now: Timestamp,
) -> R<Vec<Imported>> {
    let any_cancellation: bool =
        tx.query_row("SELECT EXISTS (SELECT 1 FROM cancellations)", [], |r| {
            r.get(0)
        })?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO entries (entry_id, bank, company_name, company_id, sec_code, \
         transaction_code, rdfi_routing, account_number, amount_cents, individual_id, \
         individual_name, entry_description, descriptive_date, effective_date, \
         submission_date, same_day, addenda, state, rejection, imported_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
         ?17, ?18, ?19, ?20) ON CONFLICT (entry_id) DO NOTHING",
    )?;
    let mut is_cancelled =
        tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM cancellations WHERE entry_id = ?1)")?;
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let (e, reason) = intake(e);
        if let Err(why) = storable(&e) {
            out.push(Imported {
                entry_id: answered_id(&e.entry_id),
                outcome: ImportOutcome::Unstorable(why),
            });
            continue;
        }
        let row_state = if reason.is_some() {
            State::Rejected
        } else {
            State::Accepted
        };
        let inserted = insert.execute(params![
            e.entry_id,
            e.bank,
            e.company_name,
            e.company_id,
            e.sec_code.as_str(),
            i64::from(e.transaction_code.code()),
            e.rdfi_routing.as_str(),
            e.account_number.expose(),
            e.amount_cents as i64,
            e.individual_id,
            e.individual_name,
            e.entry_description,
            e.descriptive_date,
            day_number(e.effective_date),
            day_number(e.submission_date),
            e.same_day,
            e.addenda,
            row_state.code(),
            reason,
            now.0,
        ])?;
        let outcome = if inserted == 1 {
            let cancelled = any_cancellation
                && is_cancelled.query_row([&e.entry_id], |r| r.get::<_, bool>(0))?;
            ImportOutcome::New(if cancelled {
                State::Cancelled
            } else {
                row_state
            })
        } else {
            let stored = stored_entry(tx, &e.entry_id)?
                .ok_or_else(|| corrupt("entries", "the conflicting row", "none"))?;
            if stored.entry == e {
                ImportOutcome::Existing(stored.state)
            } else {
                ImportOutcome::Conflict(stored.state)
            }
        };
        out.push(Imported {
            entry_id: e.entry_id,
            outcome,
        });
    }
    Ok(out)
}

fn package_tx(
    tx: &rusqlite::Transaction<'_>,
    file: NewFile,
    entry_ids: Vec<String>,
    now: Timestamp,
) -> R<PackageOutcome> {
    if entry_ids.is_empty() {
        return Ok(PackageOutcome::Empty);
    }
    if let Some(existing) = file_record(tx, &file.file_id)? {
        let held = file_entries(tx, &file.file_id)?
            .into_iter()
            .map(|(id, _)| id);
        return Ok(crate::membership::repeated(
            existing, &file, held, entry_ids,
        ));
    }
    let mut conflicts = Vec::new();
    let mut seen = std::collections::HashSet::with_capacity(entry_ids.len());
    let mut totals = Totals::default();
    let mut seqs = Vec::with_capacity(entry_ids.len());
    {
        let mut probe = tx.prepare_cached(&format!(
            "SELECT e.seq, {RECORDED_STATE}, c.entry_id IS NOT NULL, e.bank, \
             e.submission_date, e.same_day, e.transaction_code, e.amount_cents FROM entries e \
             {MEMBERSHIP} LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
             WHERE e.entry_id = ?1"
        ))?;
        for id in &entry_ids {
            if !seen.insert(id.as_str()) {
                conflicts.push(PackageConflict {
                    entry_id: id.clone(),
                    why: ConflictReason::Duplicate,
                });
                continue;
            }
            let mut rows = probe.query([id])?;
            let why = match rows.next()? {
                None => Some(ConflictReason::Unknown),
                Some(row) => {
                    seqs.push(row.get::<_, i64>(0)?);
                    let recorded = state(row.get(1)?, "entries.state")?;
                    totals.check(row, 3, recorded, row.get(2)?, &file)?
                }
            };
            if let Some(why) = why {
                conflicts.push(PackageConflict {
                    entry_id: id.clone(),
                    why,
                });
            }
        }
    }
    if !conflicts.is_empty() {
        return Ok(PackageOutcome::Refused(conflicts));
    }
    record_file(tx, &file, &seqs, &totals, now)
}

/// [`package_tx`] with the entries named by seq: a range scan and a range update per
/// run of consecutive seqs instead of an index lookup and an update per entry.
fn package_seqs_tx(
    tx: &rusqlite::Transaction<'_>,
    file: NewFile,
    seqs: Vec<i64>,
    now: Timestamp,
) -> R<PackageOutcome> {
    if seqs.is_empty() {
        return Ok(PackageOutcome::Empty);
    }
    if let Some(existing) = file_record(tx, &file.file_id)? {
        let held: Vec<i64> = tx
            .prepare_cached("SELECT seq FROM members WHERE file_id = ?1")?
            .query_map([&file.file_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        return Ok(crate::membership::repeated(existing, &file, held, seqs));
    }
    let mut conflicts = Vec::new();
    let mut totals = Totals::default();
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    for pair in sorted.windows(2).filter(|w| w[0] == w[1]) {
        conflicts.push(PackageConflict {
            entry_id: id_of_seq(tx, pair[0])?,
            why: ConflictReason::Duplicate,
        });
    }
    sorted.dedup();
    {
        let runs = seq_runs(&sorted);
        let overrides = Overrides::of(tx, &runs)?;
        let mut probe = tx.prepare_cached(
            "SELECT e.seq, e.entry_id, e.state, e.bank, e.submission_date, e.same_day, \
             e.transaction_code, e.amount_cents FROM entries e \
             WHERE e.seq BETWEEN ?1 AND ?2 ORDER BY e.seq",
        )?;
        for (first, last) in runs {
            let mut expected = first;
            let mut rows = probe.query(params![first, last])?;
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                for missing in expected..seq {
                    conflicts.push(PackageConflict {
                        entry_id: crate::membership::unknown_seq(missing),
                        why: ConflictReason::Unknown,
                    });
                }
                expected = seq + 1;
                let recorded = overrides.recorded(seq, row.get(2)?)?;
                let cancelled = overrides.cancelled.contains(&seq);
                if let Some(why) = totals.check(row, 3, recorded, cancelled, &file)? {
                    conflicts.push(PackageConflict {
                        entry_id: row.get(1)?,
                        why,
                    });
                }
            }
            for missing in expected..=last {
                conflicts.push(PackageConflict {
                    entry_id: crate::membership::unknown_seq(missing),
                    why: ConflictReason::Unknown,
                });
            }
        }
    }
    if !conflicts.is_empty() {
        return Ok(PackageOutcome::Refused(conflicts));
    }
    record_file(tx, &file, &sorted, &totals, now)
}

/// What overrides the rows' own state over runs of seqs: the entries a file holds
/// (with the state that gives them) and the cancelled ones. Read once per call rather
/// than joined row by row: both are few among the rows a packager asks for (it asks
/// for accepted entries), and a join costs two index lookups for every row.
struct Overrides {
    held: std::collections::HashMap<i64, i64>,
    cancelled: std::collections::HashSet<i64>,
}

impl Overrides {
    fn of(tx: &rusqlite::Transaction<'_>, runs: &[(i64, i64)]) -> R<Overrides> {
        let (Some(&(low, _)), Some(&(_, high))) = (runs.first(), runs.last()) else {
            return Ok(Overrides {
                held: Default::default(),
                cancelled: Default::default(),
            });
        };
        // The cancellations are few, the entries a day's: walk the former (CROSS JOIN
        // keeps SQLite from choosing the other way round).
        let cancelled = tx
            .prepare_cached(
                "SELECT e.seq FROM cancellations c CROSS JOIN entries e \
                 ON e.entry_id = c.entry_id WHERE e.seq BETWEEN ?1 AND ?2",
            )?
            .query_map(params![low, high], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut held = std::collections::HashMap::new();
        let mut members = tx.prepare_cached(
            "SELECT m.seq, CASE WHEN f.state = 2 THEN 2 ELSE 1 END FROM members m \
             JOIN files f ON f.file_id = m.file_id WHERE m.seq BETWEEN ?1 AND ?2",
        )?;
        for &(first, last) in runs {
            let mut rows = members.query(params![first, last])?;
            while let Some(row) = rows.next()? {
                held.insert(row.get(0)?, row.get(1)?);
            }
        }
        Ok(Overrides { held, cancelled })
    }

    /// The state of the entry `seq` before cancellations, its row saying `row_state`.
    fn recorded(&self, seq: i64, row_state: i64) -> R<State> {
        state(
            self.held.get(&seq).copied().unwrap_or(row_state),
            "entries.state",
        )
    }

    /// Its state after them.
    fn effective(&self, seq: i64, row_state: i64) -> R<State> {
        if self.cancelled.contains(&seq) {
            Ok(State::Cancelled)
        } else {
            self.recorded(seq, row_state)
        }
    }
}

fn id_of_seq(tx: &rusqlite::Transaction<'_>, seq: i64) -> R<String> {
    Ok(tx
        .prepare_cached("SELECT entry_id FROM entries WHERE seq = ?1")?
        .query_row([seq], |r| r.get(0))
        .optional()?
        .unwrap_or_else(|| crate::membership::unknown_seq(seq)))
}

/// Credits and debits of the entries found fit for a file.
#[derive(Default)]
struct Totals {
    credit: u64,
    debit: u64,
}

impl Totals {
    /// Whether the probed entry — in `state`, `cancelled` or not, its bank, date,
    /// same-day flag, transaction code and amount in `row` from column `at` on — may go
    /// in `file`; counted if so.
    fn check(
        &mut self,
        row: &Row<'_>,
        at: usize,
        state: State,
        cancelled: bool,
        file: &NewFile,
    ) -> R<Option<ConflictReason>> {
        let bank = row.get_ref(at)?.as_str().map_err(rusqlite::Error::from)?;
        let member = crate::membership::Member {
            state,
            cancelled,
            bank,
            submission_date: date(row.get(at + 1)?, "entries.submission_date")?,
            same_day: row.get(at + 2)?,
        };
        let why = member.conflict(file);
        if why.is_none() {
            let amount = row.get::<_, i64>(at + 4)? as u64;
            if is_credit(row.get(at + 3)?) {
                self.credit += amount;
            } else {
                self.debit += amount;
            }
        }
        Ok(why)
    }
}

/// Record `file` holding the entries `seqs` (checked fit, in this transaction).
fn record_file(
    tx: &rusqlite::Transaction<'_>,
    file: &NewFile,
    seqs: &[i64],
    totals: &Totals,
    now: Timestamp,
) -> R<PackageOutcome> {
    if let Some(holder) = name_holder(tx, file)? {
        return Ok(PackageOutcome::NameTaken { file_id: holder });
    }
    tx.prepare_cached(
        "INSERT INTO files (file_id, bank, submission_date, same_day, submission_window, name, \
         hash, state, entries, credit_cents, debit_cents, created_at, submission_began) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0)",
    )?
    .execute(params![
        file.file_id,
        file.bank,
        day_number(file.submission_date),
        file.same_day,
        file.window,
        file.name,
        file.hash,
        FileState::Packaged.code(),
        seqs.len() as i64,
        totals.credit as i64,
        totals.debit as i64,
        now.0,
    ])?;
    {
        // A seq already held by a file (checked not to be, in this transaction) would
        // fail the insert on the primary key and the whole transaction with it.
        let mut join = tx.prepare_cached("INSERT INTO members (seq, file_id) VALUES (?1, ?2)")?;
        for &seq in seqs {
            join.execute(params![seq, file.file_id])?;
        }
    }
    let record = file_record(tx, &file.file_id)?
        .ok_or_else(|| corrupt("files", "the file just inserted", "none"))?;
    Ok(PackageOutcome::Packaged(record))
}

/// The file of `file`'s bank holding its name ([`FileRecord::holds_name`]), if any.
fn name_holder(tx: &rusqlite::Transaction<'_>, file: &NewFile) -> R<Option<String>> {
    Ok(tx
        .prepare_cached(
            "SELECT file_id FROM files WHERE bank = ?1 AND name = ?2 \
             AND (state <> 3 OR submission_began = 1) LIMIT 1",
        )?
        .query_row(params![file.bank, file.name], |r| r.get(0))
        .optional()?)
}

/// Whether a stored transaction code is a credit (22, 23, 32, 33).
pub(crate) fn is_credit(code: i64) -> bool {
    u8::try_from(code)
        .ok()
        .and_then(|c| tranche_ach::TransactionCode::from_code(c).ok())
        .is_some_and(|t| t.direction == Direction::Credit)
}

#[async_trait]
impl Ledger for SqliteLedger {
    async fn import(&self, entries: Vec<Entry>) -> Result<Vec<Imported>, LedgerError> {
        self.write("importing entries", move |tx, now| {
            import_tx(tx, entries, now)
        })
        .await
    }

    async fn reject(&self, entry_id: &str, reason: &str) -> Result<RejectOutcome, LedgerError> {
        let (id, reason) = (entry_id.to_string(), reason.to_string());
        self.write("rejecting an entry", move |tx, _| {
            Ok(match effective_state(tx, &id)? {
                None => RejectOutcome::Unknown,
                Some(State::Accepted) => {
                    tx.execute(
                        "UPDATE entries SET state = 3, rejection = ?2 WHERE entry_id = ?1",
                        params![id, reason],
                    )?;
                    RejectOutcome::Rejected
                }
                Some(s) => RejectOutcome::NotAccepted(s),
            })
        })
        .await
    }

    async fn entry(&self, entry_id: &str) -> Result<Option<StoredEntry>, LedgerError> {
        let id = entry_id.to_string();
        self.read("reading an entry", move |tx| stored_entry(tx, &id))
            .await
    }

    async fn cancel(&self, entry_id: &str, reason: &str) -> Result<CancelOutcome, LedgerError> {
        let (id, reason) = (entry_id.to_string(), reason.to_string());
        self.write("cancelling an entry", move |tx, now| {
            let first: Option<(String, i64)> = tx
                .query_row(
                    "SELECT reason, at FROM cancellations WHERE entry_id = ?1",
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((reason, at)) = first {
                return Ok(CancelOutcome::AlreadyCancelled(Cancellation {
                    reason,
                    at: ts(at),
                }));
            }
            let row: Option<(Option<String>, Option<i64>)> = tx
                .query_row(
                    &format!(
                        "SELECT m.file_id, f.state FROM entries e {MEMBERSHIP} \
                         WHERE e.entry_id = ?1"
                    ),
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let mut file_of = None;
            if let Some((file_id, fstate)) = &row {
                let fstate = fstate.map(file_state).transpose()?;
                if let (Some(file_id), Some(fs)) = (file_id, fstate) {
                    if matches!(fs, FileState::Submitting | FileState::Submitted) {
                        return Ok(CancelOutcome::TooLate {
                            file_id: file_id.clone(),
                            file_state: fs,
                        });
                    }
                    file_of = Some(file_id.clone());
                }
            }
            tx.execute(
                "INSERT INTO cancellations (entry_id, reason, at) VALUES (?1, ?2, ?3)",
                params![id, reason, now.0],
            )?;
            Ok(CancelOutcome::Cancelled {
                known: row.is_some(),
                file_id: file_of,
            })
        })
        .await
    }

    async fn eligible(&self, query: &EligibleQuery) -> Result<Vec<EligibleEntry>, LedgerError> {
        let q = query.clone();
        self.read("listing eligible entries", move |tx| {
            let sql = format!(
                "SELECT {ENTRY_COLUMNS}, e.seq FROM entries e \
                 WHERE e.state = 0 AND e.bank = ?1 AND e.submission_date = ?2 \
                 AND e.same_day = ?3 AND e.seq > ?4 \
                 AND NOT EXISTS (SELECT 1 FROM members m WHERE m.seq = e.seq) \
                 AND NOT EXISTS (SELECT 1 FROM cancellations c WHERE c.entry_id = e.entry_id) \
                 ORDER BY e.seq LIMIT ?5"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let mut rows = stmt.query(params![
                q.bank,
                day_number(q.submission_date),
                q.same_day,
                q.after.unwrap_or(i64::MIN),
                i64::from(q.limit),
            ])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(EligibleEntry {
                    entry: entry_at(row)?,
                    seq: row.get(ENTRY_COLUMN_COUNT)?,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn eligible_seqs(&self, query: &EligibleQuery) -> Result<Vec<i64>, LedgerError> {
        let q = query.clone();
        self.read("listing eligible entries", move |tx| {
            // The partial index alone answers which accepted entries there are; the few
            // cancelled among them are taken out after, instead of a lookup of every
            // row's id in the cancellations table. CROSS JOIN keeps SQLite from walking
            // the entries and probing the cancellations (its choice otherwise): the
            // cancellations are few, the entries a day's.
            let day = day_number(q.submission_date);
            let cancelled: std::collections::HashSet<i64> = tx
                .prepare_cached(
                    "SELECT e.seq FROM cancellations c CROSS JOIN entries e ON e.entry_id = c.entry_id \
                     WHERE e.state = 0 AND e.bank = ?1 AND e.submission_date = ?2 \
                     AND e.same_day = ?3 AND e.seq > ?4",
                )?
                .query_map(
                    params![q.bank, day, q.same_day, q.after.unwrap_or(i64::MIN)],
                    |r| r.get(0),
                )?
                .collect::<Result<_, _>>()?;
            let mut seqs = Vec::with_capacity(q.limit as usize);
            let mut after = q.after.unwrap_or(i64::MIN);
            // Pages of the index until `limit` uncancelled seqs are found or it ends.
            loop {
                let want = i64::from(q.limit) - seqs.len() as i64;
                let page: Vec<i64> = tx
                    .prepare_cached(
                        "SELECT e.seq FROM entries e INDEXED BY entries_day \
                         WHERE e.state = 0 AND e.bank = ?1 AND e.submission_date = ?2 \
                         AND e.same_day = ?3 AND e.seq > ?4 \
                         AND NOT EXISTS (SELECT 1 FROM members m WHERE m.seq = e.seq) \
                         ORDER BY e.seq LIMIT ?5",
                    )?
                    .query_map(params![q.bank, day, q.same_day, after, want], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                let Some(&last) = page.last() else { break };
                let full = page.len() as i64 == want;
                after = last;
                seqs.extend(page.into_iter().filter(|s| !cancelled.contains(s)));
                if !full || seqs.len() as u32 >= q.limit {
                    break;
                }
            }
            Ok(seqs)
        })
        .await
    }

    async fn entries_at(&self, seqs: &[i64]) -> Result<Vec<SeqEntry>, LedgerError> {
        let runs = seq_runs(seqs);
        self.read("reading entries by seq", move |tx| {
            if runs.is_empty() {
                return Ok(Vec::new());
            }
            let overrides = Overrides::of(tx, &runs)?;
            let sql = format!(
                "SELECT {ENTRY_COLUMNS}, e.seq, e.state FROM entries e \
                 WHERE e.seq BETWEEN ?1 AND ?2 ORDER BY e.seq"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let n = ENTRY_COLUMN_COUNT;
            let mut out = Vec::with_capacity(seqs_len(&runs));
            for (first, last) in runs {
                let mut rows = stmt.query(params![first, last])?;
                while let Some(row) = rows.next()? {
                    let seq: i64 = row.get(n)?;
                    out.push(SeqEntry {
                        entry: entry_at(row)?,
                        seq,
                        state: overrides.effective(seq, row.get(n + 1)?)?,
                    });
                }
            }
            Ok(out)
        })
        .await
    }

    async fn batch_keys_at(&self, seqs: &[i64]) -> Result<SeqKeys, LedgerError> {
        let runs = seq_runs(seqs);
        self.read("reading batch keys by seq", move |tx| {
            let mut out = SeqKeys::default();
            if runs.is_empty() {
                return Ok(out);
            }
            let overrides = Overrides::of(tx, &runs)?;
            let mut stmt = tx.prepare_cached(
                "SELECT e.seq, e.state, e.submission_date, e.bank, e.company_name, \
                 e.company_id, e.sec_code, e.transaction_code, e.entry_description, \
                 e.descriptive_date, e.effective_date, e.same_day FROM entries e \
                 WHERE e.seq BETWEEN ?1 AND ?2 ORDER BY e.seq",
            )?;
            for (first, last) in runs {
                let mut rows = stmt.query(params![first, last])?;
                while let Some(row) = rows.next()? {
                    let seq: i64 = row.get(0)?;
                    let text = |i: usize| -> R<&str> {
                        Ok(row.get_ref(i)?.as_str().map_err(rusqlite::Error::from)?)
                    };
                    let (sec_code, service_class) = KeyColumns::read_codes(text(6)?, row.get(7)?)
                        .map_err(|(col, expected, got)| {
                        corrupt(format!("entries.{col} of seq {seq}"), expected, got)
                    })?;
                    let columns = KeyColumns {
                        bank: text(3)?,
                        company_name: text(4)?,
                        company_id: text(5)?,
                        sec_code,
                        service_class,
                        entry_description: text(8)?,
                        descriptive_date: text(9)?,
                        effective_date: date(row.get(10)?, "entries.effective_date")?,
                        same_day: row.get(11)?,
                    };
                    out.push(
                        seq,
                        overrides.effective(seq, row.get(1)?)?,
                        date(row.get(2)?, "entries.submission_date")?,
                        |k| columns.matches(k),
                        || columns.to_key(),
                    );
                }
            }
            Ok(out)
        })
        .await
    }

    async fn package(
        &self,
        file: NewFile,
        entry_ids: Vec<String>,
    ) -> Result<PackageOutcome, LedgerError> {
        self.write("packaging a file", move |tx, now| {
            package_tx(tx, file, entry_ids, now)
        })
        .await
    }

    async fn package_seqs(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
    ) -> Result<PackageOutcome, LedgerError> {
        self.write("packaging a file", move |tx, now| {
            package_seqs_tx(tx, file, seqs, now)
        })
        .await
    }

    async fn file(&self, file_id: &str) -> Result<Option<FileDetail>, LedgerError> {
        let id = file_id.to_string();
        self.read("reading a file", move |tx| {
            let Some(record) = file_record(tx, &id)? else {
                return Ok(None);
            };
            let entries = file_entries(tx, &id)?;
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
        .await
    }

    async fn files(&self, filter: &FileFilter) -> Result<Vec<FileRecord>, LedgerError> {
        let f = filter.clone();
        self.read("listing files", move |tx| {
            let sql = format!(
                "SELECT {FILE_COLUMNS} FROM files WHERE (?1 IS NULL OR bank = ?1) \
                 AND (?2 IS NULL OR submission_date = ?2) AND (?3 IS NULL OR state = ?3) \
                 ORDER BY file_id"
            );
            let mut stmt = tx.prepare_cached(&sql)?;
            let mut rows = stmt.query(params![
                f.bank,
                f.submission_date.map(day_number),
                f.state.map(FileState::code),
            ])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                out.push(file_at(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn begin_submission(
        &self,
        file_id: &str,
        destination: &str,
    ) -> Result<BeginOutcome, LedgerError> {
        let (id, destination) = (file_id.to_string(), destination.to_string());
        self.write("beginning a submission", move |tx, now| {
            let Some(record) = file_record(tx, &id)? else {
                return Ok(BeginOutcome::UnknownFile);
            };
            match record.state {
                FileState::Released => return Ok(BeginOutcome::Released),
                FileState::Submitted => {
                    return Ok(BeginOutcome::AlreadySubmitted(
                        record
                            .submission
                            .expect("a submitted file has its submission"),
                    ))
                }
                FileState::Submitting => {
                    let s = record
                        .submission
                        .expect("a submitting file has its submission");
                    return Ok(BeginOutcome::InDoubt {
                        began_at: s.began_at.unwrap_or(record.created_at),
                        destination: s.destination,
                    });
                }
                FileState::Packaged => {}
            }
            let cancelled = cancelled_in(tx, &id)?;
            if !cancelled.is_empty() {
                return Ok(BeginOutcome::Refused { cancelled });
            }
            tx.execute(
                "UPDATE files SET state = 1, destination = ?2, began_at = ?3, submission_began = 1 \
                 WHERE file_id = ?1",
                params![id, destination, now.0],
            )?;
            Ok(BeginOutcome::Started { began_at: now })
        })
        .await
    }

    async fn mark_submitted(
        &self,
        file_id: &str,
        submission: Submission,
    ) -> Result<SubmitOutcome, LedgerError> {
        let id = file_id.to_string();
        self.write("recording a submission", move |tx, _| {
            let Some(record) = file_record(tx, &id)? else {
                return Ok(SubmitOutcome::UnknownFile);
            };
            match record.state {
                FileState::Released => return Ok(SubmitOutcome::Released),
                FileState::Submitted => {
                    return Ok(SubmitOutcome::AlreadySubmitted(
                        record
                            .submission
                            .expect("a submitted file has its submission"),
                    ))
                }
                FileState::Packaged | FileState::Submitting => {}
            }
            if submission.hash != record.file.hash {
                return Ok(SubmitOutcome::HashMismatch {
                    expected: record.file.hash,
                });
            }
            let cancelled = cancelled_in(tx, &id)?;
            if !cancelled.is_empty() {
                return Ok(SubmitOutcome::Refused { cancelled });
            }
            tx.execute(
                "UPDATE files SET state = 2, destination = ?2, submitted_at = ?3, \
                 submission_began = 1 WHERE file_id = ?1",
                params![id, submission.destination, submission.at.0],
            )?;
            Ok(SubmitOutcome::Submitted)
        })
        .await
    }

    async fn reset_submission(&self, file_id: &str) -> Result<ResetOutcome, LedgerError> {
        let id = file_id.to_string();
        self.write("resetting a submission", move |tx, _| {
            let Some(record) = file_record(tx, &id)? else {
                return Ok(ResetOutcome::UnknownFile);
            };
            if record.state != FileState::Submitting {
                return Ok(ResetOutcome::NotSubmitting(record.state));
            }
            tx.execute(
                "UPDATE files SET state = 0, destination = NULL, began_at = NULL \
                 WHERE file_id = ?1",
                [&id],
            )?;
            Ok(ResetOutcome::Reset)
        })
        .await
    }

    async fn unsubmitted_files_with_cancellations(
        &self,
    ) -> Result<Vec<FileWithCancellations>, LedgerError> {
        self.read("listing files with cancellations", |tx| {
            let mut stmt = tx.prepare_cached(
                "SELECT m.file_id, e.entry_id FROM cancellations c \
                 JOIN entries e ON e.entry_id = c.entry_id \
                 JOIN members m ON m.seq = e.seq \
                 JOIN files f ON f.file_id = m.file_id \
                 WHERE f.state = 0 ORDER BY m.file_id, m.seq",
            )?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?)))?;
            let mut out: Vec<FileWithCancellations> = Vec::new();
            for row in rows {
                let (file_id, entry_id) = row?;
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
        .await
    }

    async fn release_file(&self, file_id: &str) -> Result<ReleaseOutcome, LedgerError> {
        let id = file_id.to_string();
        self.write("releasing a file", move |tx, _| {
            let Some(record) = file_record(tx, &id)? else {
                return Ok(ReleaseOutcome::UnknownFile);
            };
            match record.state {
                FileState::Released => return Ok(ReleaseOutcome::AlreadyReleased),
                FileState::Submitting | FileState::Submitted => {
                    return Ok(ReleaseOutcome::NotReleasable(record.state))
                }
                FileState::Packaged => {}
            }
            let cancelled = cancelled_in(tx, &id)?.len() as u64;
            let moved = tx.execute("DELETE FROM members WHERE file_id = ?1", [&id])? as u64;
            tx.execute("UPDATE files SET state = 3 WHERE file_id = ?1", [&id])?;
            Ok(ReleaseOutcome::Released {
                returned: moved - cancelled,
                cancelled,
            })
        })
        .await
    }

    async fn status(&self, date: NaiveDate) -> Result<Status, LedgerError> {
        self.read("counting entries and files", move |tx| {
            let d = day_number(date);
            let mut banks: std::collections::BTreeMap<String, BankStatus> = Default::default();
            let mut stmt = tx.prepare_cached(&format!(
                "SELECT e.bank, CASE WHEN c.entry_id IS NULL THEN {RECORDED_STATE} ELSE 4 END AS s, \
                 count(*), sum(e.amount_cents) FROM entries e {MEMBERSHIP} \
                 LEFT JOIN cancellations c ON c.entry_id = e.entry_id \
                 WHERE e.submission_date = ?1 GROUP BY e.bank, s"
            ))?;
            let mut rows = stmt.query([d])?;
            while let Some(row) = rows.next()? {
                let bank: String = row.get(0)?;
                let s = state(row.get(1)?, "entries.state")?;
                let b = banks.entry(bank.clone()).or_insert_with(|| BankStatus {
                    bank,
                    ..Default::default()
                });
                b.entries[s.code() as usize] = Tally {
                    entries: row.get::<_, i64>(2)? as u64,
                    cents: row.get::<_, i64>(3)? as u64,
                };
            }
            let mut stmt = tx.prepare_cached(
                "SELECT bank, state, count(*) FROM files WHERE submission_date = ?1 \
                 GROUP BY bank, state",
            )?;
            let mut rows = stmt.query([d])?;
            while let Some(row) = rows.next()? {
                let bank: String = row.get(0)?;
                let s = file_state(row.get(1)?)?;
                let b = banks.entry(bank.clone()).or_insert_with(|| BankStatus {
                    bank,
                    ..Default::default()
                });
                b.files[s.code() as usize] = row.get::<_, i64>(2)? as u64;
            }
            Ok(Status {
                date,
                banks: banks.into_values().collect(),
            })
        })
        .await
    }
}

#[cfg(test)]
mod migration_tests {
    use super::*;

    /// A ledger written by schema 1 (membership in the entries' rows) reads the same
    /// after the move to the members table.
    #[tokio::test]
    async fn entries_keep_their_files_across_the_members_migration() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join(FILE_NAME)).unwrap();
        Migrations::from_slice(&HISTORY[..1])
            .to_latest(&mut conn)
            .unwrap();
        let d = day_number(NaiveDate::from_ymd_opt(2026, 5, 4).unwrap());
        for (seq, state, file, packaged, submitted) in [
            (1, 2, Some("F"), Some(10), Some(20)),
            (2, 1, Some("G"), Some(11), None),
            (3, 0, None, None, None),
            (4, 3, None, None, None),
        ] {
            conn.execute(
                "INSERT INTO entries (seq, entry_id, bank, company_name, company_id, sec_code, \
                 transaction_code, rdfi_routing, account_number, amount_cents, individual_id, \
                 individual_name, entry_description, descriptive_date, effective_date, \
                 submission_date, same_day, state, file_id, imported_at, packaged_at, \
                 submitted_at) VALUES (?1, ?2, 'b', 'ACME', '1234567890', 'PPD', 22, \
                 '021000021', '12345', 100, 'I', 'N', 'PAYROLL', '', ?3, ?3, 0, ?4, ?5, 1, \
                 ?6, ?7)",
                params![seq, format!("e-{seq}"), d, state, file, packaged, submitted],
            )
            .unwrap();
        }
        for (file, state, created, submitted) in [("F", 2, 10, Some(20)), ("G", 0, 11, None)] {
            conn.execute(
                "INSERT INTO files (file_id, bank, submission_date, same_day, \
                 submission_window, name, hash, state, entries, credit_cents, debit_cents, \
                 created_at, destination, submitted_at) \
                 VALUES (?1, 'b', ?2, 0, 'w', ?1, 'h', ?3, 1, 100, 0, ?4, 'out', ?5)",
                params![file, d, state, created, submitted],
            )
            .unwrap();
        }
        drop(conn);

        let ledger = SqliteLedger::open(dir.path()).unwrap();
        let e1 = ledger.entry("e-1").await.unwrap().unwrap();
        assert_eq!(e1.state, State::Submitted);
        assert_eq!(e1.file_id.as_deref(), Some("F"));
        assert_eq!(
            (e1.packaged_at, e1.submitted_at),
            (Some(Timestamp(10)), Some(Timestamp(20)))
        );
        let e2 = ledger.entry("e-2").await.unwrap().unwrap();
        assert_eq!(
            (e2.state, e2.file_id.as_deref()),
            (State::Packaged, Some("G"))
        );
        assert_eq!(e2.submitted_at, None);
        let e3 = ledger.entry("e-3").await.unwrap().unwrap();
        assert_eq!((e3.state, e3.file_id), (State::Accepted, None));
        assert_eq!(
            ledger.entry("e-4").await.unwrap().unwrap().state,
            State::Rejected
        );
        assert_eq!(ledger.file("G").await.unwrap().unwrap().entry_ids, ["e-2"]);
        // Files of a ledger from before version 3 keep their names spent.
        assert!(
            ledger
                .file("G")
                .await
                .unwrap()
                .unwrap()
                .record
                .submission_began
        );
        // The accepted entry is still eligible; the packaged ones are not.
        let eligible = ledger
            .eligible_seqs(&EligibleQuery {
                bank: "b".into(),
                submission_date: e3.entry.submission_date,
                same_day: false,
                after: None,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(eligible, [3]);
    }
}
