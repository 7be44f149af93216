//! The feed server's figures: [`FeedMetrics`], recorded by the writer task and by
//! every protocol's read path, rendered in the Prometheus text format (version 0.0.4),
//! which the HTTP layer serves as `GET /metrics` and its dashboard (`GET /`) draws.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `tranche_feed_seq` | gauge | `shard` | the highest `seq` applied |
//! | `tranche_feed_rec` | gauge | `shard` | the highest `rec` applied |
//! | `tranche_feed_orders` | gauge | `shard` | orders held |
//! | `tranche_feed_events_written_total` | counter | `shard` | events applied (their batches acknowledged) |
//! | `tranche_feed_batches_written_total` | counter | `shard` | batches applied |
//! | `tranche_feed_batches_refused_total` | counter | `shard`, `reason` | batches refused: `bad_batch` (an invalid event), `store_failed` (the store could not write their group) |
//! | `tranche_feed_batch_events` | histogram | `shard` | events per batch applied |
//! | `tranche_feed_group_commit_batches` | histogram | `shard` | batches per group commit (one log write, one sync) |
//! | `tranche_feed_group_commit_seconds` | histogram | `shard` | time to check, log, sync (per the durability) and publish one group |
//! | `tranche_feed_reads_total` | counter | `protocol` | read answers (pages, empty or not) |
//! | `tranche_feed_reads_empty_total` | counter | `protocol` | read answers with no order |
//! | `tranche_feed_read_rows` | histogram | `protocol` | orders per answer; its `_sum` is the orders delivered |
//! | `tranche_feed_read_lag_seconds` | histogram | `protocol` | per non-empty answer, the age of its oldest version when answered: now − the smallest `updated_at` |
//! | `tranche_feed_long_poll_wakeups_total` | counter | `protocol` | times a waiting read was woken by a write to its filter key |
//! | `tranche_feed_long_poll_timeouts_total` | counter | `protocol` | reads answered because `wait_ms` passed with fewer than `min_batch` orders ready (`wait_ms=0` with too few counts too) |
//! | `tranche_feed_replica_lag_seconds` | gauge | `shard` | on a replica: how long the oldest change of the primary not applied here has been known (while disconnected, since it last heard from the primary) |
//! | `tranche_feed_replica_lag_events` | gauge | `shard` | on a replica: the primary's events not applied here yet |
//! | `tranche_feed_replica_connected` | gauge | `shard` | on a replica: 1 while it follows the primary, else 0 |
//! | `tranche_feed_replica_resyncs_total` | counter | `shard` | on a replica: times it started over from the primary's beginning |
//!
//! `shard` is the index of a shard of the feed (`"0"` while a server has one store);
//! `protocol` is `http` or `tcp`. Rates (writes/s, rows/s) are for the scraper to
//! derive from two scrapes, as Prometheus's `rate()` and the dashboard do; the share
//! of empty answers is `reads_empty_total / reads_total`.
//!
//! **Lag is measured from `updated_at`**, the stamp of the version delivered, not from
//! `created_at`: an order changes long after it was created, and the age of its
//! creation says nothing about how late its latest version is. For a new order the two
//! are equal. The stamps are the core's clock, so the figure also holds the skew
//! between the core's clock and the server's (an age below 0 counts as 0).
//!
//! # Design
//!
//! **Written by hand, not through the `metrics` facade the engine's server uses.**
//! That facade has one recorder per process, so every feed server in a process would
//! add into the same figures: the loopback servers of the tests, the server that
//! `tranche bench feed` runs beside its cores and clients, and, once a process serves
//! several shards, every shard. Here each server's figures are a value of its own
//! ([`FeedMetrics`], carried by its [`Ingest`](crate::Ingest) so that every protocol
//! serving through that writer records into it), and the text format is a few dozen
//! lines.
//!
//! **Cheap on the hot path.** Recording is a handful of relaxed atomic adds: no lock,
//! no allocation, no lookup by name. A histogram is a fixed list of bucket bounds and
//! one atomic counter per bucket (plus one for the sum), found by a binary search of
//! the bounds; cumulative counts are computed at scrape time. Each protocol's read
//! figures sit on cache lines of their own, so HTTP and TCP readers on different cores
//! do not contend. A scrape reads the counters one by one without stopping writers, so
//! one scrape may show a histogram's `_sum` a record ahead of its buckets; counts are
//! never lost.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tranche_feed::{Order, ReplicaLag, ShardLag, Store, WaitOutcome};

