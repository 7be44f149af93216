//! The ACH entry ledger: where payment entries live from intake to submission.
//!
//! Entries are money, so they live in a durable ledger and never in job payloads. One
//! [`Ledger`] trait, whose doc comments are its contract, and two implementations that
//! pass one conformance suite unchanged (feature `conformance`, module `conformance`):
//!
//! - [`SqliteLedger`], the embedded default: `ledger.sqlite` in the data directory
//!   (WAL, no server). Every write is one `BEGIN IMMEDIATE` transaction, so writes of
//!   every handle and process on the file are serialised by SQLite's write lock.
//! - [`PostgresLedger`], for a fleet (`--ledger postgres://…`): several machines
//!   import, package and submit against one database. The URL carries no password;
//!   it comes from `TRANCHE_LEDGER_PASSWORD` or `TRANCHE_LEDGER_PASSWORD_FILE`.
//!   Every transition that must not race (cancel, begin and mark a submission,
//!   release) runs `SERIALIZABLE` and is retried on a serialisation failure:
//!   PostgreSQL's SSI aborts one of two transactions that would otherwise interleave
//!   badly, without either waiting for a lock the other holds. Packagers also take
//!   turns (a transaction-scoped advisory lock): each reads and writes thousands of
//!   rows, and under SSI any two at once aborted each other over and over. Cancels and
//!   submissions never take that turn.
//!
//! # States
//!
//! An entry is `accepted`, `packaged` (in one file), `submitted` (its file was
//! delivered) or `rejected` (with a reason). Its row keeps what intake decided
//! (accepted or rejected) and is never rewritten by packaging: which file holds it is
//! recorded apart (SQLite: a narrow `members` table, seq → file; PostgreSQL: a row per
//! run of consecutive seqs in a file), and packaged or submitted is that file's state.
//! Putting 25,000 entries in a file inserts 25,000 pairs, or a few runs, instead of
//! rewriting 25,000 wide rows and their indexes, and submitting or releasing a file
//! touches no entry. A separate `cancellations` table overrides both: an entry whose
//! id is there is [`State::Cancelled`] everywhere
//! (its [`StoredEntry::state`], [`Ledger::eligible`], [`Ledger::status`]) from the
//! moment the insert commits, whatever its row says. Cancelling writes only that
//! table — never the entry's row — so a cancel takes no row lock a packager holds.
//!
//! ```text
//! import ──► accepted ──package──► packaged ──begin_submission──► (submitting) ──mark_submitted──► submitted
//!    │          ▲                      │
//!    ▼          └─────release_file─────┘         cancel: allowed until the file's
//! rejected                                       submission begins, refused after
//! ```
//!
//! # Why a cancelled entry is never delivered
//!
//! The cut point is [`Ledger::begin_submission`], which the submitter calls before it
//! uploads a byte. It refuses a file holding a cancelled entry, and from its commit on
//! [`Ledger::cancel`] of an entry in that file answers [`CancelOutcome::TooLate`] and
//! records nothing. The two are serialised (SQLite's single writer; PostgreSQL's SSI),
//! so a cancel either commits first — then the submission is refused, the file is
//! listed by [`Ledger::unsubmitted_files_with_cancellations`], [`Ledger::release_file`]
//! returns its other entries to `accepted` and they are packaged again — or it comes
//! after, and says so. A cancel that races a packager is safe either way: committed
//! before the package, it makes the package refuse; after, the file holds a cancelled
//! entry and is rebuilt as above.
//!
//! # Why a file is never delivered twice
//!
//! [`Ledger::begin_submission`] records the file as *submitting* (the destination and
//! the time) before the upload, [`Ledger::mark_submitted`] as *submitted* after it.
//! A crash in between leaves the file submitting: the next `begin_submission` answers
//! [`BeginOutcome::InDoubt`] instead of starting again, and the submitter must look
//! at the destination (is a file of that name and hash there?) and then either
//! `mark_submitted` (it arrived) or [`Ledger::reset_submission`] (it did not; the file
//! is packaged again and may be submitted, or rebuilt if an entry was cancelled).
//! `mark_submitted` is idempotent and refuses bytes whose hash is not the packaged
//! file's.
//!
//! Personal data: the account number is stored (files are written from the ledger)
//! but never appears in an error or a `Debug` output ([`tranche_ach::AccountNumber`]
//! masks itself), and errors show a database URL without its user information.

#![deny(missing_docs)]

mod columns;
mod error;
mod membership;
mod postgres;
mod sqlite;
mod types;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "conformance")]
pub mod faults;

use async_trait::async_trait;
use chrono::NaiveDate;
use tranche_ach::Entry;

pub use error::{mask_url, LedgerError};
pub use postgres::{PostgresLedger, PostgresOptions, PASSWORD_ENV, PASSWORD_FILE_ENV};
pub use sqlite::{SqliteLedger, FILE_NAME};
pub use types::*;

