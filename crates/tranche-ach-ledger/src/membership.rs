//! Whether an entry may go in a file: the one rule both ledgers apply when packaging,
//! by id or by seq.

use chrono::NaiveDate;

use crate::types::{ConflictReason, FileRecord, FileState, NewFile, PackageOutcome, State};

/// What packaging reads of an entry it is asked to put in a file.
pub(crate) struct Member<'a> {
    /// Its row's state.
    pub state: State,
    /// Whether its id is in the cancellations table.
    pub cancelled: bool,
    pub bank: &'a str,
    pub submission_date: NaiveDate,
    pub same_day: bool,
}

impl Member<'_> {
    /// Why it cannot go in `file`, or `None` when it can.
    pub(crate) fn conflict(&self, file: &NewFile) -> Option<ConflictReason> {
        if self.cancelled {
            Some(ConflictReason::State(State::Cancelled))
        } else if self.state != State::Accepted {
            Some(ConflictReason::State(self.state))
        } else if self.bank != file.bank
            || self.submission_date != file.submission_date
            || self.same_day != file.same_day
        {
            Some(ConflictReason::OtherFile)
        } else {
            None
        }
    }
}

/// The id a conflict names for a seq no entry has.
pub(crate) fn unknown_seq(seq: i64) -> String {
    format!("seq:{seq}")
}

/// The answer to packaging a file id that is recorded already: the same call again
/// (same file, same members) or another file's id.
pub(crate) fn repeated<T: Ord>(
    existing: FileRecord,
    file: &NewFile,
    held: impl IntoIterator<Item = T>,
    asked: Vec<T>,
) -> PackageOutcome {
    let mut held: Vec<T> = held.into_iter().collect();
    held.sort_unstable();
    let asked_len = asked.len();
    let mut asked = asked;
    asked.sort_unstable();
    asked.dedup();
    let same = existing.state != FileState::Released
        && existing.file == *file
        && held == asked
        && asked.len() == asked_len;
    if same {
        PackageOutcome::AlreadyPackaged(existing)
    } else {
        PackageOutcome::FileIdTaken
    }
}
