//! `tranche bench engine --rate-limited`: the bench's queue limited to a start rate
//! (5,000 starts/s by default), and how close the measured start rate comes to it.
//!
//! Starts are the attempts' reserve times on the backend's clock, read back from the
//! jobs once the run is done (a handler's own start lags its reserve by however busy
//! the worker is, which would smear starts across windows). The measured rate counts
//! the starts within the whole windows from the first start (the last, partial window
//! left out, as the jobs run out in it) over their length; the busiest window of the
//! same length anywhere (a sliding one) shows the limit was never exceeded.

use futures::{StreamExt, TryStreamExt};
use serde::Serialize;
use tranche_core::Client;
use tranche_types::{JobFilter, Limit, LimitScope, RunName, StartRate};

#[derive(Serialize)]
pub struct RateReport {
    pub limit_per_sec: u32,
    pub measured_per_sec: f64,
    /// (measured - limit) / limit, in percent.
    pub deviation_pct: f64,
    /// The most starts within any one window (at most the limit).
    pub busiest_window: u64,
    pub windows_measured: u64,
}

/// Limit `queue` to `per_sec` starts per second.
pub async fn limit(client: &Client, queue: &str, per_sec: u32) -> anyhow::Result<()> {
    client
        .put_limit(&Limit {
            scope: LimitScope::Queue(queue.to_string()),
            starts: Some(StartRate {
                count: per_sec,
                per_ms: 1_000,
            }),
            running: None,
        })
        .await?;
    Ok(())
}

/// Every job's reserve time (µs), read back from the run's jobs.
pub async fn starts(client: &Client, run: &RunName) -> anyhow::Result<Vec<i64>> {
    let filter = JobFilter {
        run: Some(run.clone()),
        ..JobFilter::default()
    };
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = client.list_jobs(&filter, after, 10_000).await?;
        ids.extend(page.jobs.iter().map(|j| j.id));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    futures::stream::iter(ids)
        .map(|id| async move {
            let job = client.job(id).await?;
            anyhow::Ok(job.and_then(|j| j.started_at).map(|t| t.0))
        })
        .buffer_unordered(32)
        .try_filter_map(|t| async move { Ok(t) })
        .try_collect()
        .await
}

pub fn report(mut at: Vec<i64>, per_sec: u32) -> anyhow::Result<RateReport> {
    at.sort_unstable();
    let per = 1_000_000i64;
    let (first, last) = match (at.first(), at.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => anyhow::bail!("no job started"),
    };
    let windows = (last - first) / per;
    anyhow::ensure!(
        windows >= 1,
        "the jobs started within one window: enqueue more than {per_sec} (--jobs)"
    );
    let end = first + windows * per;
    let counted = at.partition_point(|t| *t < end) as f64;
    let measured = counted / windows as f64;
    let mut busiest = 0usize;
    let mut from = 0usize;
    for (i, t) in at.iter().enumerate() {
        while at[from] <= t - per {
            from += 1;
        }
        busiest = busiest.max(i + 1 - from);
    }
    Ok(RateReport {
        limit_per_sec: per_sec,
        measured_per_sec: measured,
        deviation_pct: (measured - f64::from(per_sec)) / f64::from(per_sec) * 100.0,
        busiest_window: busiest as u64,
        windows_measured: windows as u64,
    })
}
