//! What the ledger takes and answers.

use std::fmt;

use chrono::NaiveDate;
use tranche_ach::{BatchKey, Entry};
use tranche_types::Timestamp;

/// An entry's effective state: its row's state, or `Cancelled` when its id is in the
/// cancellations table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Imported and valid, waiting to be packaged.
    Accepted,
    /// In a file that is not submitted yet.
    Packaged,
    /// In a submitted file.
    Submitted,
    /// Refused (invalid, or by a rule), with a reason.
    Rejected,
    /// In the cancellations table: never submitted.
    Cancelled,
}

impl State {
    /// Every state, in the order [`Status`] lists them.
    pub const ALL: [State; 5] = [
        State::Accepted,
        State::Packaged,
        State::Submitted,
        State::Rejected,
        State::Cancelled,
    ];

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Accepted => "accepted",
            State::Packaged => "packaged",
            State::Submitted => "submitted",
            State::Rejected => "rejected",
            State::Cancelled => "cancelled",
        }
    }

    /// The number a row stores (never `Cancelled`, which lives in its own table).
    pub(crate) fn code(self) -> i64 {
        match self {
            State::Accepted => 0,
            State::Packaged => 1,
            State::Submitted => 2,
            State::Rejected => 3,
            State::Cancelled => 4,
        }
    }

    pub(crate) fn from_code(code: i64) -> Option<State> {
        State::ALL.into_iter().find(|s| s.code() == code)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A file's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileState {
    /// Recorded with its entries; not being submitted.
    Packaged,
    /// Its submission began and has not ended (an upload in progress, or one a crash
    /// interrupted: in doubt).
    Submitting,
    /// Delivered.
    Submitted,
    /// Taken apart: its uncancelled entries went back to `accepted`.
    Released,
}

impl FileState {
    /// Every state.
    pub const ALL: [FileState; 4] = [
        FileState::Packaged,
        FileState::Submitting,
        FileState::Submitted,
        FileState::Released,
    ];

    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FileState::Packaged => "packaged",
            FileState::Submitting => "submitting",
            FileState::Submitted => "submitted",
            FileState::Released => "released",
        }
    }

    pub(crate) fn code(self) -> i64 {
        match self {
            FileState::Packaged => 0,
            FileState::Submitting => 1,
            FileState::Submitted => 2,
            FileState::Released => 3,
        }
    }

    pub(crate) fn from_code(code: i64) -> Option<FileState> {
        FileState::ALL.into_iter().find(|s| s.code() == code)
    }
}

impl fmt::Display for FileState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer for one imported entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The entry's id.
    pub entry_id: String,
    /// What became of it.
    pub outcome: ImportOutcome,
}

/// What an import did with one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportOutcome {
    /// Stored now, in this state: `Accepted`, `Rejected` (invalid: see
    /// [`StoredEntry::rejection`]) or `Cancelled` (a cancel came first).
    New(State),
    /// Already stored with the same payload: nothing written; its current state.
    Existing(State),
    /// Already stored with a different payload: nothing written, the stored entry
    /// kept; its current state.
    Conflict(State),
    /// Cannot be stored at all (an amount beyond a signed 64-bit number, a NUL
    /// character): nothing written; why.
    Unstorable(String),
}

/// A cancellation: why and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancellation {
    /// The reason given.
    pub reason: String,
    /// When it was recorded.
    pub at: Timestamp,
}

/// An entry as the ledger holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// Its position in import order (the paging cursor of [`EligibleEntry`]).
    pub seq: i64,
    /// The entry as imported.
    pub entry: Entry,
    /// Its effective state (`Cancelled` overrides the row).
    pub state: State,
    /// Its row's state (never `Cancelled`).
    pub recorded: State,
    /// The file it is in, when packaged or submitted.
    pub file_id: Option<String>,
    /// Why it was rejected.
    pub rejection: Option<String>,
    /// Its cancellation, if any.
    pub cancellation: Option<Cancellation>,
    /// When it was imported.
    pub imported_at: Timestamp,
    /// When it was last packaged.
    pub packaged_at: Option<Timestamp>,
    /// When its file was submitted.
    pub submitted_at: Option<Timestamp>,
}

