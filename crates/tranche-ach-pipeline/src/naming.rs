//! Names of everything a pass makes: runs, files, store keys, lock keys, modifiers and
//! the trace numbers each file may use.

use chrono::NaiveDate;
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

/// The ledger's id of a bank's file of a day: `<bank>-<yyyymmdd>-<modifier>`. Unique
/// per bank, day and modifier, so two packagers that pick the same modifier cannot
/// both record a file (the ledger refuses the second id).
pub fn file_id(bank: &str, date: NaiveDate, modifier: char) -> String {
    format!("{bank}-{}-{modifier}", date.format("%Y%m%d"))
}

/// The modifier a [`file_id`] ends with.
pub fn modifier_of(file_id: &str) -> Option<char> {
    file_id
        .chars()
        .last()
        .filter(|c| modifier_index(*c).is_some())
}

/// The file's name at the bank.
pub fn file_name(file_id: &str) -> String {
    format!("{file_id}.ach")
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

/// The first modifiers of `MODIFIERS` not in `used`, at most `n`.
pub fn free_modifiers(used: &[char], n: usize) -> Vec<char> {
    MODIFIERS
        .iter()
        .map(|&m| m as char)
        .filter(|m| !used.contains(m))
        .take(n)
        .collect()
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
        let id = file_id("first", d, 'C');
        assert_eq!(id, "first-20260302-C");
        assert_eq!(modifier_of(&id), Some('C'));
        assert_eq!(file_name(&id), "first-20260302-C.ach");
        assert_eq!(free_modifiers(&['A', 'C'], 3), vec!['B', 'D', 'E']);
        assert_eq!(free_modifiers(&[], 40).len(), 36);
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
}
