//! Figures more than one benchmark reports: latency percentiles and peak memory.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tranche_core::{Finished, Observer};
use tranche_types::Timestamp;

/// Each finished job's latencies, as a worker observes them.
#[derive(Default)]
pub struct Latencies {
    /// Microseconds from runnable to result committed, and from start to committed.
    queue_to_done: Mutex<Vec<u32>>,
    start_to_done: Mutex<Vec<u32>>,
}

/// Percentiles of the two latencies.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct LatencySummary {
    pub queue_p50: Duration,
    pub queue_p99: Duration,
    pub run_p50: Duration,
    pub run_p99: Duration,
}

impl Latencies {
    pub fn summary(&self) -> LatencySummary {
        let mut queue = std::mem::take(&mut *self.queue_to_done.lock().expect("lock"));
        let mut run_times = std::mem::take(&mut *self.start_to_done.lock().expect("lock"));
        queue.sort_unstable();
        run_times.sort_unstable();
        LatencySummary {
            queue_p50: percentile_us(&queue, 0.50),
            queue_p99: percentile_us(&queue, 0.99),
            run_p50: percentile_us(&run_times, 0.50),
            run_p99: percentile_us(&run_times, 0.99),
        }
    }
}

impl Observer for Latencies {
    fn finished(&self, f: &Finished<'_>) {
        let us = |a: Timestamp| f.finished_at.since(a).as_micros().min(u32::MAX as u128) as u32;
        self.queue_to_done
            .lock()
            .expect("latency lock")
            .push(us(f.available_at));
        self.start_to_done
            .lock()
            .expect("latency lock")
            .push(us(f.started_at));
    }
}

/// The `p` quantile of sorted microseconds (kept as `u32`: a bench has millions).
pub fn percentile_us(sorted: &[u32], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Duration::from_micros(u64::from(sorted[i]))
}

/// The `p` quantile of sorted durations (zero when there are none).
pub fn percentile_of(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Peak resident set size of this process, from the kernel's high-water mark.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

pub fn peak_rss_mb() -> f64 {
    peak_rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0)
}