/// What [`Ledger::reject`](crate::Ledger::reject) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectOutcome {
    /// Rejected now.
    Rejected,
    /// Not accepted (or cancelled): left as it is, in this state.
    NotAccepted(State),
    /// No such entry.
    Unknown,
}

/// What [`Ledger::cancel`](crate::Ledger::cancel) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Cancelled now. `known`: whether the entry was imported; `file_id`: the
    /// unsubmitted file it is packaged in, which must be rebuilt.
    Cancelled {
        /// Whether the entry was already imported.
        known: bool,
        /// The packaged file that now holds a cancelled entry.
        file_id: Option<String>,
    },
    /// It was cancelled already: the first cancellation.
    AlreadyCancelled(Cancellation),
    /// Its file's submission has begun (or ended): nothing recorded.
    TooLate {
        /// The file.
        file_id: String,
        /// That file's state: submitting or submitted.
        file_state: FileState,
    },
}

/// Which entries [`Ledger::eligible`](crate::Ledger::eligible) lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EligibleQuery {
    /// The originating bank.
    pub bank: String,
    /// The submission date.
    pub submission_date: NaiveDate,
    /// Same Day ACH entries, or the others.
    pub same_day: bool,
    /// Only entries after this [`EligibleEntry::seq`] (the last of the previous page).
    pub after: Option<i64>,
    /// At most this many.
    pub limit: u32,
}

/// An entry ready to be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EligibleEntry {
    /// Its position in import order: the cursor for the next page.
    pub seq: i64,
    /// The entry.
    pub entry: Entry,
}

/// An entry read by its seq ([`Ledger::entries_at`](crate::Ledger::entries_at)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqEntry {
    /// Its position in import order.
    pub seq: i64,
    /// The entry.
    pub entry: Entry,
    /// Its effective state (`Cancelled` overrides the row).
    pub state: State,
}

/// What a ledger saw when it read entries for a packager
/// ([`Ledger::entries_to_package`](crate::Ledger::entries_to_package)), so that
/// [`Ledger::package_read`](crate::Ledger::package_read) need not read them again.
/// Opaque: only the ledger that made it fills it, so a caller cannot vouch for
/// entries it did not read. Empty ([`ReadMark::default`]) means "check everything".
#[derive(Debug, Clone, Default)]
pub struct ReadMark {
    pub(crate) seen: Option<SeenAccepted>,
}

/// The accepted, unheld, uncancelled entries one read saw, and when.
#[derive(Debug, Clone)]
pub(crate) struct SeenAccepted {
    /// A ledger's own token of the snapshot (PostgreSQL: the reject count then).
    pub at: i64,
    /// Each distinct (bank, submission date, same-day) among them.
    pub scopes: Vec<(String, NaiveDate, bool)>,
    /// Per seq: its amount, whether it is a credit, and its scope's index.
    pub entries: std::collections::HashMap<i64, (u64, bool, usize)>,
}

impl SeenAccepted {
    /// What `read` (read at `at`) says of its accepted entries.
    pub(crate) fn of(at: i64, read: &[SeqEntry]) -> SeenAccepted {
        let mut seen = SeenAccepted {
            at,
            scopes: Vec::new(),
            entries: std::collections::HashMap::with_capacity(read.len()),
        };
        for e in read.iter().filter(|e| e.state == State::Accepted) {
            let x = &e.entry;
            let scope =
                match seen.scopes.iter().position(|(b, d, s)| {
                    *b == x.bank && *d == x.submission_date && *s == x.same_day
                }) {
                    Some(i) => i,
                    None => {
                        seen.scopes
                            .push((x.bank.clone(), x.submission_date, x.same_day));
                        seen.scopes.len() - 1
                    }
                };
            let credit = x.direction() == tranche_ach::Direction::Credit;
            seen.entries.insert(e.seq, (x.amount_cents, credit, scope));
        }
        seen
    }