/// Bounds of the lag and group-commit histograms, in microseconds (exposed in
/// seconds): fine around the feed's 1 ms delivery target, coarse up to 10 s.
const MICROS_BOUNDS: &[u64] = &[
    10, 25, 50, 100, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 10_000, 20_000, 50_000,
    100_000, 250_000, 500_000, 1_000_000, 2_500_000, 10_000_000,
];
/// Orders per read answer: `0` is a bucket of its own (the empty answers).
const ROWS_BOUNDS: &[u64] = &[
    0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000,
];
/// Events per ingest batch, up to the store's batch limit.
const EVENTS_BOUNDS: &[u64] = &[
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000,
    1_000_000,
];
/// Batches per group commit (the writer's queue holds 1,024).
const GROUP_BOUNDS: &[u64] = &[1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 512, 1_024];

/// The protocol a read came in by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `GET /v1/feed/orders`.
    Http,
    /// The binary TCP protocol's READ.
    Tcp,
}

impl Protocol {
    const ALL: [Protocol; 2] = [Protocol::Http, Protocol::Tcp];

    fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Tcp => "tcp",
        }
    }
}

/// One feed server's figures: cheap to clone (one `Arc`), recorded from any thread.
#[derive(Clone)]
pub struct FeedMetrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for FeedMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeedMetrics")
            .field("shards", &self.inner.shards.len())
            .finish_non_exhaustive()
    }
}

struct Inner {
    shards: Box<[Padded<Writes>]>,
    reads: [Padded<Reads>; 2],
    replica: Mutex<Option<ReplicaLag>>,
}

/// Keeps what different threads update off each other's cache lines.
#[repr(align(128))]
struct Padded<T>(T);

struct Writes {
    events: AtomicU64,
    batches: AtomicU64,
    bad_batches: AtomicU64,
    failed_batches: AtomicU64,
    batch_events: Histogram,
    group_batches: Histogram,
    group_micros: Histogram,
}

struct Reads {
    answers: AtomicU64,
    empty: AtomicU64,
    wakeups: AtomicU64,
    timeouts: AtomicU64,
    rows: Histogram,
    lag_micros: Histogram,
}

impl FeedMetrics {
    /// The figures of a feed of `shards` shards (at least one), all zero.
    pub fn new(shards: usize) -> FeedMetrics {
        let writes = || Writes {
            events: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bad_batches: AtomicU64::new(0),
            failed_batches: AtomicU64::new(0),
            batch_events: Histogram::new(EVENTS_BOUNDS),
            group_batches: Histogram::new(GROUP_BOUNDS),
            group_micros: Histogram::new(MICROS_BOUNDS),
        };
        let reads = || Reads {
            answers: AtomicU64::new(0),
            empty: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            rows: Histogram::new(ROWS_BOUNDS),
            lag_micros: Histogram::new(MICROS_BOUNDS),
        };
        FeedMetrics {
            inner: Arc::new(Inner {
                shards: (0..shards.max(1)).map(|_| Padded(writes())).collect(),
                reads: [Padded(reads()), Padded(reads())],
                replica: Mutex::new(None),
            }),
        }
    }

    /// Records one read answer of `protocol`: the orders it holds, and how its wait
    /// ended (`None`: it did not wait to the end, e.g. the server was stopping).
    pub fn read_answered(&self, protocol: Protocol, orders: &[Order], wait: Option<WaitOutcome>) {
        let reads = &self.inner.reads[protocol as usize].0;
        reads.answers.fetch_add(1, Relaxed);
        reads.rows.record(orders.len() as u64);
        match orders.iter().map(|o| o.updated_at).min() {
            None => {
                reads.empty.fetch_add(1, Relaxed);
            }
            Some(oldest) => reads
                .lag_micros
                .record(now_nanos().saturating_sub(oldest) / 1_000),
        }
        if let Some(wait) = wait {
            if wait.wakeups > 0 {
                reads.wakeups.fetch_add(u64::from(wait.wakeups), Relaxed);
            }
            if wait.timed_out {
                reads.timeouts.fetch_add(1, Relaxed);
            }
        }
    }

    /// Records one group commit of `shard`'s writer: each batch's event count and
    /// whether it was applied (else refused as invalid), and how long the group took.
    pub(crate) fn group_committed(
        &self,
        shard: usize,
        batches: impl IntoIterator<Item = (usize, bool)>,
        took: Duration,
    ) {
        let writes = self.writes(shard);
        let mut group = 0;
        for (events, applied) in batches {
            group += 1;
            if applied {
                writes.events.fetch_add(events as u64, Relaxed);
                writes.batches.fetch_add(1, Relaxed);
                writes.batch_events.record(events as u64);
            } else {
                writes.bad_batches.fetch_add(1, Relaxed);
            }
        }
        writes.group_batches.record(group);
        writes.group_micros.record(micros(took));
    }

