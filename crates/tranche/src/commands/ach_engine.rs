//! `tranche ach engine` and `tranche ach status`: the packaging engine and what it did.
//! The logic lives in `tranche-ach-pipeline`; this opens what it needs and prints.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, NaiveDate, Utc};
use tokio_util::sync::CancellationToken;
use tranche_ach_pipeline::{tasks, DayStatus, DryRun, Payments, Tick};
use tranche_ach_rules::Rules;
use tranche_core::{Engine, WorkerConfig};
use tranche_storage::Storage;

use crate::cli::{AchEngineArgs, DataArgs};
use crate::data::{open, riding_outages};

/// The rules, or every problem in them (exit 2 through the error).
pub fn load_rules(path: &Path) -> Result<Rules> {
    Rules::load(path).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The rules at `path`, if given; a file that cannot be had is said on stderr (every
/// problem of it at once) and answered as exit code 2, the command's to return.
pub fn optional_rules(path: Option<&Path>) -> std::result::Result<Option<Rules>, ExitCode> {
    match path.map(Rules::load).transpose() {
        Ok(rules) => Ok(rules),
        Err(e) => {
            eprintln!("{e}");
            Err(ExitCode::from(2))
        }
    }
}

/// The file store: `--store`, else `DATA/ach/store`.
pub fn open_files_store(at: &DataArgs, store: Option<&str>) -> Result<Arc<dyn Storage>> {
    let location = match store {
        Some(s) => s.to_string(),
        None => at.data.join("ach").join("store").display().to_string(),
    };
    tranche_storage::open_store(&location)
        .with_context(|| format!("could not open the store {location}"))
}

/// The pipeline on the engine, ledger and store the arguments name.
pub async fn open_payments(at: &DataArgs, rules: Rules, store: Option<&str>) -> Result<Payments> {
    let ledger = super::ach::open_ledger(at, false)
        .await?
        .context("no ACH ledger configured")?;
    let store = open_files_store(at, store)?;
    let client = riding_outages(open(at).await?, at);
    Ok(Payments::new(client, ledger, store, rules))
}

/// A worker on the ACH queue, running until `stop`.
pub fn spawn_worker(
    payments: &Payments,
    concurrency: usize,
    stop: &CancellationToken,
) -> Result<tokio::task::JoinHandle<Result<()>>> {
    let engine = Engine::new(payments.client().clone(), payments.registry());
    let worker = engine.worker(WorkerConfig {
        queues: vec![(tasks::QUEUE.to_string(), concurrency.max(1))],
        reserve_wait: Duration::from_millis(500),
        ..WorkerConfig::default()
    })?;
    let stop = stop.clone();
    Ok(tokio::spawn(async move {
        worker.run(stop).await.context("the ACH worker stopped")
    }))
}

pub async fn engine(at: &DataArgs, args: AchEngineArgs) -> Result<ExitCode> {
    if args.at.is_some() && !args.once && !args.dry_run {
        anyhow::bail!(
            "--at: only with --once or --dry-run (a running engine ticks at the time of day)"
        );
    }
    let rules = match optional_rules(Some(&args.rules)) {
        Ok(rules) => rules.expect("rules were asked for"),
        Err(code) => return Ok(code),
    };
    let every = rules.engine.tick;
    let payments = open_payments(at, rules, args.store.as_deref()).await?;
    if args.dry_run {
        let when = args.at.unwrap_or_else(Utc::now);
        let plan = payments.dry_run(when).await?;
        print_dry_run(&plan);
        return Ok(ExitCode::SUCCESS);
    }
    payments.apply_pacing().await?;
    let stop = tranche_core::on_terminate();
    let worker = spawn_worker(&payments, args.concurrency, &stop)?;
    eprintln!(
        "tranche ach engine: {} bank(s) from {} on {}",
        payments.rules().banks.len(),
        args.rules.display(),
        at.describe()
    );
    let code = if args.work_only {
        stop.cancelled().await;
        ExitCode::SUCCESS
    } else if args.once {
        let when = args.at.unwrap_or_else(Utc::now);
        let tick = payments.tick(when).await?;
        print_tick(&tick);
        if tick.scopes.is_empty() {
            say_nothing_due(payments.rules(), when);
        }
        let failed = wait_for(&payments, &tick, &stop).await?;
        let problems = print_dates(&payments, &tick).await?;
        if failed > 0 || problems > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    } else {
        loop {
            match payments.tick(Utc::now()).await {
                Ok(tick) => {
                    print_tick(&tick);
                    say_problems(&payments, &tick).await;
                }
                Err(e) => eprintln!(
                    "tick failed (the next one tries again): {}",
                    tranche_types::one_line(&e)
                ),
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(until_next_slot(Utc::now(), every)) => {}
            }
        }
        ExitCode::SUCCESS
    };
    stop.cancel();
    worker.await??;
    Ok(code)
}

/// How long until the next multiple of `every` since the epoch: every engine of a fleet
/// ticks at the same moments, so their ticks share a slot and enqueue each pass once.
fn until_next_slot(now: DateTime<Utc>, every: Duration) -> Duration {
    let every_ms = every.as_millis().max(1000) as i64;
    let now_ms = now.timestamp_millis();
    let next = (now_ms.div_euclid(every_ms) + 1) * every_ms;
    Duration::from_millis((next - now_ms) as u64)
}

/// Wait until every run the tick touched has finished; how many jobs failed.
async fn wait_for(payments: &Payments, tick: &Tick, stop: &CancellationToken) -> Result<u64> {
    let mut failed = 0;
    for run in tick.runs() {
        let progress = tokio::select! {
            p = payments.client().wait_finished(&run, Duration::from_millis(200), None, |_| {}) => p?,
            _ = stop.cancelled() => anyhow::bail!("stopped before {run} finished"),
        };
        if progress.failed > 0 {
            failed += progress.failed;
            for f in payments.client().run_failures(&run, None, 10).await? {
                eprintln!("{run}: job {} ({}) failed: {}", f.id, f.kind, f.error);
            }
        }
    }
    Ok(failed)
}

fn print_tick(tick: &Tick) {
    if tick.scopes.is_empty() {
        eprintln!("{}: nothing due", tick.at.format("%Y-%m-%d %H:%M:%S UTC"));
    }
    for s in &tick.scopes {
        let mut what = Vec::new();
        if s.package {
            what.push(if s.package_enqueued {
                "package"
            } else {
                "package (already enqueued)"
            });
        }
        if s.submit {
            what.push(if s.submit_enqueued {
                "submit"
            } else {
                "submit (already enqueued)"
            });
        }
        eprintln!(
            "{}: {}: {}",
            tick.at.format("%Y-%m-%d %H:%M:%S UTC"),
            s.run,
            what.join(", ")
        );
    }
    for f in &tick.released_late {
        eprintln!("{f}: its window ended before it was submitted: released, its entries wait for a later window of their kind");
    }
}

/// What `--once` looked at when nothing was due: the day and time at each bank, and
/// when its windows package and submit that day, so a run at the wrong moment (a cron
/// at the wrong hour, a forgotten --at) says what moment would have done something.
fn say_nothing_due(rules: &tranche_ach_rules::Rules, at: DateTime<Utc>) {
    for bank in &rules.banks {
        let local = at.with_timezone(&bank.time_zone);
        let day = local.date_naive();
        let windows: Vec<String> = bank
            .windows
            .iter()
            .map(|w| {
                let time =
                    |t: DateTime<Utc>| t.with_timezone(&bank.time_zone).format("%H:%M").to_string();
                format!(
                    "{} packages from {}, submits {}–{}",
                    w.name,
                    time(w.packaging_from(day, bank.time_zone)),
                    time(w.begins(day, bank.time_zone)),
                    time(w.ends(day, bank.time_zone))
                )
            })
            .collect();
        eprintln!(
            "bank {}: nothing due at {} {} ({}): {}",
            bank.profile.bank,
            local.format("%Y-%m-%d %H:%M"),
            bank.time_zone,
            local.format("%A"),
            windows.join("; ")
        );
    }
    eprintln!(
        "to act at another moment, give --at, e.g. --at {}",
        rules
            .banks
            .first()
            .and_then(|b| {
                let w = b.windows.first()?;
                let day = at.with_timezone(&b.time_zone).date_naive();
                Some(
                    w.begins(day, b.time_zone)
                        .with_timezone(&b.time_zone)
                        .to_rfc3339(),
                )
            })
            .unwrap_or_else(|| "2026-03-03T17:30:00-05:00".to_string())
    );
}

fn print_dry_run(plan: &DryRun) {
    println!(
        "dry run at {}: nothing is claimed, written or submitted",
        plan.at.format("%Y-%m-%d %H:%M:%S UTC")
    );
    if plan.scopes.is_empty() {
        println!("nothing due");
    }
    for s in &plan.scopes {
        println!("{}:", s.scope);
        if !s.to_rebuild.is_empty() {
            println!(
                "  would release (cancelled entries): {}",
                s.to_rebuild.join(", ")
            );
        }
        if s.package {
            let sizes: Vec<String> = s.files.iter().map(u64::to_string).collect();
            println!(
                "  would package {} entries in {} batches into {} files ({} entries each)",
                s.eligible,
                s.batches,
                s.files.len(),
                sizes.join(", ")
            );
        }
        if s.submit {
            if s.to_submit.is_empty() {
                println!("  would submit no packaged file");
            } else {
                println!("  would submit {}", s.to_submit.join(", "));
            }
        }
    }
}

fn tick_dates(tick: &Tick) -> Vec<NaiveDate> {
    let mut dates: Vec<NaiveDate> = tick.scopes.iter().map(|s| s.scope.date).collect();
    dates.sort_unstable();
    dates.dedup();
    dates
}

/// The status of each date the tick touched; how many problems they have.
async fn print_dates(payments: &Payments, tick: &Tick) -> Result<usize> {
    let mut problems = 0;
    for d in tick_dates(tick) {
        let s = payments.status(d).await?;
        print_status(&s);
        problems += s.banks.iter().map(|b| b.problems.len()).sum::<usize>();
    }
    Ok(problems)
}

/// A running engine says, every tick, what stops entries of the dates it ticked from
/// going out: a stuck day must not wait for someone to run `tranche ach status`.
async fn say_problems(payments: &Payments, tick: &Tick) {
    for d in tick_dates(tick) {
        match payments.status(d).await {
            Ok(s) => {
                for p in s.banks.iter().flat_map(|b| &b.problems) {
                    eprintln!("{}: {p}", tick.at.format("%Y-%m-%d %H:%M:%S UTC"));
                }
            }
            Err(e) => eprintln!(
                "reading the status of {d} failed: {}",
                tranche_types::one_line(&e)
            ),
        }
    }
}

fn money(c: u64) -> String {
    format!("{}.{:02}", c / 100, c % 100)
}

pub fn print_status(s: &DayStatus) {
    println!("submission date {}", s.date);
    for b in &s.banks {
        let e: Vec<String> = b
            .entries
            .iter()
            .map(|t| format!("{} {} ({})", t.state, t.entries, money(t.cents)))
            .collect();
        println!("  bank {}: entries {}", b.bank, e.join(", "));
        for p in &b.problems {
            println!("    problem: {p}");
        }
        for w in &b.windows {
            let files: Vec<String> = w
                .files
                .iter()
                .filter(|f| f.files > 0)
                .map(|f| format!("{} {}", f.files, f.state))
                .collect();
            let times = match (w.begins, w.ends) {
                (Some(b), Some(e)) => format!(" {}–{}", b.format("%H:%MZ"), e.format("%H:%MZ")),
                _ => String::new(),
            };
            println!(
                "    window {}{}: files {}; {} entries, debits {}, credits {}",
                w.window,
                times,
                if files.is_empty() {
                    "none".to_string()
                } else {
                    files.join(", ")
                },
                w.entries,
                money(w.debit_cents),
                money(w.credit_cents)
            );
        }
    }
}

pub async fn status(
    at: &DataArgs,
    date: Option<NaiveDate>,
    rules: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let rules = match optional_rules(rules) {
        Ok(rules) => rules,
        Err(code) => return Ok(code),
    };
    let ledger = super::ach::open_ledger(at, false)
        .await?
        .context("no ACH ledger configured")?;
    let date = date.unwrap_or_else(|| Utc::now().date_naive());
    let s = tranche_ach_pipeline::day_status(&*ledger, rules.as_ref(), date).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print_status(&s);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_shared_by_every_engine() {
        let every = Duration::from_secs(300);
        let t = DateTime::parse_from_rfc3339("2026-03-03T13:02:30Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(until_next_slot(t, every), Duration::from_secs(150));
        let on = DateTime::parse_from_rfc3339("2026-03-03T13:05:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(until_next_slot(on, every), every);
    }
}