    /// The credit and debit totals of `seqs` for `file`, when this read saw every one
    /// of them accepted and of the file's bank, date and same-day flag, each once.
    pub(crate) fn totals(&self, file: &NewFile, seqs: &[i64]) -> Option<(u64, u64)> {
        let scope = self.scopes.iter().position(|(b, d, s)| {
            *b == file.bank && *d == file.submission_date && *s == file.same_day
        })?;
        let mut distinct = std::collections::HashSet::with_capacity(seqs.len());
        let (mut credit, mut debit) = (0, 0);
        for seq in seqs {
            let &(amount, is_credit, of) = self.entries.get(seq)?;
            if of != scope || !distinct.insert(*seq) {
                return None;
            }
            if is_credit {
                credit += amount;
            } else {
                debit += amount;
            }
        }
        Some((credit, debit))
    }
}

/// Entries' batch keys read by seq ([`Ledger::batch_keys_at`](crate::Ledger::batch_keys_at)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqKeys {
    /// The keys: one per run of consecutive entries that share one (a payroll's
    /// entries sit next to each other), so a key may appear again after another.
    pub keys: Vec<BatchKey>,
    /// Every entry found, in seq order.
    pub entries: Vec<SeqKey>,
}

/// One entry of [`SeqKeys`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqKey {
    /// Its position in import order.
    pub seq: i64,
    /// Its effective state (`Cancelled` overrides the row).
    pub state: State,
    /// Its submission date.
    pub submission_date: NaiveDate,
    /// Its batch key: an index into [`SeqKeys::keys`].
    pub key: usize,
}

impl SeqKeys {
    /// Add an entry whose key is `key` if it is not the last one's, or the last one's
    /// (`same_as_last` says which; `key` is only called when needed).
    pub(crate) fn push(
        &mut self,
        seq: i64,
        state: State,
        submission_date: NaiveDate,
        same_as_last: impl FnOnce(&BatchKey) -> bool,
        key: impl FnOnce() -> BatchKey,
    ) {
        let reuse = self.keys.last().is_some_and(same_as_last);
        if !reuse {
            self.keys.push(key());
        }
        self.entries.push(SeqKey {
            seq,
            state,
            submission_date,
            key: self.keys.len() - 1,
        });
    }
}

/// Consecutive runs of `seqs` as inclusive `(first, last)` ranges, sorted and without
/// repeats: how a ledger reads many entries with few range scans.
pub(crate) fn seq_runs(seqs: &[i64]) -> Vec<(i64, i64)> {
    let mut sorted = seqs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for s in sorted {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == s => *last = s,
            _ => runs.push((s, s)),
        }
    }
    runs
}

/// A file to record with [`Ledger::package`](crate::Ledger::package): its bytes are
/// written by the caller (deterministically, from the entries), the ledger keeps its
/// identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// The caller's unique id of the file.
    pub file_id: String,
    /// The originating bank every entry goes through.
    pub bank: String,
    /// The submission date of every entry.
    pub submission_date: NaiveDate,
    /// Whether it holds Same Day ACH entries (all of them are, or none).
    pub same_day: bool,
    /// The submission window it is for (e.g. `sd1`, `regular`).
    pub window: String,
    /// The file's name at the destination.
    pub name: String,
    /// The hash of its bytes (as the caller computes it, e.g. SHA-256 in hex).
    pub hash: String,
}

/// A conflicting entry of a refused [`Ledger::package`](crate::Ledger::package).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageConflict {
    /// The entry id.
    pub entry_id: String,
    /// Why it cannot go in the file.
    pub why: ConflictReason,
}

/// Why an entry cannot be packaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConflictReason {
    /// Never imported.
    Unknown,
    /// Not accepted, or cancelled: its effective state.
    State(State),
    /// Of another bank, submission date or same-day flag than the file.
    OtherFile,
    /// Listed twice in the call.
    Duplicate,
}