    /// Records a group of `batches` batches that `shard`'s store could not write.
    pub(crate) fn group_failed(&self, shard: usize, batches: usize, took: Duration) {
        let writes = self.writes(shard);
        writes.failed_batches.fetch_add(batches as u64, Relaxed);
        writes.group_batches.record(batches as u64);
        writes.group_micros.record(micros(took));
    }

    fn writes(&self, shard: usize) -> &Writes {
        let shards = &self.inner.shards;
        &shards[shard.min(shards.len() - 1)].0
    }

    /// Exports a replica's lag: its report is read at each scrape, per shard.
    /// Replaces one watched before.
    pub fn watch_replica(&self, lag: ReplicaLag) {
        *self
            .inner
            .replica
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(lag);
    }

    /// The figures in the Prometheus text format, with the gauges of `stores` (shard
    /// `i` is `stores[i]`).
    pub fn render(&self, stores: &[&Store]) -> String {
        let mut out = Exposition::default();
        let shards: Vec<(String, &Writes, Option<&Store>)> = self
            .inner
            .shards
            .iter()
            .enumerate()
            .map(|(i, w)| (i.to_string(), &w.0, stores.get(i).copied()))
            .collect();
        let marks: Vec<Option<(u64, u64, usize)>> = shards
            .iter()
            .map(|(_, _, store)| store.map(|s| (s.marks().0, s.marks().1, s.len())))
            .collect();
        type Gauge = fn((u64, u64, usize)) -> u64;
        for (name, help, pick) in [
            (SEQ, "The highest seq applied.", (|m| m.0) as Gauge),
            (REC, "The highest rec applied.", |m| m.1),
            (ORDERS, "Orders held.", |m| m.2 as u64),
        ] {
            out.family(name, "gauge", help);
            for ((shard, _, _), marks) in shards.iter().zip(&marks) {
                if let Some(marks) = marks {
                    out.sample(name, &[("shard", shard)], pick(*marks));
                }
            }
        }
        type Counter = fn(&Writes) -> &AtomicU64;
        for (name, help, pick) in [
            (
                EVENTS_WRITTEN,
                "Events applied (their batches acknowledged).",
                (|w| &w.events) as Counter,
            ),
            (BATCHES_WRITTEN, "Batches applied.", |w| &w.batches),
        ] {
            out.family(name, "counter", help);
            for (shard, writes, _) in &shards {
                out.sample(name, &[("shard", shard)], pick(writes).load(Relaxed));
            }
        }
        out.family(
            BATCHES_REFUSED,
            "counter",
            "Batches refused: bad_batch (an invalid event), store_failed (the store could not write their group).",
        );
        for (shard, writes, _) in &shards {
            for (reason, n) in [
                ("bad_batch", &writes.bad_batches),
                ("store_failed", &writes.failed_batches),
            ] {
                out.sample(
                    BATCHES_REFUSED,
                    &[("shard", shard), ("reason", reason)],
                    n.load(Relaxed),
                );
            }
        }
        type Hist = fn(&Writes) -> &Histogram;
        for (name, help, pick, unit) in [
            (
                BATCH_EVENTS,
                "Events per batch applied.",
                (|w| &w.batch_events) as Hist,
                Unit::Count,
            ),
            (
                GROUP_BATCHES,
                "Batches per group commit (one log write and one sync).",
                |w| &w.group_batches,
                Unit::Count,
            ),
            (
                GROUP_SECONDS,
                "Time to check, log, sync (per the durability) and publish one group commit.",
                |w| &w.group_micros,
                Unit::Micros,
            ),
        ] {
            out.family(name, "histogram", help);
            for (shard, writes, _) in &shards {
                out.histogram(name, &[("shard", shard)], pick(writes), unit);
            }
        }

        type ReadCounter = fn(&Reads) -> &AtomicU64;
        for (name, help, pick) in [
            (
                READS,
                "Read answers (pages, empty or not).",
                (|r| &r.answers) as ReadCounter,
            ),
            (READS_EMPTY, "Read answers with no order.", |r| &r.empty),
            (
                WAKEUPS,
                "Times a waiting read was woken by a write to its filter key.",
                |r| &r.wakeups,
            ),
            (
                TIMEOUTS,
                "Reads answered because wait_ms passed with fewer than min_batch orders ready.",
                |r| &r.timeouts,
            ),
        ] {
            out.family(name, "counter", help);
            for protocol in Protocol::ALL {
                let reads = &self.inner.reads[protocol as usize].0;
                out.sample(
                    name,
                    &[("protocol", protocol.label())],
                    pick(reads).load(Relaxed),
                );
            }
        }
        type ReadHist = fn(&Reads) -> &Histogram;
        for (name, help, pick, unit) in [
            (
                READ_ROWS,
                "Orders per read answer (the sum: orders delivered).",
                (|r| &r.rows) as ReadHist,
                Unit::Count,
            ),
            (
                READ_LAG,
                "Per non-empty read answer, the age of its oldest order version when answered (now - updated_at).",
                |r| &r.lag_micros,
                Unit::Micros,
            ),
        ] {
            out.family(name, "histogram", help);
            for protocol in Protocol::ALL {
                let reads = &self.inner.reads[protocol as usize].0;
                out.histogram(name, &[("protocol", protocol.label())], pick(reads), unit);
            }
        }

        let replica = self
            .inner
            .replica
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(lag) = replica.as_ref() {
            let shards: Vec<(String, ShardLag)> = lag
                .report()
                .shards
                .into_iter()
                .map(|s| (s.shard.to_string(), s))
                .collect();
            type Figure = fn(&ShardLag) -> String;
            for (name, kind, help, pick) in [
                (
                    REPLICA_LAG_SECONDS,
                    "gauge",
                    "How long the oldest change of the primary not applied here has been known (while disconnected: since the primary was last heard).",
                    (|s| finite(s.seconds_behind)) as Figure,
                ),
                (
                    REPLICA_LAG_EVENTS,
                    "gauge",
                    "The primary's events not applied here yet.",
                    |s| s.seqs_behind.to_string(),
                ),
                (
                    REPLICA_CONNECTED,
                    "gauge",
                    "1 while the replica follows its primary, else 0.",
                    |s| u8::from(s.connected).to_string(),
                ),
                (
                    REPLICA_RESYNCS,
                    "counter",
                    "Times the replica started over from the primary's beginning.",
                    |s| s.resyncs.to_string(),
                ),
            ] {
                out.family(name, kind, help);
                for (shard, figures) in &shards {
                    out.sample(name, &[("shard", shard)], pick(figures));
                }
            }
        }
        out.text
    }
}