/// Where ACH entries, files and cancellations live, and the only way they change.
///
/// Contract, beyond the signatures (the `conformance` suite checks each point):
/// - Every call is atomic: it commits entirely or not at all. A call that returns an
///   error may or may not have committed; every write is safe to repeat (imports are
///   idempotent per entry id, packaging per file id, submissions per file).
/// - An entry's effective [`State`] is `Cancelled` as soon as its id is in the
///   cancellations table, whatever its row says; every read applies that override.
/// - An entry is in at most one file that is not released; a file's entries are
///   fixed when it is packaged (only [`Ledger::release_file`] takes them out, all at
///   once).
/// - No entry cancelled before its file's [`Ledger::begin_submission`] committed is
///   ever in a submitted file; an entry cannot be cancelled after that.
/// - A file is submitted at most once: a second `begin_submission` of a file whose
///   first one did not end answers [`BeginOutcome::InDoubt`].
/// - A cancel never waits for a packager or a submitter (beyond SQLite's single
///   writer finishing the transaction in progress).
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// Record entries, in one transaction, and answer one [`Imported`] per input, in
    /// order.
    ///
    /// Each entry is validated ([`Entry::validate`]): a valid one is stored
    /// `accepted`, an invalid one `rejected` with its field errors as the reason (so
    /// every input row is accounted for). An id already in the ledger — or earlier in
    /// the same call — is not written again: the answer is
    /// [`ImportOutcome::Existing`] with its current state when the payload is the
    /// same, [`ImportOutcome::Conflict`] when it differs (the stored entry is kept).
    /// An id that was cancelled before it was imported is stored, and is cancelled.
    ///
    /// What is stored is bounded whatever was sent: a rejected entry keeps each field
    /// over its limit as its first [`tranche_ach::EXCERPT_BYTES`] bytes
    /// ([`Entry::bounded`]), and its reason names the field and its length (the
    /// reason's own values are excerpts, and never a receiver's text). A repeated
    /// import is compared as stored, so two entries that differ only past the excerpt
    /// of such a field answer [`ImportOutcome::Existing`]. An id over
    /// [`tranche_ach::MAX_ENTRY_ID`] is [`ImportOutcome::Unstorable`] (the row's key
    /// is never cut), and its [`Imported::entry_id`] is an excerpt.
    async fn import(&self, entries: Vec<Entry>) -> Result<Vec<Imported>, LedgerError>;

    /// Reject an accepted entry (a rule refused it), with the reason. Only an
    /// `accepted`, uncancelled entry can be rejected; any other answers its state.
    async fn reject(&self, entry_id: &str, reason: &str) -> Result<RejectOutcome, LedgerError>;

    /// One entry with its effective state, its file and its times; `None` when the id
    /// was never imported (even if it was cancelled).
    async fn entry(&self, entry_id: &str) -> Result<Option<StoredEntry>, LedgerError>;

    /// Cancel an entry: insert its id into the cancellations table (never touching
    /// its row). Idempotent: a second cancel answers [`CancelOutcome::AlreadyCancelled`]
    /// with the first reason. An id not imported yet is cancelled too (the cancel
    /// may overtake its import; the entry is then stored cancelled). Refused with
    /// [`CancelOutcome::TooLate`] when the entry's file has begun its submission (or
    /// was submitted): its bytes may be at the bank.
    async fn cancel(&self, entry_id: &str, reason: &str) -> Result<CancelOutcome, LedgerError>;

    /// Accepted, uncancelled, unpackaged entries of one bank, submission date and
    /// same-day flag, in import order after `query.after`, at most `query.limit`
    /// (keyset paging on [`EligibleEntry::seq`]). Costs an index range scan.
    ///
    /// On PostgreSQL `seq` is the order rows were numbered, not the order they were
    /// committed: an import committing during a pass may add rows behind the cursor.
    /// A packager starts each pass from `after: None`, so such rows wait one pass.
    async fn eligible(&self, query: &EligibleQuery) -> Result<Vec<EligibleEntry>, LedgerError>;

    /// The seqs of the entries [`Ledger::eligible`] lists for `query` (same filter,
    /// order and paging), without reading the entries: what a planner claims.
    async fn eligible_seqs(&self, query: &EligibleQuery) -> Result<Vec<i64>, LedgerError>;

    /// The entries numbered `seqs` (their [`StoredEntry::seq`]), each with its effective
    /// state, in seq order; a seq no entry has is left out, a repeated one answered
    /// once. What a packager's steps read: their jobs carry seqs, never entries, and a
    /// step re-reads the state because a cancel may have come since the pass began.
    /// Costs one index range scan per run of consecutive seqs.
    async fn entries_at(&self, seqs: &[i64]) -> Result<Vec<SeqEntry>, LedgerError>;

    /// The batch keys of the entries [`Ledger::entries_at`] would answer for `seqs`
    /// (credits and debits apart: [`tranche_ach::Entry::batch_key`]), each with its
    /// effective state and submission date, in seq order. What a packager's grouper
    /// reads: the batch-level columns only, never the payee's, and one key per run of
    /// consecutive entries sharing it, rather than a whole entry and key each.
    async fn batch_keys_at(&self, seqs: &[i64]) -> Result<SeqKeys, LedgerError>;

    /// Record a file and put the given entries in it, atomically, only if every one
    /// is known, `accepted`, not cancelled and of the file's bank, submission date
    /// and same-day flag; otherwise change nothing and answer
    /// [`PackageOutcome::Refused`] with every conflicting id. Two packagers racing on
    /// the same entries never both succeed. Repeating a call that committed (same
    /// file id, same entries) answers [`PackageOutcome::AlreadyPackaged`].
    async fn package(
        &self,
        file: NewFile,
        entry_ids: Vec<String>,
    ) -> Result<PackageOutcome, LedgerError>;

    /// [`Ledger::package`] with the entries named by their seqs
    /// ([`StoredEntry::seq`]): what a packager holds (its jobs carry seqs). The same
    /// contract and answers; a conflict names the entry's id, or `seq:<n>` for a seq
    /// no entry has. Repeating a committed call (same file id, same seqs) answers
    /// [`PackageOutcome::AlreadyPackaged`]. Cheaper than by id for runs of consecutive
    /// seqs: one range scan and one range update per run.
    async fn package_seqs(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
    ) -> Result<PackageOutcome, LedgerError>;

    /// [`Ledger::entries_at`], and a mark of what the read saw for
    /// [`Ledger::package_read`]: what a packager's writer reads before writing a file.
    async fn entries_to_package(
        &self,
        seqs: &[i64],
    ) -> Result<(Vec<SeqEntry>, ReadMark), LedgerError> {
        Ok((self.entries_at(seqs).await?, ReadMark::default()))
    }

    /// [`Ledger::package_seqs`] of entries read by [`Ledger::entries_to_package`]
    /// with `mark`: the same contract and answers. A ledger may trust what the read saw
    /// and nothing since could change (each entry known, accepted then, its bank, date,
    /// same-day flag and amount), and check only the rest as it writes; an entry the
    /// read did not see accepted is checked as `package_seqs` would.
    async fn package_read(
        &self,
        file: NewFile,
        seqs: Vec<i64>,
        mark: &ReadMark,
    ) -> Result<PackageOutcome, LedgerError> {
        let _ = mark;
        self.package_seqs(file, seqs).await
    }

    /// One file with its entry ids (in import order) and which of them are cancelled.
    async fn file(&self, file_id: &str) -> Result<Option<FileDetail>, LedgerError>;

    /// Files matching the filter, in file id order.
    async fn files(&self, filter: &FileFilter) -> Result<Vec<FileRecord>, LedgerError>;

    /// Before uploading a file: check it holds no cancelled entry and record that its
    /// submission to `destination` began. From this commit on its entries cannot be
    /// cancelled. See [`BeginOutcome`] for the answers, [`BeginOutcome::InDoubt`] in
    /// particular.
    async fn begin_submission(
        &self,
        file_id: &str,
        destination: &str,
    ) -> Result<BeginOutcome, LedgerError>;

    /// After the upload: record the file and its entries `submitted`. Idempotent.
    /// Refused when the hash is not the file's, or when the file holds a cancelled
    /// entry (possible only when `begin_submission` was skipped: the caller rebuilds
    /// the file). Accepted from a packaged file as well as a submitting one.
    async fn mark_submitted(
        &self,
        file_id: &str,
        submission: Submission,
    ) -> Result<SubmitOutcome, LedgerError>;

    /// End an in-doubt submission that did not reach its destination (the caller
    /// checked): the file is packaged again, its entries cancellable again.
    async fn reset_submission(&self, file_id: &str) -> Result<ResetOutcome, LedgerError>;

    /// Packaged (not submitting, not submitted) files that hold a cancelled entry:
    /// the rebuild step releases each and packages its other entries again.
    async fn unsubmitted_files_with_cancellations(
        &self,
    ) -> Result<Vec<FileWithCancellations>, LedgerError>;

    /// Take a packaged file apart: its uncancelled entries go back to `accepted` (and
    /// are eligible again), the file is kept as `released` (its name and hash stay
    /// known). Only a packaged file can be released; a submitting one must first be
    /// [`reset`](Ledger::reset_submission).
    async fn release_file(&self, file_id: &str) -> Result<ReleaseOutcome, LedgerError>;

    /// Entries (counts and amounts) per bank and effective state, and files per bank
    /// and state, for one submission date.
    async fn status(&self, date: NaiveDate) -> Result<Status, LedgerError>;
}
