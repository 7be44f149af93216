//! Delivery latency: an HDR histogram of microseconds that reports carry as JSON
//! buckets, so histograms from several processes merge exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest latency told apart (one hour); longer ones are counted as one hour.
pub const MAX_LATENCY_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds, 3 significant digits.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency::new()
    }
}

/// A histogram's figures, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Their mean.
    pub avg_us: f64,
    /// The median.
    pub p50_us: u64,
    /// The 99th percentile.
    pub p99_us: u64,
    /// The largest.
    pub max_us: u64,
}

impl Latency {
    /// An empty histogram.
    pub fn new() -> Latency {
        Latency {
            hist: Histogram::new_with_max(MAX_LATENCY_US, 3).expect("valid bounds"),
        }
    }

    /// Records one latency (cut to [`MAX_LATENCY_US`]).
    pub fn record(&mut self, micros: u64) {
        self.hist.saturating_record(micros.min(MAX_LATENCY_US));
    }

    /// Records one latency `n` times.
    pub fn record_n(&mut self, micros: u64, n: u64) {
        self.hist.saturating_record_n(micros.min(MAX_LATENCY_US), n)
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Latency) {
        self.hist
            .add(&other.hist)
            .expect("histograms of equal bounds merge");
    }

    /// How many values.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The figures.
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.hist.len(),
            avg_us: self.hist.mean(),
            p50_us: self.hist.value_at_quantile(0.50),
            p99_us: self.hist.value_at_quantile(0.99),
            max_us: self.hist.max(),
        }
    }
}

/// On the wire: `[[value_us, count], ...]`, one pair per non-empty bucket.
impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let buckets: Vec<(u64, u64)> = self
            .hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        buckets.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Latency, D::Error> {
        let buckets = Vec::<(u64, u64)>::deserialize(deserializer)?;
        let mut latency = Latency::new();
        for (value, count) in buckets {
            latency
                .hist
                .record_n(value.min(MAX_LATENCY_US), count)
                .map_err(serde::de::Error::custom)?;
        }
        Ok(latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_and_merges() {
        let mut a = Latency::new();
        for v in [0, 5, 120, 120, 3_000, 2_000_000] {
            a.record(v);
        }
        let text = serde_json::to_string(&a).unwrap();
        let b: Latency = serde_json::from_str(&text).unwrap();
        assert_eq!(a.summary(), b.summary());
        let mut c = Latency::new();
        c.record(u64::MAX);
        c.merge(&b);
        let s = c.summary();
        assert_eq!(s.count, 7);
        assert_eq!(s.p50_us, 120);
        assert!(s.max_us >= MAX_LATENCY_US, "{s:?}");
        assert_eq!(Latency::new().summary(), LatencySummary::default());
    }
}
