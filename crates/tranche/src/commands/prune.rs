//! `tranche prune --before DATE`: retention on demand, for either backend.

use std::process::ExitCode;

use anyhow::{bail, Result};
use tranche_sqlite::SqliteOptions;
use tranche_types::{Pruned, Timestamp};

use crate::cli::DataArgs;
use crate::data::open_existing_with;
use crate::output::when;

/// Runs removed per call: small, so progress shows and a stop loses little.
const STEP: usize = 50;

/// A cut-off from the command line: `YYYY-MM-DD` (the start of that day, UTC) or an
/// RFC 3339 time.
pub fn parse_before(s: &str) -> Result<Timestamp, String> {
    if let Ok(day) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        let start = day.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc();
        return Ok(Timestamp(start.timestamp_micros()));
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| Timestamp(t.timestamp_micros()))
        .map_err(|_| {
            format!("expected a date (YYYY-MM-DD, UTC) or an RFC 3339 time (2026-11-20T18:00:00Z), got {s:?}")
        })
}

pub async fn prune(at: &DataArgs, before: Timestamp, dry_run: bool) -> Result<ExitCode> {
    // Without the embedded backend's own retention: it would remove what is older than
    // its window before this command's prune could count it.
    let options = SqliteOptions {
        retention: None,
        ..SqliteOptions::default()
    };
    let client = open_existing_with(at, options).await?;
    let now = client.clock().now();
    if before > now {
        bail!(
            "expected --before in the past, got {} (now is {})",
            when(Some(before)),
            when(Some(now))
        );
    }
    if dry_run {
        let runs = client.prunable(before).await?;
        let jobs: u64 = runs.iter().map(|p| p.total).sum();
        for p in &runs {
            let name = p.run.as_ref().map_or("?", |r| r.as_str());
            println!(
                "{name}\t{} job(s)\tfinished {}",
                p.total,
                when(p.finished_at)
            );
        }
        println!(
            "would remove {} run(s) and {jobs} job(s) finished before {} (dry run: nothing removed)",
            runs.len(),
            when(Some(before))
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut total = Pruned::default();
    loop {
        let step = client.prune(before, STEP).await?;
        total.add(step);
        // Ended records go a batch at a time too: on while any went.
        if (step.runs as usize) < STEP && step.records == 0 {
            break;
        }
        eprintln!(
            "… {} run(s), {} job(s), {} record(s) removed so far",
            total.runs, total.jobs, total.records
        );
    }
    println!(
        "removed {} run(s) and {} job(s) finished before {}, and {} record(s) of what ended \
         before it",
        total.runs,
        total.jobs,
        when(Some(before)),
        total.records
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_before;

    #[test]
    fn dates_are_the_start_of_the_day_utc_and_times_are_rfc_3339() {
        assert_eq!(parse_before("1970-01-02").unwrap().0, 86_400_000_000);
        assert_eq!(parse_before("1970-01-01T01:00:00+01:00").unwrap().0, 0);
        let err = parse_before("last tuesday").unwrap_err();
        assert!(
            err.contains("expected a date") && err.contains("last tuesday"),
            "{err}"
        );
    }
}
