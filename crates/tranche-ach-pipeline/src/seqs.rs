//! Sets of ledger seqs as sorted ranges: how a pass names its entries in job arguments.
//!
//! Jobs carry which entries they work on, never the entries (those stay in the ledger).
//! A day's entries are imported a payroll at a time, so the entries of one bank, date
//! and window come in long runs of consecutive seqs: as ranges, a chunk of a thousand
//! entries is usually a handful of numbers, and a file of 25,000 a few dozen.

use serde::{Deserialize, Serialize};

/// A set of seqs, as sorted, disjoint, non-adjacent inclusive ranges `[first, last]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SeqSet(Vec<(i64, i64)>);

impl SeqSet {
    /// The set of `seqs` (in any order, repeats allowed).
    pub fn from_unsorted(mut seqs: Vec<i64>) -> SeqSet {
        seqs.sort_unstable();
        SeqSet::from_sorted(seqs)
    }

    /// The set of `seqs`, given ascending (repeats allowed).
    pub fn from_sorted(seqs: impl IntoIterator<Item = i64>) -> SeqSet {
        let mut ranges: Vec<(i64, i64)> = Vec::new();
        for s in seqs {
            match ranges.last_mut() {
                Some((_, last)) if s <= *last => {}
                Some((_, last)) if s == *last + 1 => *last = s,
                _ => ranges.push((s, s)),
            }
        }
        SeqSet(ranges)
    }

    /// How many seqs.
    pub fn len(&self) -> u64 {
        self.0.iter().map(|(a, b)| (b - a + 1) as u64).sum()
    }

    /// No seq at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ranges, ascending.
    pub fn ranges(&self) -> &[(i64, i64)] {
        &self.0
    }

    /// Every seq, ascending.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.0.iter().flat_map(|&(a, b)| a..=b)
    }

    /// Every seq, ascending, in a vector.
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }

    /// Whether `seq` is in the set.
    pub fn contains(&self, seq: i64) -> bool {
        let i = self.0.partition_point(|&(_, last)| last < seq);
        self.0.get(i).is_some_and(|&(first, _)| first <= seq)
    }

    /// Consecutive pieces of at most `n` seqs each, ascending (`n` of at least 1).
    pub fn chunks(&self, n: u64) -> Vec<SeqSet> {
        let n = n.max(1) as i64;
        let mut out = Vec::new();
        let mut current: Vec<(i64, i64)> = Vec::new();
        let mut room = n;
        for &(mut a, b) in &self.0 {
            while a <= b {
                let take = (b - a + 1).min(room);
                current.push((a, a + take - 1));
                a += take;
                room -= take;
                if room == 0 {
                    out.push(SeqSet(std::mem::take(&mut current)));
                    room = n;
                }
            }
        }
        if !current.is_empty() {
            out.push(SeqSet(current));
        }
        out
    }

    /// Every seq of `sets`.
    pub fn union<'a>(sets: impl IntoIterator<Item = &'a SeqSet>) -> SeqSet {
        let mut all: Vec<(i64, i64)> = sets.into_iter().flat_map(|s| s.0.iter().copied()).collect();
        all.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(all.len());
        for (a, b) in all {
            match out.last_mut() {
                Some((_, last)) if a <= *last + 1 => *last = (*last).max(b),
                _ => out.push((a, b)),
            }
        }
        SeqSet(out)
    }

    /// This set without the seqs in `other`.
    pub fn without(&self, other: &SeqSet) -> SeqSet {
        SeqSet::from_sorted(self.iter().filter(|s| !other.contains(*s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_become_ranges() {
        let s = SeqSet::from_unsorted(vec![5, 1, 2, 3, 3, 9, 10, 7]);
        assert_eq!(s.ranges(), &[(1, 3), (5, 5), (7, 7), (9, 10)]);
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_vec(), vec![1, 2, 3, 5, 7, 9, 10]);
        assert!(s.contains(2) && s.contains(10) && !s.contains(4) && !s.contains(11));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "[[1,3],[5,5],[7,7],[9,10]]"
        );
    }

    #[test]
    fn chunks_keep_every_seq_once_in_order() {
        let s = SeqSet::from_sorted((0..2_500).filter(|i| i % 7 != 3));
        let chunks = s.chunks(1_000);
        assert_eq!(chunks.len(), 3);
        assert!(chunks[..2].iter().all(|c| c.len() == 1_000));
        let back: Vec<i64> = chunks.iter().flat_map(|c| c.to_vec()).collect();
        assert_eq!(back, s.to_vec());
        assert!(SeqSet::default().chunks(10).is_empty());
    }

    #[test]
    fn union_and_difference() {
        let a = SeqSet::from_sorted([1, 2, 3, 10]);
        let b = SeqSet::from_sorted([4, 5, 11, 20]);
        let u = SeqSet::union([&a, &b]);
        assert_eq!(u.ranges(), &[(1, 5), (10, 11), (20, 20)]);
        assert_eq!(u.without(&b), a);
    }
}
