//! Names of everything a pass makes: runs, files, store keys, lock keys, modifiers and
//! the trace numbers each file may use.

use chrono::NaiveDate;
use tranche_ach_ledger::{FileRecord, FileState};
use tranche_storage::{InvalidKey, StoreKey};
use tranche_types::{InvalidName, RunName};

/// File ID modifiers in the order a day uses them: NACHA allows `A`-`Z` and `0`-`9`,
/// and a bank tells apart the files of one origin and day by it.
pub const MODIFIERS: &[u8; 36] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// Trace sequence numbers each file of a bank's day may use: file `k` of the day
/// (its modifier's place in [`MODIFIERS`]) numbers its entries from
/// `k * TRACE_BLOCK + 1`. Trace numbers are thus unique across a bank's day without
/// a counter shared between packagers, and ascending within each file; 36 blocks fit
/// the 7 digits of the sequence number.
pub const TRACE_BLOCK: u32 = 270_000;

/// The run a bank's window of one day works in: `ach/<bank>/<window>/<date>`.
pub fn run_name(bank: &str, window: &str, date: NaiveDate) -> Result<RunName, InvalidName> {
    RunName::new(format!("ach/{bank}/{window}/{date}"))
}

/// The place of `modifier` in the day's order.
pub fn modifier_index(modifier: char) -> Option<usize> {
    MODIFIERS.iter().position(|&m| m as char == modifier)
}

/// The first trace sequence number of the file with `modifier`.
pub fn first_trace_sequence(modifier: char) -> u32 {
    modifier_index(modifier).map_or(1, |k| k as u32 * TRACE_BLOCK + 1)
}

/// The file's name at the bank: `<bank>-<yyyymmdd>-<modifier>.ach`. The bank tells a
/// day's files apart by their modifier, so one name is one modifier; the ledger lets
/// one file at a time hold it ([`FileRecord::holds_name`]).
pub fn file_name(bank: &str, date: NaiveDate, modifier: char) -> String {
    format!("{bank}-{}-{modifier}.ach", date.format("%Y%m%d"))
}

/// The ledger's id of the `nth` file (from 1) of a bank's day to take `modifier`:
/// `<bank>-<yyyymmdd>-<modifier>`, then `…-<modifier>-<nth>` for a file that takes the
/// modifier back from a file released before it was sent. Ids are never used twice,
/// so an upload job, a manifest or a stored file named by an id always means one file.
pub fn file_id(bank: &str, date: NaiveDate, modifier: char, nth: u32) -> String {
    let first = format!("{bank}-{}-{modifier}", date.format("%Y%m%d"));
    if nth <= 1 {
        first
    } else {
        format!("{first}-{nth}")
    }
}

/// The modifier of a file named by [`file_name`].
pub fn modifier_of_name(name: &str) -> Option<char> {
    name.strip_suffix(".ach")?
        .chars()
        .last()
        .filter(|c| modifier_index(*c).is_some())
}

/// A bank's day as its file ID modifiers stand: which ones files hold, and how many
/// files ever took each (for the next one's id).
#[derive(Debug, Clone, Default)]
pub struct DayModifiers {
    /// Held by a file that was sent, is being sent, or may be at the bank.
    pub sent: Vec<char>,
    /// Held by a packaged file not sent yet (it gives its modifier back if released).
    pub waiting: Vec<char>,
    taken: Vec<(char, u32)>,
}

impl DayModifiers {
    /// The modifiers of `files`, the day's files of one bank (in every state).
    pub fn of(files: &[FileRecord]) -> DayModifiers {
        let mut day = DayModifiers::default();
        for f in files {
            let Some(m) = modifier_of_name(&f.file.name) else {
                continue;
            };
            match day.taken.iter_mut().find(|(t, _)| *t == m) {
                Some((_, n)) => *n += 1,
                None => day.taken.push((m, 1)),
            }
            if f.state == FileState::Packaged && !f.submission_began {
                day.waiting.push(m);
            } else if f.holds_name() {
                day.sent.push(m);
            }
        }
        day
    }

    /// The first modifiers of [`MODIFIERS`] no file holds, at most `n`.
    pub fn free(&self, n: usize) -> Vec<char> {
        MODIFIERS
            .iter()
            .map(|&m| m as char)
            .filter(|m| !self.sent.contains(m) && !self.waiting.contains(m))
            .take(n)
            .collect()
    }

    /// The id of the next file of `bank`'s day `date` to take `modifier`.
    pub fn next_id(&self, bank: &str, date: NaiveDate, modifier: char) -> String {
        let before = self
            .taken
            .iter()
            .find(|(t, _)| *t == modifier)
            .map_or(0, |(_, n)| *n);
        file_id(bank, date, modifier, before + 1)
    }
}

/// Where a file's bytes are kept: by name and hash, so two writers that chose the same
/// modifier never overwrite each other's bytes (only one of them is recorded).
pub fn file_key(date: NaiveDate, file_id: &str, hash: &str) -> Result<StoreKey, InvalidKey> {
    let short = &hash[..hash.len().min(16)];
    StoreKey::partitioned(
        "ach-file",
        &date.to_string(),
        &format!("{file_id}-{short}"),
        "ach",
    )
}

/// Where a pass's manifest is kept.
pub fn manifest_key(
    date: NaiveDate,
    bank: &str,
    window: &str,
    pass: i64,
) -> Result<StoreKey, InvalidKey> {
    StoreKey::partitioned(
        "ach-manifest",
        &date.to_string(),
        &format!("{bank}-{window}-{pass}"),
        "json",
    )
}

