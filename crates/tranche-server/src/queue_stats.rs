//! The backend's per-queue statistics as Prometheus families, rendered at scrape time.
//!
//! They cover every job whoever worked it (the engine's workers in any process sharing
//! the backend, remote workers through any server), because the backend records them
//! where each attempt starts and ends. They are cumulative values read from the
//! backend, which the `metrics` facade cannot set (its counters only add and its
//! histograms only record samples), so they are written here as text and appended to
//! the recorder's output; no name here is registered through the facade.

use std::fmt::Write;

use tranche_types::{Histogram, QueueStats, LATENCY_BUCKETS_MS};

pub const STARTED: &str = "tranche_jobs_started_total";
pub const FINISHED: &str = "tranche_jobs_finished_total";
pub const RETRIES: &str = "tranche_job_retries_total";
pub const LEASE_EXPIRIES: &str = "tranche_lease_expiries_total";
pub const QUEUE_WAIT: &str = "tranche_job_queue_wait_seconds";
pub const RUN_TIME: &str = "tranche_job_run_seconds";

/// Every family, with its HELP line even when no queue has statistics yet.
pub fn render(stats: &[QueueStats]) -> String {
    let mut out = String::new();
    let mut counter = |name: &str, help: &str, values: &dyn Fn(&QueueStats) -> Vec<(&str, u64)>| {
        header(&mut out, name, "counter", help);
        for s in stats {
            let queue = label(&s.queue);
            for (extra, n) in values(s) {
                let _ = writeln!(out, "{name}{{queue=\"{queue}\"{extra}}} {n}");
            }
        }
    };
    counter(
        STARTED,
        "Attempts handed out (reserved), by queue, whoever works them.",
        &|s| vec![("", s.started)],
    );
    counter(
        FINISHED,
        "Jobs that ended through an attempt, by queue and outcome (failed: reported failed, or out of attempts), whoever worked them.",
        &|s| {
            vec![
                (",outcome=\"succeeded\"", s.succeeded),
                (",outcome=\"failed\"", s.failed),
            ]
        },
    );
    counter(
        RETRIES,
        "Attempts reported failed whose job will run again, by queue.",
        &|s| vec![("", s.retried)],
    );
    counter(
        LEASE_EXPIRIES,
        "Leases that expired (the worker stopped heartbeating) once the backend recovered the job, by queue.",
        &|s| vec![("", s.expired)],
    );
    histogram(
        &mut out,
        QUEUE_WAIT,
        "From a job becoming runnable to an attempt being reserved, by queue.",
        stats,
        |s| &s.wait,
    );
    histogram(
        &mut out,
        RUN_TIME,
        "From an attempt being reserved to its result (succeeded, failed or retried) being applied, by queue.",
        stats,
        |s| &s.run,
    );
    out
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn histogram(
    out: &mut String,
    name: &str,
    help: &str,
    stats: &[QueueStats],
    of: impl Fn(&QueueStats) -> &Histogram,
) {
    header(out, name, "histogram", help);
    for s in stats {
        let queue = label(&s.queue);
        let h = of(s);
        let mut cumulative = 0;
        for (i, n) in h.buckets.iter().enumerate() {
            cumulative += n;
            let le = LATENCY_BUCKETS_MS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |ms| (ms / 1000.0).to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{queue=\"{queue}\",le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(out, "{name}_sum{{queue=\"{queue}\"}} {}", h.sum_ms / 1000.0);
        let _ = writeln!(out, "{name}_count{{queue=\"{queue}\"}} {}", h.count);
    }
}

/// A label value in the text format: backslash, double quote and newline escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_in_seconds() {
        let mut s = QueueStats::new("pdf \"a\"");
        s.started = 3;
        s.succeeded = 2;
        s.wait = Histogram::from_parts(vec![1, 0, 2], 4_500);
        let text = render(&[s]);
        for line in [
            "tranche_jobs_started_total{queue=\"pdf \\\"a\\\"\"} 3",
            "tranche_jobs_finished_total{queue=\"pdf \\\"a\\\"\",outcome=\"succeeded\"} 2",
            "tranche_job_queue_wait_seconds_bucket{queue=\"pdf \\\"a\\\"\",le=\"0.0005\"} 1",
            "tranche_job_queue_wait_seconds_bucket{queue=\"pdf \\\"a\\\"\",le=\"0.001\"} 1",
            "tranche_job_queue_wait_seconds_bucket{queue=\"pdf \\\"a\\\"\",le=\"0.0025\"} 3",
            "tranche_job_queue_wait_seconds_bucket{queue=\"pdf \\\"a\\\"\",le=\"1800\"} 3",
            "tranche_job_queue_wait_seconds_bucket{queue=\"pdf \\\"a\\\"\",le=\"+Inf\"} 3",
            "tranche_job_queue_wait_seconds_sum{queue=\"pdf \\\"a\\\"\"} 0.0045",
            "tranche_job_queue_wait_seconds_count{queue=\"pdf \\\"a\\\"\"} 3",
            "tranche_job_run_seconds_count{queue=\"pdf \\\"a\\\"\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
        }
        assert!(render(&[]).contains("# TYPE tranche_job_run_seconds histogram"));
    }
}
