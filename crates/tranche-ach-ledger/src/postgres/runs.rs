//! Reads of many entries by seq on PostgreSQL, as runs of consecutive seqs, and the
//! membership of entries in files, stored as such runs.
//!
//! The entries a grouper, a writer or a packager's check reads are few runs: an
//! employer's entries are imported together, so a file of 25,000 is 1 to 300 runs.
//! `seq = ANY(array)` descends the primary key once per seq, and a lookup of each
//! entry's file descends another index: about 15 µs an entry under load, for three
//! reads of every entry a night. Read as runs, each is one range scan of `entries`
//! and one probe of `member_runs` (the files' own runs) per run, with neighbouring rows
//! on the same heap pages.
//!
//! The plan must not go bad while statistics lag (they do: the entries were imported
//! minutes ago, and `member_runs` fills from empty during the night faster than
//! autovacuum analyses it). Joined plainly to the runs, on a range of unknown bounds
//! the planner guesses a ninth of the table per run, and it chose to walk all of
//! `entries` in index order with every run as a filter (packaging a million entries
//! took ten minutes instead of seconds). So each run is a `LATERAL` subquery with a
//! `LIMIT`: that cannot be flattened into a join, so it is scanned once per run, by
//! its range; and these reads turn sequential scans off for their transaction
//! ([`by_index`]). The reads a night repeats by the thousand (a grouper's, a writer's,
//! the membership probe) are prepared once per connection: planning a grouper's read
//! took 0.3–0.6 ms against 1.3 ms to run it, and a round trip more.

use deadpool_postgres::GenericClient;

use super::R;

/// Sorted, distinct seqs as runs of consecutive ones: `lo[i]..=hi[i]`, ascending.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Runs {
    pub lo: Vec<i64>,
    pub hi: Vec<i64>,
}

impl Runs {
    /// The runs of `seqs`, in any order, repeats read once.
    pub fn of(seqs: &[i64]) -> Runs {
        let (lo, hi) = crate::types::seq_runs(seqs).into_iter().unzip();
        Runs { lo, hi }
    }

    /// How many seqs the runs hold.
    pub fn entries(&self) -> u64 {
        self.lo
            .iter()
            .zip(&self.hi)
            .map(|(lo, hi)| (hi - lo + 1) as u64)
            .sum()
    }
}

/// The `FROM` items naming the entries `e` in the runs bound as `$1` (starts) and `$2`
/// (ends); a query's own parameters follow from `$3`.
pub(super) const ENTRIES_IN_RUNS: &str = "unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) \
    CROSS JOIN LATERAL (SELECT * FROM entries WHERE seq BETWEEN r.lo AND r.hi \
    ORDER BY seq LIMIT r.hi - r.lo + 1) e";

/// Keep the rest of the transaction to index scans (see the module's doc).
pub(super) async fn by_index<C: GenericClient>(c: &C) -> R<()> {
    c.batch_execute("SET LOCAL enable_seqscan = off").await?;
    Ok(())
}

/// The `FROM` item naming the entries `e` of the member run `m` (its range scan of
/// `entries`, in the [`ENTRIES_IN_RUNS`] form for the same reason).
pub(super) const ENTRIES_OF_MEMBER_RUN: &str = "CROSS JOIN LATERAL (SELECT * FROM entries \
    WHERE seq >= lower(m.seqs) AND seq < upper(m.seqs) ORDER BY seq \
    LIMIT upper(m.seqs) - lower(m.seqs)) e";

/// Which of some entries files hold: the member runs that overlap them, each with its
/// file's recorded state code for them, packaged (1; also while the file's submission
/// is under way) or submitted (2).
#[derive(Debug, Default)]
pub(super) struct Held {
    /// `[lo, end)` and the code, ascending and disjoint (the exclusion constraint).
    runs: Vec<(i64, i64, i16)>,
}

impl Held {
    /// An entry's recorded state (before a cancellation overrides it): its row's unless
    /// a file holds it.
    pub fn recorded(&self, seq: i64, row_state: i16) -> i16 {
        let after = self.runs.partition_point(|&(lo, _, _)| lo <= seq);
        match after.checked_sub(1).map(|i| self.runs[i]) {
            Some((_, end, code)) if seq < end => code,
            _ => row_state,
        }
    }

    /// Whether a file holds `seq`.
    pub fn holds(&self, seq: i64) -> bool {
        self.recorded(seq, -1) != -1
    }

    fn from_rows(mut runs: Vec<(i64, i64, i16)>) -> Held {
        // A member run overlapping two of the asked runs comes once for each.
        runs.sort_unstable();
        runs.dedup();
        Held { runs }
    }
}

/// The member runs overlapping `runs`: a probe of the exclusion constraint's index
/// per asked run.
pub(super) async fn held<C: GenericClient>(c: &C, runs: &Runs) -> R<Held> {
    let read = c
        .prepare_cached(
            "SELECT lower(m.seqs), upper(m.seqs), f.state \
             FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) \
             JOIN member_runs m ON m.seqs && int8range(r.lo, r.hi, '[]') \
             JOIN files f ON f.file_id = m.file_id",
        )
        .await?;
    let rows = c.query(&read, &[&runs.lo, &runs.hi]).await?;
    let mut found = Vec::with_capacity(rows.len());
    for r in &rows {
        let file_state: i16 = r.try_get(2)?;
        found.push((
            r.try_get(0)?,
            r.try_get(1)?,
            if file_state == 2 { 2 } else { 1 },
        ));
    }
    Ok(Held::from_rows(found))
}

#[cfg(test)]
mod tests {
    use super::{Held, Runs};

    #[test]
    fn consecutive_seqs_make_one_run_and_gaps_start_new_ones() {
        assert_eq!(Runs::of(&[]), Runs::default());
        let runs = Runs::of(&[10, 9, 3, 1, 2, 7, 3]);
        assert_eq!(runs.lo, [1, 7, 9]);
        assert_eq!(runs.hi, [3, 7, 10]);
        assert_eq!(runs.entries(), 6);
        let runs = Runs::of(&[-2, -1, 0, 5]);
        assert_eq!((runs.lo, runs.hi), (vec![-2, 5], vec![0, 5]));
    }

    #[test]
    fn held_finds_a_seq_in_its_member_run_and_nowhere_else() {
        let held = Held::from_rows(vec![(10, 13, 1), (3, 5, 2), (10, 13, 1), (20, 21, 1)]);
        let recorded: Vec<i16> = (1..23).map(|s| held.recorded(s, 0)).collect();
        assert_eq!(
            recorded,
            [0, 0, 2, 2, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]
        );
        assert!(held.holds(12) && !held.holds(13));
        assert!(!Held::default().holds(0));
    }
}