/// Seqs per claim key: a pass claims its entries a bucket of this many consecutive
/// seqs at a time.
pub const CLAIM_BUCKET: i64 = 1_000;

/// The engine lock that claims, for a pass, the entries of one bank, submission date
/// and same-day flag whose seqs fall in one bucket of [`CLAIM_BUCKET`].
///
/// Why buckets and not one lock per entry: a million entries would be a million lock
/// rows claimed and released per pass, more work than the packaging. The entries of
/// a bank, date and same-day flag are the only ones two passes can both want (a pass
/// takes nothing else), so keying by them and a bucket of seqs conflicts exactly when
/// two passes could touch the same entries — at the cost that a pass finding a bucket
/// held leaves all of that bucket's entries to the holder, which packages them.
pub fn claim_key(bank: &str, date: NaiveDate, same_day: bool, seq: i64) -> String {
    let kind = if same_day { "sd" } else { "nd" };
    format!("ach:{bank}:{date}:{kind}:{}", seq.div_euclid(CLAIM_BUCKET))
}

/// The claim keys covering `seqs` (each once, ascending).
pub fn claim_keys(
    bank: &str,
    date: NaiveDate,
    same_day: bool,
    seqs: impl IntoIterator<Item = i64>,
) -> Vec<String> {
    let mut buckets: Vec<i64> = seqs
        .into_iter()
        .map(|s| s.div_euclid(CLAIM_BUCKET))
        .collect();
    buckets.dedup();
    buckets.sort_unstable();
    buckets.dedup();
    buckets
        .into_iter()
        .map(|b| claim_key(bank, date, same_day, b * CLAIM_BUCKET))
        .collect()
}

/// The task kind of a bank's uploads: one kind per bank, so the engine's kind limit
/// paces each bank's uploads on its own.
pub fn upload_kind(bank: &str) -> String {
    format!("{}{bank}", crate::tasks::UPLOAD_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_blocks_never_overlap_and_fit_seven_digits() {
        let last = first_trace_sequence('9') + TRACE_BLOCK - 1;
        assert!(last <= tranche_ach::MAX_TRACE_SEQUENCE, "{last}");
        assert_eq!(first_trace_sequence('A'), 1);
        assert_eq!(first_trace_sequence('B'), TRACE_BLOCK + 1);
    }

    #[test]
    fn claims_cover_buckets_of_a_scope() {
        let d = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        assert_eq!(
            claim_key("first", d, true, 1_999),
            "ach:first:2026-03-02:sd:1"
        );
        assert_eq!(
            claim_keys("first", d, false, [5, 999, 1_000, 3_500]),
            vec![
                "ach:first:2026-03-02:nd:0",
                "ach:first:2026-03-02:nd:1",
                "ach:first:2026-03-02:nd:3"
            ]
        );
        assert_ne!(
            claim_key("first", d, true, 5),
            claim_key("second", d, true, 5)
        );
    }

    #[test]
    fn ids_names_and_modifiers() {
        let d = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        let id = file_id("first", d, 'C', 1);
        assert_eq!(id, "first-20260302-C");
        assert_eq!(file_id("first", d, 'C', 2), "first-20260302-C-2");
        let name = file_name("first", d, 'C');
        assert_eq!(name, "first-20260302-C.ach");
        assert_eq!(modifier_of_name(&name), Some('C'));
        assert_eq!(modifier_of_name("first-20260302-c.ach"), None);
        let key = file_key(d, &id, "00ff00ff00ff00ff00ff").unwrap();
        assert!(
            key.as_str()
                .ends_with("ach-file/2026-03-02/first-20260302-C-00ff00ff00ff00ff.ach"),
            "{key:?}"
        );
        assert_eq!(
            run_name("first", "sd1", d).unwrap().as_str(),
            "ach/first/sd1/2026-03-02"
        );
    }

    fn file(m: char, nth: u32, state: FileState, began: bool) -> FileRecord {
        let d = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        FileRecord {
            file: tranche_ach_ledger::NewFile {
                file_id: file_id("first", d, m, nth),
                bank: "first".into(),
                submission_date: d,
                same_day: false,
                window: "nd".into(),
                name: file_name("first", d, m),
                hash: String::new(),
            },
            state,
            entries: 1,
            credit_cents: 0,
            debit_cents: 0,
            created_at: tranche_types::Timestamp(0),
            submission: None,
            submission_began: began,
        }
    }

    #[test]
    fn a_modifier_released_unsent_is_free_again_under_a_new_id() {
        let d = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        let day = DayModifiers::of(&[
            file('A', 1, FileState::Submitted, true),
            file('B', 1, FileState::Released, false),
            file('C', 1, FileState::Released, true),
            file('D', 1, FileState::Packaged, false),
            file('B', 2, FileState::Released, false),
        ]);
        assert_eq!(day.sent, ['A', 'C']);
        assert_eq!(day.waiting, ['D']);
        assert_eq!(day.free(3), ['B', 'E', 'F']);
        assert_eq!(day.next_id("first", d, 'B'), "first-20260302-B-3");
        assert_eq!(day.next_id("first", d, 'E'), "first-20260302-E");
        assert_eq!(DayModifiers::default().free(40).len(), 36);
    }
}
