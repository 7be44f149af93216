//! The heartbeat: what is due at a moment, enqueued once however many engines tick.

use chrono::{DateTime, Days, Utc};
use serde::Serialize;
use tranche_ach_ledger::{FileFilter, FileState, ReleaseOutcome};
use tranche_types::RunName;

use crate::tasks::{enqueue_plan, enqueue_submit, Scope};
use crate::{Payments, PipelineError};

/// Ended windows whose leftover files a tick still releases: a few days covers an
/// engine that was down over a weekend.
const LOOK_BACK_DAYS: u64 = 4;

/// What one tick did.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    /// The moment it acted at.
    pub at: DateTime<Utc>,
    /// The scopes that were due.
    pub scopes: Vec<TickScope>,
    /// Packaged files of windows that ended unsubmitted, released: their entries are
    /// accepted again, for a later window of their bank, date and kind (same-day or
    /// next-day) if the day has one.
    pub released_late: Vec<String>,
}

/// One due scope.
#[derive(Debug, Clone, Serialize)]
pub struct TickScope {
    /// The bank's window and date.
    pub scope: Scope,
    /// Its run.
    pub run: String,
    /// Packaging was due; `package_enqueued` whether this tick enqueued the pass
    /// (false: another engine's tick of the same slot did).
    pub package: bool,
    /// Whether this tick enqueued the pass.
    pub package_enqueued: bool,
    /// Submission was due.
    pub submit: bool,
    /// Whether this tick enqueued the submission.
    pub submit_enqueued: bool,
}

impl Tick {
    /// The runs this tick enqueued into (or would have): what `--once` waits for.
    pub fn runs(&self) -> Vec<RunName> {
        self.scopes.iter().map(|s| s.scope.run()).collect()
    }
}

impl Payments {
    /// Enqueue what is due at `at`: a package pass for every window in its packaging
    /// phase, a submission for every window in its submission phase; release the
    /// packaged files of windows that ended. Idempotent per tick slot (`at` rounded
    /// down to the rules' tick): engines ticking in the same slot, or one restarted
    /// within it, enqueue each pass once.
    pub async fn tick(&self, at: DateTime<Utc>) -> Result<Tick, PipelineError> {
        let every = self.rules().engine.tick.as_secs().max(1) as i64;
        let slot = at.timestamp().div_euclid(every) * every;
        let mut scopes = Vec::new();
        for due in self.rules().due(at) {
            let scope = Scope {
                bank: due.bank.clone(),
                window: due.window.clone(),
                date: due.date,
            };
            let package_enqueued = if due.package {
                enqueue_plan(self, &scope, at, format!("plan/{slot}")).await?
            } else {
                false
            };
            let submit_enqueued = if due.submit {
                enqueue_submit(self, &scope, at, format!("submit/{slot}")).await?
            } else {
                false
            };
            scopes.push(TickScope {
                run: scope.run().to_string(),
                scope,
                package: due.package,
                package_enqueued,
                submit: due.submit,
                submit_enqueued,
            });
        }
        let released_late = self.release_ended(at).await?;
        Ok(Tick {
            at,
            scopes,
            released_late,
        })
    }

    /// Release packaged files of windows that ended by `at`.
    async fn release_ended(&self, at: DateTime<Utc>) -> Result<Vec<String>, PipelineError> {
        let mut released = Vec::new();
        for bank in &self.rules().banks {
            let today = at.with_timezone(&bank.time_zone).date_naive();
            for back in 0..=LOOK_BACK_DAYS {
                let Some(date) = today.checked_sub_days(Days::new(back)) else {
                    continue;
                };
                let ended: Vec<&str> = bank
                    .windows
                    .iter()
                    .filter(|w| w.ends(date, bank.time_zone) <= at)
                    .map(|w| w.name.as_str())
                    .collect();
                if ended.is_empty() {
                    continue;
                }
                let files = self
                    .ledger()
                    .files(&FileFilter {
                        bank: Some(bank.profile.bank.clone()),
                        submission_date: Some(date),
                        state: Some(FileState::Packaged),
                    })
                    .await?;
                for f in files
                    .iter()
                    .filter(|f| ended.contains(&f.file.window.as_str()))
                {
                    if let ReleaseOutcome::Released { .. } =
                        self.ledger().release_file(&f.file.file_id).await?
                    {
                        tracing::warn!(file = %f.file.file_id, window = %f.file.window, "window ended before the file was submitted: released, its entries wait for a later window of their kind");
                        released.push(f.file.file_id.clone());
                    }
                }
            }
        }
        Ok(released)
    }
}
