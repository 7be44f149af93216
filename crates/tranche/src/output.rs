use std::time::Duration;

use tranche_types::{RunProgress, Timestamp};

pub fn run_line(p: &RunProgress) -> String {
    let name = p.run.as_ref().map_or("?", |r| r.as_str());
    let pct = if p.total == 0 {
        0.0
    } else {
        100.0 * p.ended() as f64 / p.total as f64
    };
    let state = if p.is_finished() { "finished" } else { "open" };
    format!(
        "{name:<40} {state:<8} {pct:>5.1}%  total {:>9}  queued {:>9}  running {:>6}  succeeded {:>9}  failed {:>7}  cancelled {:>7}",
        p.total,
        p.queued(),
        p.running,
        p.succeeded,
        p.failed,
        p.cancelled
    )
}

pub fn when(t: Option<Timestamp>) -> String {
    match t {
        None => "-".to_string(),
        Some(t) => match chrono::DateTime::from_timestamp_micros(t.0) {
            Some(at) => at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            // Beyond chrono's ±262,000 years: only a corrupt record gets there.
            None => format!("{} µs after 1970-01-01 UTC", t.0),
        },
    }
}

/// A server URL as scheme://host:port only: user names and passwords never reach
/// output. `default_port` when the URL names none (and its scheme has none known).
pub fn server_address(url: &str, default_port: u16) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}:{}",
            u.scheme(),
            u.host_str().unwrap_or("?"),
            u.port_or_known_default().unwrap_or(default_port)
        ),
        Err(_) => "(an unparsable URL)".to_string(),
    }
}

pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.1} ms", s * 1000.0)
    } else if s < 120.0 {
        format!("{s:.2} s")
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_render() {
        assert_eq!(when(Some(Timestamp(0))), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            when(Some(Timestamp(1_795_478_400_000_000))),
            "2026-11-24 00:00:00 UTC"
        );
        assert_eq!(when(Some(Timestamp(-1))), "1969-12-31 23:59:59 UTC");
        assert_eq!(when(None), "-");
    }
}
