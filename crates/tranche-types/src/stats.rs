use serde::{Deserialize, Serialize};

/// Upper bounds (inclusive, in milliseconds) of the buckets of every latency histogram
/// a backend keeps; one more bucket, unbounded, holds longer times. Fixed and shared:
/// backends store counts per bucket index, and readers (Prometheus `le` labels) need
/// the same list whoever wrote the counts. Only ever extend it at the end.
pub const LATENCY_BUCKETS_MS: [f64; 18] = [
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    300_000.0,
    1_800_000.0,
];

/// The bounds in microseconds, the unit every [`crate::Timestamp`] is in.
pub const LATENCY_BUCKETS_US: [i64; 18] = {
    let mut us = [0i64; 18];
    let mut i = 0;
    while i < us.len() {
        us[i] = (LATENCY_BUCKETS_MS[i] * 1000.0) as i64;
        i += 1;
    }
    us
};

/// The index of the bucket a time of `micros` falls in: the first bound it does not
/// exceed, or `LATENCY_BUCKETS_MS.len()` (the unbounded bucket).
pub fn latency_bucket(micros: i64) -> usize {
    LATENCY_BUCKETS_US.partition_point(|&b| b < micros)
}

/// A fixed-bucket histogram of times, as a backend stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// How many times fell in each bucket (not cumulative): `buckets[i]` above bound
    /// `i - 1` and at most bound `i` of [`LATENCY_BUCKETS_MS`]; the last, one past the
    /// bounds, above all of them.
    pub buckets: Vec<u64>,
    /// The sum of every time recorded, in milliseconds.
    pub sum_ms: f64,
    /// How many times were recorded (the sum of `buckets`).
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: vec![0; LATENCY_BUCKETS_MS.len() + 1],
            sum_ms: 0.0,
            count: 0,
        }
    }
}

impl Histogram {
    /// From per-bucket counts (missing buckets are 0) and the sum in microseconds.
    pub fn from_parts(mut buckets: Vec<u64>, sum_us: i64) -> Self {
        buckets.resize(LATENCY_BUCKETS_MS.len() + 1, 0);
        Histogram {
            count: buckets.iter().sum(),
            buckets,
            sum_ms: sum_us as f64 / 1000.0,
        }
    }
}

/// What the backend recorded for one queue, whoever worked its jobs: cumulative for
/// the life of the backend's data. Times are measured on the backend's clock.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// The queue's name.
    pub queue: String,
    /// Attempts handed out (reserved).
    pub started: u64,
    /// Jobs that ended succeeded.
    pub succeeded: u64,
    /// Jobs that ended failed: reported failed, or out of attempts (whether their last
    /// attempt was reported failed or its lease expired).
    pub failed: u64,
    /// Attempts reported failed whose job was put back to run again.
    pub retried: u64,
    /// Leases that expired (the worker stopped heartbeating) and whose job was
    /// recovered: run again, or failed when that was its last attempt.
    pub expired: u64,
    /// From a job becoming runnable (its `available_at`) to an attempt being reserved.
    pub wait: Histogram,
    /// From an attempt being reserved to its result being applied, for attempts that
    /// succeeded, failed or were retried (not for expired, cancelled or snoozed ones).
    pub run: Histogram,
}

impl QueueStats {
    /// All zero, for a queue nothing has been recorded for yet.
    pub fn new(queue: impl Into<String>) -> Self {
        QueueStats {
            queue: queue.into(),
            ..QueueStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_fall_in_the_first_bucket_they_do_not_exceed() {
        assert_eq!(LATENCY_BUCKETS_US[0], 500);
        assert_eq!(LATENCY_BUCKETS_US[17], 1_800_000_000);
        assert_eq!(latency_bucket(0), 0);
        assert_eq!(latency_bucket(500), 0, "bounds are inclusive (le)");
        assert_eq!(latency_bucket(501), 1);
        assert_eq!(latency_bucket(2_500_000), 11);
        assert_eq!(latency_bucket(2_500_001), 12);
        assert_eq!(latency_bucket(1_800_000_000), 17);
        assert_eq!(latency_bucket(1_800_000_001), 18, "the unbounded bucket");
        assert!(LATENCY_BUCKETS_US.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_histogram_counts_its_buckets() {
        let h = Histogram::from_parts(vec![1, 0, 2], 3_500);
        assert_eq!(h.buckets.len(), LATENCY_BUCKETS_MS.len() + 1);
        assert_eq!((h.count, h.sum_ms), (3, 3.5));
    }
}