/// The metric names, for scrapers.
pub const SEQ: &str = "tranche_feed_seq";
/// See the module docs.
pub const REC: &str = "tranche_feed_rec";
/// See the module docs.
pub const ORDERS: &str = "tranche_feed_orders";
/// See the module docs.
pub const EVENTS_WRITTEN: &str = "tranche_feed_events_written_total";
/// See the module docs.
pub const BATCHES_WRITTEN: &str = "tranche_feed_batches_written_total";
/// See the module docs.
pub const BATCHES_REFUSED: &str = "tranche_feed_batches_refused_total";
/// See the module docs.
pub const BATCH_EVENTS: &str = "tranche_feed_batch_events";
/// See the module docs.
pub const GROUP_BATCHES: &str = "tranche_feed_group_commit_batches";
/// See the module docs.
pub const GROUP_SECONDS: &str = "tranche_feed_group_commit_seconds";
/// See the module docs.
pub const READS: &str = "tranche_feed_reads_total";
/// See the module docs.
pub const READS_EMPTY: &str = "tranche_feed_reads_empty_total";
/// See the module docs.
pub const READ_ROWS: &str = "tranche_feed_read_rows";
/// See the module docs.
pub const READ_LAG: &str = "tranche_feed_read_lag_seconds";
/// See the module docs.
pub const WAKEUPS: &str = "tranche_feed_long_poll_wakeups_total";
/// See the module docs.
pub const TIMEOUTS: &str = "tranche_feed_long_poll_timeouts_total";
/// See the module docs.
pub const REPLICA_LAG_SECONDS: &str = "tranche_feed_replica_lag_seconds";
/// See the module docs.
pub const REPLICA_LAG_EVENTS: &str = "tranche_feed_replica_lag_events";
/// See the module docs.
pub const REPLICA_CONNECTED: &str = "tranche_feed_replica_connected";
/// See the module docs.
pub const REPLICA_RESYNCS: &str = "tranche_feed_replica_resyncs_total";

