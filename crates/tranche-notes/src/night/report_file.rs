//! The night's report goes where the operator looks (`OUT/report.csv`). When it cannot
//! (that disk full), the night's work is not undone and the report is not lost: it is
//! written to the temporary directory instead, and the operator told where; when even
//! that fails, told where it could not be written and how to get it (running the
//! night again writes it without redoing anything).

use std::path::{Path, PathBuf};

use tranche_storage::{free_space, human_bytes, is_full};
use tranche_types::RunName;

use crate::pipeline::{write_report, ReportRow};

/// Where the report was written.
#[derive(Debug)]
pub enum ReportPlace {
    /// At the path asked for.
    Wanted(PathBuf),
    /// In the temporary directory, because `wanted` could not be written.
    Instead {
        /// Where it is.
        path: PathBuf,
        /// The path asked for.
        wanted: PathBuf,
        /// Why `wanted` could not be written.
        why: std::io::Error,
    },
    /// Not written: neither where it was asked for nor in the temporary directory.
    Nowhere {
        /// The path asked for.
        wanted: PathBuf,
        /// Why `wanted` could not be written.
        why_wanted: std::io::Error,
        /// The file in the temporary directory tried next.
        instead: PathBuf,
        /// Why `instead` could not be written either.
        why_instead: std::io::Error,
    },
}

impl ReportPlace {
    /// The report's path, if it was written.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ReportPlace::Wanted(path) | ReportPlace::Instead { path, .. } => Some(path),
            ReportPlace::Nowhere { .. } => None,
        }
    }

    /// What the operator must be told: where the report is instead, or that it is
    /// nowhere and what to do.
    pub fn notice(&self) -> Option<String> {
        match self {
            ReportPlace::Wanted(_) => None,
            ReportPlace::Instead { path, wanted, why } => Some(format!(
                "could not write the report to {}: {}; it is at {} instead",
                wanted.display(),
                explain(wanted, why),
                path.display()
            )),
            ReportPlace::Nowhere {
                wanted,
                why_wanted,
                instead,
                why_instead,
            } => Some(format!(
                "could not write the report to {} ({}) nor to {} ({}): free space and run this command again — nothing is redone, only the report is written",
                wanted.display(),
                explain(wanted, why_wanted),
                instead.display(),
                explain(instead, why_instead)
            )),
        }
    }
}

/// Write the report to `wanted`, else to the temporary directory.
pub(crate) fn place_report(wanted: &Path, run: &RunName, rows: &[ReportRow]) -> ReportPlace {
    let why_wanted = match write_report(wanted, rows) {
        Ok(()) => return ReportPlace::Wanted(wanted.to_path_buf()),
        Err(e) => e,
    };
    let instead = std::env::temp_dir().join(format!(
        "tranche-report-{}.csv",
        run.as_str().replace('/', "-")
    ));
    match write_report(&instead, rows) {
        Ok(()) => ReportPlace::Instead {
            path: instead,
            wanted: wanted.to_path_buf(),
            why: why_wanted,
        },
        Err(why_instead) => ReportPlace::Nowhere {
            wanted: wanted.to_path_buf(),
            why_wanted,
            instead,
            why_instead,
        },
    }
}

/// The error, and for a full disk how much is free there.
fn explain(path: &Path, e: &std::io::Error) -> String {
    match free_space(path).filter(|_| is_full(e)) {
        Some(free) => format!("{e}; {} free there", human_bytes(free)),
        None => e.to_string(),
    }
}
