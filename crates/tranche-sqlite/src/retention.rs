//! The embedded backend's own retention: the writer thread removes finished runs older
//! than [`SqliteOptions::retention`](crate::SqliteOptions::retention) by itself, one
//! small batch per transaction of its own, between the transactions of the commands it
//! serves, so that no command waits for more than one batch. It looks when a command
//! arrives and [`EVERY`] has passed on the backend's clock (an idle writer does not
//! grow the file, so it need not wake up for it), and keeps going batch by batch, one
//! between each group of commands, while batches come back full.

use std::time::Duration;

use tranche_types::Timestamp;

/// How often, on the backend's clock, the writer looks for runs past their retention.
pub const EVERY: Duration = Duration::from_secs(5 * 60);

/// Most jobs (and feed rows, and locks) removed by one batch: a few milliseconds of
/// the writer's time.
pub const BATCH: usize = 256;

/// When the next batch is due.
pub struct Schedule {
    keep: Duration,
    next_at: Timestamp,
}

impl Schedule {
    /// The first look is at the first command.
    pub fn new(keep: Duration) -> Self {
        Schedule {
            keep,
            next_at: Timestamp(i64::MIN),
        }
    }

    /// The cut-off to prune before, if a batch is due at `now`.
    pub fn due(&self, now: Timestamp) -> Option<Timestamp> {
        (now >= self.next_at).then(|| Timestamp(now.0.saturating_sub(micros(self.keep))))
    }

    /// A batch ran at `now`: `more` (it came back full) makes the next one due at once.
    pub fn ran(&mut self, now: Timestamp, more: bool) {
        self.next_at = if more { now } else { now.plus(EVERY) };
    }
}

fn micros(d: Duration) -> i64 {
    d.as_micros().min(i64::MAX as u128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_batch_is_followed_at_once_an_empty_one_after_a_while() {
        let day = Duration::from_secs(86_400);
        let mut s = Schedule::new(2 * day);
        let now = Timestamp(10 * 86_400_000_000);
        assert_eq!(s.due(now), Some(Timestamp(8 * 86_400_000_000)));
        s.ran(now, true);
        assert!(s.due(now).is_some());
        s.ran(now, false);
        assert_eq!(s.due(now.plus(EVERY / 2)), None);
        assert!(s.due(now.plus(EVERY)).is_some());
    }
}