/// A float as the text format writes it (Rust writes infinity as `inf`).
fn finite(value: f64) -> String {
    match value {
        v if v.is_nan() => "NaN".into(),
        v if v == f64::INFINITY => "+Inf".into(),
        v if v == f64::NEG_INFINITY => "-Inf".into(),
        v => v.to_string(),
    }
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// A histogram with fixed bucket bounds (a value lands in the first bucket whose
/// bound is at least the value, or in the last, unbounded one).
struct Histogram {
    bounds: &'static [u64],
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    fn record(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&bound| bound < value);
        self.counts[bucket].fetch_add(1, Relaxed);
        self.sum.fetch_add(value, Relaxed);
    }

    /// Each bucket's own count (the last: above every bound), and the sum.
    fn snapshot(&self) -> (Vec<u64>, u64) {
        let counts = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        (counts, self.sum.load(Relaxed))
    }
}

#[derive(Clone, Copy)]
enum Unit {
    Count,
    /// Recorded in microseconds, exported in seconds (Prometheus's base unit).
    Micros,
}

/// Microseconds written as seconds, exactly (no float rounding: `0.00025`, `1.5`).
struct Seconds(u64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, frac) = (self.0 / 1_000_000, self.0 % 1_000_000);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{frac:06}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{key}=\"");
                for c in value.chars() {
                    match c {
                        '\\' => self.text.push_str("\\\\"),
                        '"' => self.text.push_str("\\\""),
                        '\n' => self.text.push_str("\\n"),
                        c => self.text.push(c),
                    }
                }
                self.text.push('"');
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        histogram: &Histogram,
        unit: Unit,
    ) {
        let (counts, sum) = histogram.snapshot();
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        for (i, count) in counts.iter().enumerate() {
            cumulative += count;
            let le = match (histogram.bounds.get(i), unit) {
                (None, _) => "+Inf".to_string(),
                (Some(bound), Unit::Count) => bound.to_string(),
                (Some(bound), Unit::Micros) => Seconds(*bound).to_string(),
            };
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative);
        }
        match unit {
            Unit::Count => self.sample(&format!("{name}_sum"), labels, sum),
            Unit::Micros => self.sample(&format!("{name}_sum"), labels, Seconds(sum)),
        }
        self.sample(&format!("{name}_count"), labels, cumulative);
    }
}

/// One sample of a scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The series' name (a histogram's with `_bucket`, `_sum` or `_count`).
    pub name: String,
    /// Its labels, as written.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

/// A `/metrics` answer read back, for tests and tools that scrape a feed server.
/// Parsing checks the rules of the text format this module writes: each family
/// declared once by `# TYPE` before its samples, its samples together, a histogram's
/// buckets cumulative and ending with `+Inf` equal to its `_count`.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    /// The samples, in the order written.
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// Parses `text`; an error names the line and what is wrong with it.
    pub fn parse(text: &str) -> Result<Scrape, String> {
        let mut types: Vec<(String, String)> = Vec::new();
        let mut samples = Vec::new();
        let mut current: Option<String> = None;
        for (i, line) in text.lines().enumerate() {
            let at = |problem: String| format!("line {}: {problem}: {line}", i + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest
                    .split_once(' ')
                    .ok_or_else(|| at("a TYPE without a type".into()))?;
                if types.iter().any(|(n, _)| n == name) {
                    return Err(at(format!("{name} declared twice")));
                }
                if !matches!(kind, "counter" | "gauge" | "histogram") {
                    return Err(at(format!("unknown type {kind}")));
                }
                types.push((name.to_string(), kind.to_string()));
                current = Some(name.to_string());
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value".into()))?;
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().map_err(|_| at(format!("bad value {v:?}")))?,
            };
            let (name, labels) = match series.split_once('{') {
                None => (series.to_string(), Vec::new()),
                Some((name, rest)) => {
                    let body = rest
                        .strip_suffix('}')
                        .ok_or_else(|| at("labels not closed".into()))?;
                    (name.to_string(), parse_labels(body).map_err(at)?)
                }
            };
            let family = current
                .as_deref()
                .ok_or_else(|| at("a sample before any TYPE".into()))?;
            let kind = &types.last().expect("current is declared").1;
            let belongs = name == family
                || (kind == "histogram"
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|suffix| name.strip_suffix(suffix) == Some(family)));
            if !belongs {
                return Err(at(format!("not of the family declared last ({family})")));
            }
            samples.push(Sample {
                name,
                labels,
                value,
            });
        }
        let scrape = Scrape { samples };
        for (name, kind) in &types {
            if kind == "histogram" {
                scrape.check_histogram(name)?;
            }
        }
        Ok(scrape)
    }

    fn check_histogram(&self, name: &str) -> Result<(), String> {
        let bucket = format!("{name}_bucket");
        let count = format!("{name}_count");
        for total in self.samples.iter().filter(|s| s.name == count) {
            let mut last = 0.0;
            let mut bound = f64::NEG_INFINITY;
            let mut inf = None;
            for b in self.samples.iter().filter(|s| {
                s.name == bucket
                    && s.labels
                        .iter()
                        .filter(|(k, _)| k != "le")
                        .eq(total.labels.iter())
            }) {
                let le = b
                    .labels
                    .iter()
                    .find(|(k, _)| k == "le")
                    .ok_or_else(|| format!("{bucket} without le"))?;
                let le: f64 = match le.1.as_str() {
                    "+Inf" => f64::INFINITY,
                    v => v.parse().map_err(|_| format!("{bucket}: bad le {v:?}"))?,
                };
                if le <= bound || b.value < last {
                    return Err(format!("{bucket}{:?}: not cumulative", b.labels));
                }
                (bound, last) = (le, b.value);
                if le == f64::INFINITY {
                    inf = Some(b.value);
                }
            }
            if inf != Some(total.value) {
                return Err(format!(
                    "{name}{:?}: +Inf bucket {inf:?}, count {}",
                    total.labels, total.value
                ));
            }
        }
        Ok(())
    }

    /// The value of the series `name` with exactly `labels` (in any order).
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
            })
            .map(|s| s.value)
    }

    /// [`Scrape::get`], 0 when the series is absent.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels).unwrap_or(0.0)
    }
}

