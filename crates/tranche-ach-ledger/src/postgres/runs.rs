//! Reads of many entries by seq on PostgreSQL, as runs of consecutive seqs.
//!
//! The entries a grouper, a writer or a packager's check reads are few runs: an
//! employer's entries are imported together, so a file of 25,000 is 1 to 300 runs.
//! `seq = ANY(array)` descends the primary key once per seq, and a scalar subquery into
//! `members` per entry descends that index again: about 15 µs an entry under load, for
//! three reads of every entry a night. Read as runs, each is one range scan of each
//! index, with neighbouring rows on the same heap pages.
//!
//! The plan must not go bad while statistics lag (they do: the entries were imported
//! minutes ago, and `members` fills from empty during the night faster than autovacuum
//! analyses it). Joined plainly to the runs, on a range of unknown bounds the planner
//! guesses a ninth of the table per run, and it chose to walk all of `entries` in index
//! order with every run as a filter (packaging a million entries took ten minutes
//! instead of seconds). So each run is a `LATERAL` subquery with a `LIMIT`: that cannot
//! be flattened into a join, so it is scanned once per run, by its range; and these
//! reads turn sequential scans off for their transaction ([`by_index`]).

use std::collections::HashMap;

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
        let mut sorted = seqs.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        Runs::of_sorted(&sorted)
    }

    /// The runs of `sorted` (ascending and distinct).
    pub fn of_sorted(sorted: &[i64]) -> Runs {
        let mut runs = Runs::default();
        for &s in sorted {
            match runs.hi.last_mut() {
                Some(hi) if s == *hi + 1 => *hi = s,
                _ => {
                    runs.lo.push(s);
                    runs.hi.push(s);
                }
            }
        }
        runs
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

/// The entries of `runs` that a file holds, each with its recorded state's code:
/// packaged (1; also while the file's submission is under way) or submitted (2).
pub(super) async fn held<C: GenericClient>(c: &C, runs: &Runs) -> R<HashMap<i64, i16>> {
    let rows = c
        .query(
            "SELECT m.seq, f.state FROM unnest($1::bigint[], $2::bigint[]) AS r(lo, hi) \
             CROSS JOIN LATERAL (SELECT * FROM members WHERE seq BETWEEN r.lo AND r.hi \
             ORDER BY seq LIMIT r.hi - r.lo + 1) m \
             JOIN files f ON f.file_id = m.file_id",
            &[&runs.lo, &runs.hi],
        )
        .await?;
    let mut held = HashMap::with_capacity(rows.len());
    for r in &rows {
        let file_state: i16 = r.try_get(1)?;
        held.insert(r.try_get(0)?, if file_state == 2 { 2 } else { 1 });
    }
    Ok(held)
}

/// An entry's recorded state (before a cancellation overrides it): its row's unless a
/// file holds it.
pub(super) fn recorded(held: &HashMap<i64, i16>, seq: i64, row_state: i16) -> i16 {
    held.get(&seq).copied().unwrap_or(row_state)
}

#[cfg(test)]
mod tests {
    use super::Runs;

    #[test]
    fn consecutive_seqs_make_one_run_and_gaps_start_new_ones() {
        assert_eq!(Runs::of_sorted(&[]), Runs::default());
        let runs = Runs::of_sorted(&[1, 2, 3, 7, 9, 10]);
        assert_eq!(runs.lo, [1, 7, 9]);
        assert_eq!(runs.hi, [3, 7, 10]);
        let runs = Runs::of_sorted(&[-2, -1, 0, 5]);
        assert_eq!((runs.lo, runs.hi), (vec![-2, 5], vec![0, 5]));
        assert_eq!(
            Runs::of(&[10, 9, 3, 1, 2, 7, 3]),
            Runs::of_sorted(&[1, 2, 3, 7, 9, 10])
        );
    }
}
