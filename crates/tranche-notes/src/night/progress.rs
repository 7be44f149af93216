//! What a night tells whoever shows it, as it goes: a progress bar on a terminal, lines
//! in a log, nothing in a benchmark's quiet mode. Every method has a silent default.

use tranche_types::{RunName, RunProgress};

use super::Stall;
use crate::pipeline::{RowAccount, StepCounts, Submitted};

/// The night planned, before anything of it is enqueued.
#[derive(Debug)]
pub struct PlannedNight<'a> {
    /// The night's run, `contract-notes/<date>`.
    pub run: &'a RunName,
    /// Clients with a chain: those who traded, or whose rows could not be read.
    pub clients: usize,
    /// Trades that could be read.
    pub trades: usize,
    /// Where every input row went: the trades file, then the client master.
    pub accounts: &'a [RowAccount],
    /// Whether this process works the steps (else workers elsewhere do).
    pub working_here: bool,
}

/// Whoever shows a night as it goes; [`run_night`](super::run_night) calls these.
pub trait NightProgress: Send {
    /// The night is planned; nothing of it is enqueued yet.
    fn planned(&mut self, _night: &PlannedNight<'_>) {}

    /// Enqueued: what submitting again found (changed input, corrections, clients a
    /// person must look at).
    fn submitted(&mut self, _submitted: &Submitted) {}

    /// The run is about to be worked (a day without trades has none to work).
    fn work_started(&mut self, _run: &RunName) {}

    /// The run's progress, about five times a second while it is worked. `steps`: what
    /// this process did per step, when it works them; `stall`: what holds the night up,
    /// once it has for a moment.
    fn working(&mut self, _run: &RunProgress, _steps: Option<&StepCounts>, _stall: Option<Stall>) {}

    /// The run has finished, or this process has stopped working it.
    fn work_ended(&mut self) {}
}

/// Shows nothing.
impl NightProgress for () {}