fn parse_labels(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .ok_or_else(|| format!("a label without =\" in {body:?}"))?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("an escape at the end of {body:?}")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("a label value not closed in {body:?}")),
            }
        };
        labels.push((key.to_string(), value));
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tranche_feed::{
        BrokerId, Event, FeedOptions, FirmId, InstrumentId, NewOrder, OrderId, Side, Status,
    };

    fn order(updated_at: u64) -> Order {
        Order {
            id: OrderId(1),
            firm: FirmId(1),
            broker: BrokerId(1),
            instrument: InstrumentId(1),
            side: Side::Buy,
            price: 1,
            quantity: 1,
            filled: 0,
            status: Status::New,
            created_at: 1,
            updated_at,
            seq: 1,
            rec: 1,
        }
    }

    #[test]
    fn a_value_lands_in_the_first_bucket_whose_bound_holds_it() {
        let h = Histogram::new(&[0, 1, 5, 10]);
        for v in [0, 1, 2, 5, 6, 10, 11, 1_000] {
            h.record(v);
        }
        let (counts, sum) = h.snapshot();
        // ≤0: 0 | ≤1: 1 | ≤5: 2, 5 | ≤10: 6, 10 | above: 11, 1000
        assert_eq!(counts, [1, 1, 2, 2, 2]);
        assert_eq!(sum, 1_035);
    }

    #[test]
    fn counts_recorded_from_many_threads_add_up() {
        let h = Arc::new(Histogram::new(ROWS_BOUNDS));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let h = Arc::clone(&h);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        h.record((i * 7 + t) % 20_000);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (counts, sum) = h.snapshot();
        assert_eq!(counts.iter().sum::<u64>(), 40_000);
        let expected: u64 = (0..4u64)
            .flat_map(|t| (0..10_000u64).map(move |i| (i * 7 + t) % 20_000))
            .sum();
        assert_eq!(sum, expected);
    }

    #[test]
    fn seconds_are_written_exactly() {
        for (micros, text) in [
            (0, "0"),
            (10, "0.00001"),
            (250, "0.00025"),
            (1_000, "0.001"),
            (1_500_000, "1.5"),
            (10_000_000, "10"),
            (1_234_567, "1.234567"),
        ] {
            assert_eq!(Seconds(micros).to_string(), text);
        }
    }

    fn store_with(events: &[Event]) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut writer) = Store::open(dir.path(), FeedOptions::default()).unwrap();
        writer.apply(events).unwrap();
        (dir, store)
    }

    fn insert(seq: u64) -> Event {
        Event::Insert(NewOrder {
            seq,
            rec: seq,
            id: OrderId(seq),
            firm: FirmId(1),
            broker: BrokerId(1),
            instrument: InstrumentId(1),
            side: Side::Sell,
            price: 5,
            quantity: 5,
            created_at: 1,
        })
    }

    #[test]
    fn what_is_recorded_reads_back_from_the_text_with_the_counts_adding_up() {
        let (_dir, store) = store_with(&[insert(1), insert(2), insert(3)]);
        let metrics = FeedMetrics::new(1);
        metrics.group_committed(0, [(3, true), (2, false)], Duration::from_micros(400));
        metrics.group_committed(0, [(1, true)], Duration::from_millis(3));
        metrics.group_failed(0, 2, Duration::from_secs(20));
        let now = now_nanos();
        // 2 s old and fresh: the lag is the oldest version's age, ~2 s.
        let page = [order(now - 2_000_000_000), order(now)];
        let waited = WaitOutcome {
            ready: 2,
            wakeups: 3,
            timed_out: false,
        };
        metrics.read_answered(Protocol::Http, &page, Some(waited));
        let timed_out = WaitOutcome {
            ready: 0,
            wakeups: 0,
            timed_out: true,
        };
        metrics.read_answered(Protocol::Http, &[], Some(timed_out));
        metrics.read_answered(Protocol::Tcp, &page[1..], None);
        let replica = ReplicaLag::new();
        replica.resynced(0);
        replica.resynced(0);
        replica.set_connected(0, true);
        let heard = std::time::Instant::now() - Duration::from_millis(1_500);
        replica.heard(0, 50, heard);
        replica.applied(0, 8);
        metrics.watch_replica(replica);

        let text = metrics.render(&[&store]);
        let scrape = Scrape::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let shard = [("shard", "0")];
        let http = [("protocol", "http")];
        let tcp = [("protocol", "tcp")];
        assert_eq!(scrape.get(SEQ, &shard), Some(3.0));
        assert_eq!(scrape.get(REC, &shard), Some(3.0));
        assert_eq!(scrape.get(ORDERS, &shard), Some(3.0));
        assert_eq!(scrape.get(EVENTS_WRITTEN, &shard), Some(4.0));
        assert_eq!(scrape.get(BATCHES_WRITTEN, &shard), Some(2.0));
        let refused = |reason| scrape.get(BATCHES_REFUSED, &[("shard", "0"), ("reason", reason)]);
        assert_eq!(refused("bad_batch"), Some(1.0));
        assert_eq!(refused("store_failed"), Some(2.0));
        let bucket = |name: &str, labels: &[(&str, &str)], le: &str| {
            let mut labels = labels.to_vec();
            labels.push(("le", le));
            scrape.get(&format!("{name}_bucket"), &labels)
        };
        let count =
            |name: &str, labels: &[(&str, &str)]| scrape.get(&format!("{name}_count"), labels);
        let sum = |name: &str, labels: &[(&str, &str)]| scrape.get(&format!("{name}_sum"), labels);
        // Batches of 3 and 1 events applied; the refused one is not a batch written.
        assert_eq!(count(BATCH_EVENTS, &shard), Some(2.0));
        assert_eq!(sum(BATCH_EVENTS, &shard), Some(4.0));
        assert_eq!(bucket(BATCH_EVENTS, &shard, "1"), Some(1.0));
        assert_eq!(bucket(BATCH_EVENTS, &shard, "2"), Some(1.0));
        assert_eq!(bucket(BATCH_EVENTS, &shard, "5"), Some(2.0));
        // Three groups of 2, 1 and 2 batches (the failed one included).
        assert_eq!(count(GROUP_BATCHES, &shard), Some(3.0));
        assert_eq!(sum(GROUP_BATCHES, &shard), Some(5.0));
        assert_eq!(bucket(GROUP_SECONDS, &shard, "0.0005"), Some(1.0));
        assert_eq!(bucket(GROUP_SECONDS, &shard, "0.003"), Some(2.0));
        assert_eq!(bucket(GROUP_SECONDS, &shard, "10"), Some(2.0));
        assert_eq!(bucket(GROUP_SECONDS, &shard, "+Inf"), Some(3.0));
        assert_eq!(sum(GROUP_SECONDS, &shard), Some(20.0034));

        assert_eq!(scrape.get(READS, &http), Some(2.0));
        assert_eq!(scrape.get(READS_EMPTY, &http), Some(1.0));
        assert_eq!(scrape.get(WAKEUPS, &http), Some(3.0));
        assert_eq!(scrape.get(TIMEOUTS, &http), Some(1.0));
        assert_eq!(count(READ_ROWS, &http), Some(2.0));
        assert_eq!(sum(READ_ROWS, &http), Some(2.0));
        assert_eq!(
            bucket(READ_ROWS, &http, "0"),
            scrape.get(READS_EMPTY, &http),
            "the empty answers are the first bucket"
        );
        assert_eq!(
            count(READ_LAG, &http),
            Some(1.0),
            "empty answers have no lag"
        );
        assert_eq!(bucket(READ_LAG, &http, "1"), Some(0.0));
        assert_eq!(bucket(READ_LAG, &http, "2.5"), Some(1.0));
        let lag = sum(READ_LAG, &http).unwrap();
        assert!((2.0..2.5).contains(&lag), "{lag}");
        assert_eq!(scrape.get(READS, &tcp), Some(1.0));
        assert_eq!(scrape.get(READS_EMPTY, &tcp), Some(0.0));
        assert_eq!(scrape.get(TIMEOUTS, &tcp), Some(0.0));
        let behind = scrape.get(REPLICA_LAG_SECONDS, &shard).unwrap();
        assert!((1.5..2.5).contains(&behind), "{behind}");
        assert_eq!(scrape.get(REPLICA_LAG_EVENTS, &shard), Some(42.0));
        assert_eq!(scrape.get(REPLICA_CONNECTED, &shard), Some(1.0));
        assert_eq!(scrape.get(REPLICA_RESYNCS, &shard), Some(2.0));

        // Every family is declared once, with HELP, and every series is one of them.
        for name in [
            SEQ,
            REC,
            ORDERS,
            EVENTS_WRITTEN,
            BATCHES_WRITTEN,
            BATCHES_REFUSED,
            BATCH_EVENTS,
            GROUP_BATCHES,
            GROUP_SECONDS,
            READS,
            READS_EMPTY,
            READ_ROWS,
            READ_LAG,
            WAKEUPS,
            TIMEOUTS,
            REPLICA_LAG_SECONDS,
            REPLICA_LAG_EVENTS,
            REPLICA_CONNECTED,
            REPLICA_RESYNCS,
        ] {
            let type_lines = text
                .lines()
                .filter(|l| l.starts_with(&format!("# TYPE {name} ")))
                .count();
            let help_lines = text
                .lines()
                .filter(|l| l.starts_with(&format!("# HELP {name} ")))
                .count();
            assert_eq!((type_lines, help_lines), (1, 1), "{name}");
        }
    }

    #[test]
    fn a_server_without_replicas_exports_no_replica_lag_and_zeros_before_any_traffic() {
        let (_dir, store) = store_with(&[]);
        let text = FeedMetrics::new(1).render(&[&store]);
        let scrape = Scrape::parse(&text).unwrap();
        assert!(!text.contains("replica"), "{text}");
        assert_eq!(scrape.get(SEQ, &[("shard", "0")]), Some(0.0));
        assert_eq!(scrape.get(READS, &[("protocol", "tcp")]), Some(0.0));
        assert_eq!(
            scrape.get(
                &format!("{READ_LAG}_bucket"),
                &[("protocol", "http"), ("le", "+Inf")]
            ),
            Some(0.0)
        );
    }

    #[test]
    fn several_shards_are_labelled_by_index() {
        let (_a, first) = store_with(&[insert(1)]);
        let (_b, second) = store_with(&[insert(1), insert(2)]);
        let metrics = FeedMetrics::new(2);
        metrics.group_committed(1, [(5, true)], Duration::ZERO);
        let scrape = Scrape::parse(&metrics.render(&[&first, &second])).unwrap();
        assert_eq!(scrape.get(SEQ, &[("shard", "0")]), Some(1.0));
        assert_eq!(scrape.get(SEQ, &[("shard", "1")]), Some(2.0));
        assert_eq!(scrape.get(EVENTS_WRITTEN, &[("shard", "0")]), Some(0.0));
        assert_eq!(scrape.get(EVENTS_WRITTEN, &[("shard", "1")]), Some(5.0));
    }

    #[test]
    fn the_parser_refuses_what_the_format_forbids() {
        for (text, why) in [
            ("x 1\n", "before any TYPE"),
            ("# TYPE x gauge\n# TYPE x gauge\n", "declared twice"),
            ("# TYPE x gauge\ny 1\n", "not of the family"),
            ("# TYPE x gauge\nx{a=\"1} 1\n", "not closed"),
            ("# TYPE x gauge\nx one\n", "bad value"),
            (
                "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
                "not cumulative",
            ),
            (
                "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_count 2\n",
                "+Inf bucket",
            ),
        ] {
            let error = Scrape::parse(text).unwrap_err();
            assert!(error.contains(why), "{text:?}: {error}");
        }
        let scrape =
            Scrape::parse("# TYPE x gauge\nx{a=\"q\\\"u\\\\o\\nte\",b=\"\"} 2.5\n").unwrap();
        assert_eq!(
            scrape.get("x", &[("b", ""), ("a", "q\"u\\o\nte")]),
            Some(2.5)
        );
    }
}