/// What [`Ledger::package`](crate::Ledger::package) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageOutcome {
    /// Recorded; the entries are packaged in it.
    Packaged(FileRecord),
    /// This file id holds exactly these entries already (a repeated call).
    AlreadyPackaged(FileRecord),
    /// Nothing changed: these entries cannot go in the file.
    Refused(Vec<PackageConflict>),
    /// Nothing changed: the file id is taken by a file of other entries.
    FileIdTaken,
    /// Nothing changed: another file of the bank holds this name at the bank
    /// ([`FileRecord::holds_name`]): two different files under one name would be two
    /// files with one file ID modifier at the bank.
    NameTaken {
        /// The file that holds the name.
        file_id: String,
    },
    /// Nothing changed: no entries given.
    Empty,
}

/// A recorded file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// The file as packaged.
    pub file: NewFile,
    /// Its state.
    pub state: FileState,
    /// How many entries it holds.
    pub entries: u64,
    /// The sum of its credits, in cents.
    pub credit_cents: u64,
    /// The sum of its debits, in cents.
    pub debit_cents: u64,
    /// When it was packaged.
    pub created_at: Timestamp,
    /// Its submission, once one began.
    pub submission: Option<SubmissionRecord>,
    /// Whether a submission of it ever began, kept through
    /// [`reset_submission`](crate::Ledger::reset_submission): its bytes may be at the
    /// bank, so its name stays its own even once it is released.
    pub submission_began: bool,
}

impl FileRecord {
    /// Whether the file holds its name at the bank (and so its file ID modifier): every
    /// file does but one released before any submission of it began. Such a file never
    /// reached the bank, so its name can be used again by a file rebuilt from its
    /// entries; otherwise every cancel of a packaged entry would spend one of the
    /// 36 modifiers a bank allows per day.
    pub fn holds_name(&self) -> bool {
        self.state != FileState::Released || self.submission_began
    }
}

/// A file's submission as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionRecord {
    /// Where it goes.
    pub destination: String,
    /// When `begin_submission` recorded it (`None` when `mark_submitted` came alone).
    pub began_at: Option<Timestamp>,
    /// When the upload ended, as the submitter said.
    pub submitted_at: Option<Timestamp>,
}

/// A file with its entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDetail {
    /// The file.
    pub record: FileRecord,
    /// Its entries' ids, in import order.
    pub entry_ids: Vec<String>,
    /// Those of them that are cancelled.
    pub cancelled: Vec<String>,
}

/// Which files [`Ledger::files`](crate::Ledger::files) lists (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileFilter {
    /// Of this bank.
    pub bank: Option<String>,
    /// Of this submission date.
    pub submission_date: Option<NaiveDate>,
    /// In this state.
    pub state: Option<FileState>,
}

/// The end of an upload, for [`Ledger::mark_submitted`](crate::Ledger::mark_submitted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// When the upload ended.
    pub at: Timestamp,
    /// Where the file went.
    pub destination: String,
    /// The hash of the bytes delivered: must be the packaged file's.
    pub hash: String,
}

/// What [`Ledger::begin_submission`](crate::Ledger::begin_submission) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeginOutcome {
    /// Recorded: upload now, then `mark_submitted`.
    Started {
        /// When.
        began_at: Timestamp,
    },
    /// A submission began earlier and never ended (a crash mid-upload?): do not
    /// upload again before checking the destination; then `mark_submitted` or
    /// `reset_submission`.
    InDoubt {
        /// When it began.
        began_at: Timestamp,
        /// Where it was going.
        destination: String,
    },
    /// Delivered already: nothing to do.
    AlreadySubmitted(SubmissionRecord),
    /// It holds cancelled entries: release it and package again.
    Refused {
        /// The cancelled entries.
        cancelled: Vec<String>,
    },
    /// Released: its entries are elsewhere now.
    Released,
    /// No such file.
    UnknownFile,
}

