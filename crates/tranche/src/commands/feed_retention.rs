//! `tranche feed serve --retain`: finished orders whose last change is older than the
//! retention are evicted, so a feed serving day after day holds that much of its
//! finished orders plus every open one, and a cursor older than what it keeps gets 410
//! with the oldest cursor it serves.
//!
//! The store orders by position (seq, rec), not by time, so this loop notes each
//! shard's newest position with the time it saw it and evicts through the newest note
//! at least `retain` old. The notes live in memory: after a restart nothing is evicted
//! until `retain` has passed again (more is kept for a while, never less).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tranche_feed::{Cursor, Shards};
use tranche_feed_service::Ingest;

/// `off`, or `<n>s|m|h|d` (e.g. 24h, 90m).
pub fn parse_retention(text: &str) -> Result<Retention, String> {
    if text == "off" {
        return Ok(Retention(None));
    }
    let expected = || format!("expected off or <n>s|m|h|d (e.g. 24h, 90m), got {text:?}");
    let (n, unit) = super::feed::count_and_unit(text).ok_or_else(expected)?;
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(expected()),
    };
    let seconds = n.checked_mul(per).ok_or_else(expected)?;
    if seconds == 0 {
        return Err(format!(
            "a retention must be more than 0 (off keeps everything), got {text:?}"
        ));
    }
    Ok(Retention(Some(Duration::from_secs(seconds))))
}

/// How long finished orders are kept (`None`: for ever).
#[derive(Debug, Clone, Copy)]
pub struct Retention(pub Option<Duration>);

/// Evicts, shard by shard through its writer task, until `stop`.
pub async fn run(shards: Shards, ingest: Vec<Ingest>, retain: Duration, stop: CancellationToken) {
    let every = (retain / 8).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut notes: VecDeque<(Instant, Vec<Cursor>)> = VecDeque::new();
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = Instant::now();
        let newest = (0..shards.len())
            .map(|k| shards.shard(k).map_or(Cursor::START, |s| s.newest()))
            .collect();
        notes.push_back((now, newest));
        let mut floor = None;
        while notes
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= retain)
        {
            floor = notes.pop_front();
        }
        let Some((at, floors)) = floor else { continue };
        for (k, (floor, ingest)) in floors.iter().zip(&ingest).enumerate() {
            match ingest.evict_terminal_through(*floor).await {
                Ok(0) => {}
                Ok(evicted) => tracing::info!(
                    shard = k,
                    evicted,
                    "feed: finished orders older than the retention evicted"
                ),
                Err(error) => tracing::warn!(shard = k, %error, "feed: eviction failed"),
            }
        }
        // Kept as the oldest note: the next floor is never behind it.
        notes.push_front((at, floors));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retentions_read_and_refuse_what_they_should() {
        assert_eq!(
            parse_retention("24h").unwrap().0,
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(
            parse_retention("90m").unwrap().0,
            Some(Duration::from_secs(5_400))
        );
        assert_eq!(
            parse_retention("2d").unwrap().0,
            Some(Duration::from_secs(172_800))
        );
        assert!(parse_retention("off").unwrap().0.is_none());
        for bad in ["", "24", "h", "0s", "1w", "-1h", "99999999999999999d"] {
            assert!(parse_retention(bad).is_err(), "{bad}");
        }
    }
}
