//! The reduce step's decision: which batches go in which file.

use tranche_ach::BatchKey;

use crate::seqs::SeqSet;

/// One file to write: its entries by seq, and how many batches they make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// Its entries.
    pub seqs: SeqSet,
    /// How many entries.
    pub entries: u64,
    /// How many batches (a batch split over two files counts in both).
    pub batches: u32,
}

/// Split batches into files of at most `cap` entries: batches in key order, each kept
/// whole in one file when it fits in a file at all (a batch that does not fit in the
/// room left starts the next file), and a batch larger than a file fills the room left
/// and goes on in the next files. Each batch's seqs must be ascending.
///
/// Why whole batches: a batch split over two files is two batch headers and two
/// settlements for the company; banks and receivers prefer one. Why not a tighter
/// packing: files are filled in batch-key order so the same entries always give the
/// same files (a repeated pass after a crash writes the same bytes).
pub fn split(batches: &[(BatchKey, Vec<i64>)], cap: u64) -> Vec<PlannedFile> {
    let cap = cap.max(1);
    let mut files: Vec<PlannedFile> = Vec::new();
    let mut current: Vec<i64> = Vec::new();
    let mut batches_in_current = 0u32;
    let close = |current: &mut Vec<i64>, batches: &mut u32, files: &mut Vec<PlannedFile>| {
        if !current.is_empty() {
            files.push(PlannedFile {
                entries: current.len() as u64,
                seqs: SeqSet::from_unsorted(std::mem::take(current)),
                batches: std::mem::take(batches),
            });
        }
    };
    for (_, seqs) in batches {
        let n = seqs.len() as u64;
        if n == 0 {
            continue;
        }
        let room = cap - current.len() as u64;
        if n > room && n <= cap {
            close(&mut current, &mut batches_in_current, &mut files);
        }
        let mut rest: &[i64] = seqs;
        while !rest.is_empty() {
            let room = (cap - current.len() as u64) as usize;
            if room == 0 {
                close(&mut current, &mut batches_in_current, &mut files);
                continue;
            }
            let take = room.min(rest.len());
            current.extend_from_slice(&rest[..take]);
            batches_in_current += 1;
            rest = &rest[take..];
        }
    }
    close(&mut current, &mut batches_in_current, &mut files);
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use tranche_ach::{SecCode, ServiceClass};

    fn key(company: &str) -> BatchKey {
        BatchKey {
            bank: "first".into(),
            company_name: company.into(),
            company_id: "1234567890".into(),
            sec_code: SecCode::Ppd,
            service_class: ServiceClass::CreditsOnly,
            entry_description: "PAYROLL".into(),
            descriptive_date: String::new(),
            effective_date: NaiveDate::from_ymd_opt(2026, 3, 3).unwrap(),
            same_day: false,
        }
    }

    fn batch(company: &str, from: i64, n: i64) -> (BatchKey, Vec<i64>) {
        (key(company), (from..from + n).collect())
    }

    #[test]
    fn whole_batches_fill_files_in_order() {
        let files = split(&[batch("A", 0, 3), batch("B", 10, 4), batch("C", 20, 2)], 6);
        let sizes: Vec<(u64, u32)> = files.iter().map(|f| (f.entries, f.batches)).collect();
        // B does not fit beside A: it starts the second file, and C joins it.
        assert_eq!(sizes, vec![(3, 1), (6, 2)]);
        assert_eq!(files[0].seqs.to_vec(), vec![0, 1, 2]);
    }

    #[test]
    fn a_batch_larger_than_a_file_is_split_and_nothing_is_lost() {
        let input = [batch("A", 0, 2), batch("B", 100, 13), batch("C", 200, 1)];
        let files = split(&input, 5);
        let sizes: Vec<u64> = files.iter().map(|f| f.entries).collect();
        assert_eq!(sizes, vec![5, 5, 5, 1]);
        assert!(files.iter().all(|f| f.entries <= 5));
        let mut all: Vec<i64> = files.iter().flat_map(|f| f.seqs.to_vec()).collect();
        all.sort_unstable();
        let mut want: Vec<i64> = input.iter().flat_map(|(_, s)| s.clone()).collect();
        want.sort_unstable();
        assert_eq!(all, want);
    }

    #[test]
    fn nothing_gives_no_file() {
        assert!(split(&[], 10).is_empty());
        assert!(split(&[(key("A"), vec![])], 10).is_empty());
    }
}
