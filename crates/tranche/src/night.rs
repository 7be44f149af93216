//! A night done by this process (`notes run`, `notes demo`, `bench notes`): its store
//! and steps set up from the options, [`run_night`] shown on stderr as it goes.

use anyhow::Result;
use tranche_core::Client;
use tranche_notes::night::{
    run_night, NightConfig, NightProgress, NightSummary, PlannedNight, Stall, WorkHere,
};
use tranche_notes::pipeline::{Corrections, Day, StepCounts, Submitted};
use tranche_types::{RunName, RunProgress};

use crate::notes_setup::{open_store, setup, RunOptions};
use crate::progress::RunDisplay;

/// Do `day`'s night: work its steps here (`work`), or enqueue it and watch workers
/// elsewhere do them.
pub async fn work_night(
    backend: Client,
    day: Day,
    options: &RunOptions,
    corrections: Corrections,
    work: bool,
) -> Result<NightSummary> {
    let store = open_store(options)?;
    let steps = if work {
        Some(setup(options, store.clone())?)
    } else {
        None
    };
    let how = match &steps {
        Some(s) => format!("{}; {}", s.signer_note, s.mail_to),
        None => "submitted for workers elsewhere (--no-work)".to_string(),
    };
    let config = NightConfig {
        out: options.out.clone(),
        store,
        work_here: steps.map(|s| WorkHere {
            source: s.source,
            workers: options.workers.clone(),
        }),
        corrections,
    };
    let mut shown = Shown { how, run: None };
    let night = run_night(backend, day, config, &mut shown, tranche_core::on_terminate).await?;
    if let Some(notice) = night.report.notice() {
        eprintln!("{notice}");
    }
    Ok(night)
}

/// The night on stderr.
struct Shown {
    /// Who signs and where mail goes, or that workers elsewhere do the steps.
    how: String,
    run: Option<RunDisplay>,
}

impl NightProgress for Shown {
    fn planned(&mut self, night: &PlannedNight<'_>) {
        eprintln!(
            "{}: {} clients, {} trades; {}",
            night.run, night.clients, night.trades, self.how
        );
        for a in night.accounts {
            eprintln!("  {a}");
        }
    }

    fn submitted(&mut self, submitted: &Submitted) {
        if submitted.redone > 0 {
            eprintln!(
                "  {} client(s) not yet mailed had changed input: their notes are made again from it",
                submitted.redone
            );
        }
        if submitted.corrected > 0 {
            eprintln!(
                "  {} corrected note(s) decided (--issue-corrections), recorded in the run",
                submitted.corrected
            );
        }
        for a in &submitted.attention {
            eprintln!("  attention: {a}");
        }
    }

    fn work_started(&mut self, run: &RunName) {
        self.run = Some(RunDisplay::new(run.as_str()));
    }

    fn working(&mut self, p: &RunProgress, steps: Option<&StepCounts>, stall: Option<Stall>) {
        if let Some(display) = self.run.as_mut() {
            display.stalled(stall);
            let detail = steps.map(StepCounts::summary).unwrap_or_default();
            display.update(p, &detail);
        }
    }

    fn work_ended(&mut self) {
        if let Some(display) = &self.run {
            display.finish();
        }
    }
}
