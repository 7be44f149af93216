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
        Some(t) => {
            let secs = t.0.div_euclid(1_000_000);
            let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
            let (y, m, d) = civil_from_days(days);
            format!(
                "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            )
        }
    }
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm);
/// a few lines instead of a date-time dependency for one display.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
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
        assert_eq!(when(None), "-");
    }
}
