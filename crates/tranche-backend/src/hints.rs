/// How a backend is best driven. Callers read these instead of special-casing a
/// backend by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// Reserve calls a worker keeps in flight per queue. An embedded backend answers in
    /// microseconds, so one keeps it busy; over a network a second call hides the round
    /// trip of the first (`tranche bench engine --broker …` measures it).
    pub fetchers_per_queue: usize,
}

impl Default for Hints {
    fn default() -> Self {
        Hints {
            fetchers_per_queue: 1,
        }
    }
}