/// What [`Ledger::mark_submitted`](crate::Ledger::mark_submitted) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Recorded submitted, with its entries.
    Submitted,
    /// It was submitted already (the first record is kept).
    AlreadySubmitted(SubmissionRecord),
    /// It holds cancelled entries: nothing recorded.
    Refused {
        /// The cancelled entries.
        cancelled: Vec<String>,
    },
    /// The hash is not the packaged file's: nothing recorded.
    HashMismatch {
        /// The packaged file's hash.
        expected: String,
    },
    /// Released: nothing recorded.
    Released,
    /// No such file.
    UnknownFile,
}

/// What [`Ledger::reset_submission`](crate::Ledger::reset_submission) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetOutcome {
    /// The file is packaged again.
    Reset,
    /// It was not submitting: left in this state.
    NotSubmitting(FileState),
    /// No such file.
    UnknownFile,
}

/// What [`Ledger::release_file`](crate::Ledger::release_file) did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Released: `returned` entries are accepted again, `cancelled` stay cancelled.
    Released {
        /// Entries back to accepted.
        returned: u64,
        /// Cancelled entries (their rows back to accepted too, still cancelled).
        cancelled: u64,
    },
    /// Released already.
    AlreadyReleased,
    /// Submitting or submitted: left as it is.
    NotReleasable(FileState),
    /// No such file.
    UnknownFile,
}

/// A packaged file that holds cancelled entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWithCancellations {
    /// The file id.
    pub file_id: String,
    /// Its cancelled entries.
    pub cancelled: Vec<String>,
}

/// How many entries, and how much.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Entries.
    pub entries: u64,
    /// The sum of their amounts, in cents.
    pub cents: u64,
}

/// One bank's figures for a submission date.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BankStatus {
    /// The bank.
    pub bank: String,
    /// Entries by effective state, in [`State::ALL`] order.
    pub entries: [Tally; 5],
    /// Files by state, in [`FileState::ALL`] order.
    pub files: [u64; 4],
}

impl BankStatus {
    /// The entries in one effective state.
    pub fn tally(&self, state: State) -> Tally {
        self.entries[state.code() as usize]
    }

    /// The files in one state.
    pub fn file_count(&self, state: FileState) -> u64 {
        self.files[state.code() as usize]
    }
}

/// [`Ledger::status`](crate::Ledger::status)'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The submission date.
    pub date: NaiveDate,
    /// One per bank with entries or files that day, by bank name.
    pub banks: Vec<BankStatus>,
}

impl Status {
    /// One bank's figures (all zero when it has none).
    pub fn bank(&self, bank: &str) -> BankStatus {
        self.banks
            .iter()
            .find(|b| b.bank == bank)
            .cloned()
            .unwrap_or_else(|| BankStatus {
                bank: bank.to_string(),
                ..BankStatus::default()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::{sample_entry, sample_file};

    #[test]
    fn a_read_vouches_only_for_the_accepted_entries_it_saw_in_the_file_s_scope() {
        let d = NaiveDate::from_ymd_opt(2026, 5, 4).unwrap();
        let mut read: Vec<SeqEntry> = (1..=4)
            .map(|i| SeqEntry {
                seq: i,
                entry: sample_entry(&format!("r-{i}"), "r", d, 100 * i as u64),
                state: State::Accepted,
            })
            .collect();
        read[1].entry.transaction_code = tranche_ach::TransactionCode::new(
            tranche_ach::AccountKind::Checking,
            tranche_ach::Direction::Debit,
        );
        read[2].state = State::Cancelled;
        read[3].entry.bank = "other".into();
        let seen = SeenAccepted::of(7, &read);
        let file = sample_file("r-F", "r", d);
        assert_eq!(seen.totals(&file, &[1, 2]), Some((100, 200)));
        assert_eq!(seen.totals(&file, &[1, 3]), None, "cancelled when read");
        assert_eq!(seen.totals(&file, &[1, 4]), None, "another bank");
        assert_eq!(seen.totals(&file, &[1, 5]), None, "not read");
        assert_eq!(seen.totals(&file, &[1, 1]), None, "repeated");
        assert_eq!(
            seen.totals(&sample_file("r-G", "other", d), &[4]),
            Some((400, 0))
        );
    }
}
