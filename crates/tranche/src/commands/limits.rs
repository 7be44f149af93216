//! `tranche limit set|delete` and `tranche limits`: rate limits and running caps per
//! queue or task kind, stored in the backend and enforced for every worker sharing it.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use tranche_types::{Limit, LimitScope, LimitStatus, StartRate};

use crate::cli::{DataArgs, LimitTarget};
use crate::data::{open, open_existing};

/// A window from the command line: a number and a unit, `ms`, `s`, `m` or `h`
/// (`15s`, `500ms`, `1m`).
pub fn parse_per(s: &str) -> Result<Duration, String> {
    let expected = || format!("expected a number and a unit (500ms, 15s, 1m, 1h), got {s:?}");
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(expected)?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| expected())?;
    let ms = match unit {
        "ms" => n,
        "s" => n.saturating_mul(1_000),
        "m" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        _ => return Err(expected()),
    };
    Ok(Duration::from_millis(ms))
}

fn scope(target: &LimitTarget) -> LimitScope {
    match (&target.queue, &target.kind) {
        (Some(q), _) => LimitScope::Queue(q.clone()),
        (None, Some(k)) => LimitScope::Kind(k.clone()),
        (None, None) => unreachable!("clap requires --queue or --kind"),
    }
}

/// `1 start per 15s, 2 running`.
fn describe(limit: &Limit) -> String {
    let mut parts = Vec::new();
    if let Some(r) = limit.starts {
        let per = Duration::from_millis(r.per_ms);
        parts.push(format!(
            "{} start{} per {}",
            r.count,
            if r.count == 1 { "" } else { "s" },
            crate::output::duration(per)
        ));
    }
    if let Some(k) = limit.running {
        parts.push(format!("{k} running"));
    }
    parts.join(", ")
}

pub async fn set(
    at: &DataArgs,
    target: &LimitTarget,
    starts: Option<u32>,
    per: Option<Duration>,
    running: Option<u32>,
) -> Result<ExitCode> {
    let limit = Limit {
        scope: scope(target),
        starts: starts.map(|count| StartRate {
            count,
            per_ms: per.map_or(1_000, |p| p.as_millis() as u64),
        }),
        running,
    };
    // A limit may come before the first job: the state is created if need be.
    let backend = open(at).await?;
    let created = backend
        .put_limit(&limit)
        .await
        .with_context(|| format!("could not set the limit of {}", limit.scope))?;
    println!(
        "{} {}: {}",
        if created {
            "limited"
        } else {
            "changed the limit of"
        },
        limit.scope,
        describe(&limit)
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn delete(at: &DataArgs, target: &LimitTarget) -> Result<ExitCode> {
    let scope = scope(target);
    let backend = open_existing(at).await?;
    if backend
        .delete_limit(&scope)
        .await
        .with_context(|| format!("could not remove the limit of {scope}"))?
    {
        println!("removed the limit of {scope}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{scope} has no limit");
        Ok(ExitCode::from(1))
    }
}

pub async fn list(at: &DataArgs, json: bool) -> Result<ExitCode> {
    let backend = open_existing(at).await?;
    let limits: Vec<LimitStatus> = backend.limits().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&limits)?);
    } else if limits.is_empty() {
        println!("no limits in {}", at.describe());
    } else {
        println!(
            "{:<28} {:<36} {:>8} {:>10}",
            "SCOPE", "LIMIT", "RUNNING", "IN WINDOW"
        );
        for s in &limits {
            println!(
                "{:<28} {:<36} {:>8} {:>10}",
                s.limit.scope.to_string(),
                describe(&s.limit),
                s.running_now,
                if s.limit.starts.is_some() {
                    s.starts_in_window.to_string()
                } else {
                    "-".into()
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_with_their_unit() {
        assert_eq!(parse_per("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_per("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_per("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_per("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["15", "s", "1.5s", "15 s", "15d"] {
            let err = parse_per(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
