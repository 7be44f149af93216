//! `--dry-run`: what a tick would do, computed as the passes would, with nothing
//! claimed, written or submitted.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tranche_ach::BatchKey;
use tranche_ach_ledger::{EligibleQuery, FileFilter, FileState};

use crate::split::split;
use crate::tasks::Scope;
use crate::{Payments, PipelineError};

/// What a tick at `at` would do.
#[derive(Debug, Clone, Serialize)]
pub struct DryRun {
    /// The moment.
    pub at: DateTime<Utc>,
    /// Each due scope.
    pub scopes: Vec<DryRunScope>,
}

/// What would happen to one scope.
#[derive(Debug, Clone, Serialize)]
pub struct DryRunScope {
    /// The bank's window and date.
    pub scope: Scope,
    /// Packaging is due.
    pub package: bool,
    /// Submission is due.
    pub submit: bool,
    /// Entries a pass would package now.
    pub eligible: u64,
    /// Their batches.
    pub batches: u64,
    /// Entries in each file a pass would write.
    pub files: Vec<u64>,
    /// Packaged files a submission would upload.
    pub to_submit: Vec<String>,
    /// Packaged files a pass would release first (they hold cancelled entries).
    pub to_rebuild: Vec<String>,
}

impl Payments {
    /// What [`Payments::tick`] at `at` would do (reads only).
    pub async fn dry_run(&self, at: DateTime<Utc>) -> Result<DryRun, PipelineError> {
        let dirty = self.ledger().unsubmitted_files_with_cancellations().await?;
        let mut scopes = Vec::new();
        for due in self.rules().due(at) {
            let scope = Scope {
                bank: due.bank.clone(),
                window: due.window.clone(),
                date: due.date,
            };
            let (bank, window) = self
                .window(&scope)
                .map_err(|e| PipelineError::Rules(e.to_string()))?;
            let mut by_key: BTreeMap<BatchKey, Vec<i64>> = BTreeMap::new();
            let mut after = None;
            loop {
                let page = self
                    .ledger()
                    .eligible(&EligibleQuery {
                        bank: scope.bank.clone(),
                        submission_date: scope.date,
                        same_day: window.same_day(),
                        after,
                        limit: 10_000,
                    })
                    .await?;
                let Some(last) = page.last() else { break };
                after = Some(last.seq);
                for e in &page {
                    let key = match bank.grouping {
                        tranche_ach::Grouping::Separate => e.entry.batch_key(),
                        tranche_ach::Grouping::Mixed => e.entry.mixed_batch_key(),
                    };
                    by_key.entry(key).or_default().push(e.seq);
                }
            }
            let batches: Vec<(BatchKey, Vec<i64>)> = by_key.into_iter().collect();
            let eligible = batches.iter().map(|(_, s)| s.len() as u64).sum();
            let planned = if due.package {
                split(&batches, u64::from(bank.max_entries_per_file))
            } else {
                Vec::new()
            };
            let files = self
                .ledger()
                .files(&FileFilter {
                    bank: Some(scope.bank.clone()),
                    submission_date: Some(scope.date),
                    state: Some(FileState::Packaged),
                })
                .await?;
            let mine: Vec<&str> = files
                .iter()
                .filter(|f| f.file.window == scope.window)
                .map(|f| f.file.file_id.as_str())
                .collect();
            let to_rebuild: Vec<String> = mine
                .iter()
                .filter(|id| dirty.iter().any(|d| d.file_id == **id))
                .map(|id| id.to_string())
                .collect();
            scopes.push(DryRunScope {
                package: due.package,
                submit: due.submit,
                eligible,
                batches: batches.len() as u64,
                files: planned.iter().map(|f| f.entries).collect(),
                to_submit: if due.submit {
                    mine.iter()
                        .filter(|id| !to_rebuild.iter().any(|r| r == *id))
                        .map(|id| id.to_string())
                        .collect()
                } else {
                    Vec::new()
                },
                to_rebuild,
                scope,
            });
        }
        Ok(DryRun { at, scopes })
    }
}
