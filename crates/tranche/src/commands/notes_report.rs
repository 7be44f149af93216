//! The night's report goes where the operator looks (`OUT/report.csv`). When it cannot
//! (that disk full), the night's work is not undone and the report is not lost: it is
//! written to the temporary directory instead, and the operator told where; when even
//! that fails, told where it could not be written and how to get it (running the
//! command again writes it without redoing anything).

use std::path::{Path, PathBuf};

use tranche_notes::pipeline::{write_report, ReportRow};
use tranche_storage::{free_space, human_bytes, is_full};
use tranche_types::RunName;

/// Write the report to `wanted`, else to the temporary directory; the path written,
/// or `None` (said on stderr) when neither could be.
pub fn place_report(wanted: &Path, run: &RunName, rows: &[ReportRow]) -> Option<PathBuf> {
    let first = match write_report(wanted, rows) {
        Ok(()) => return Some(wanted.to_path_buf()),
        Err(e) => e,
    };
    let instead = std::env::temp_dir().join(format!(
        "tranche-report-{}.csv",
        run.as_str().replace('/', "-")
    ));
    match write_report(&instead, rows) {
        Ok(()) => {
            eprintln!(
                "could not write the report to {}: {}; it is at {} instead",
                wanted.display(),
                why(wanted, &first),
                instead.display()
            );
            Some(instead)
        }
        Err(second) => {
            eprintln!(
                "could not write the report to {} ({}) nor to {} ({}): free space and run this command again — nothing is redone, only the report is written",
                wanted.display(),
                why(wanted, &first),
                instead.display(),
                why(&instead, &second)
            );
            None
        }
    }
}

/// The error, and for a full disk how much is free there.
fn why(path: &Path, e: &std::io::Error) -> String {
    match free_space(path).filter(|_| is_full(e)) {
        Some(free) => format!("{e}; {} free there", human_bytes(free)),
        None => e.to_string(),
    }
}
