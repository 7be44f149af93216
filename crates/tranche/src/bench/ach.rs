//! `tranche bench ach`: a realistic day of payment entries imported and packaged into
//! NACHA files, with intake and packaging rates, files, wall time and peak memory;
//! and the file writer alone, on one core, on the shape moov-io/ach's peer yardstick
//! writes (PPD credits, one batch per file), for the side-by-side in
//! bench/ach-vs-moov.sh.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::{NaiveDate, TimeZone, Utc};
use futures::StreamExt;
use serde::Serialize;
use tranche_ach::{
    validate, write_file, AccountKind, AccountNumber, BankProfile, Direction, Entry, FileOptions,
    Grouping, SecCode, TransactionCode,
};
use tranche_ach_ledger::{Ledger, SqliteLedger, State};
use tranche_ach_pipeline::Payments;
use tranche_ach_rules::generate::{write_day, DayOptions};
use tranche_ach_rules::Rules;
use tranche_core::Client;

use super::figures::peak_rss_mb;
use super::state_dir::stamp;
use crate::cli::{BenchAch, DataArgs};
use crate::commands::ach::{import_into, open_ledger};
use crate::commands::ach_engine::spawn_worker;
use crate::data::{open_redis, open_with, riding_outages};

/// The bench's submission date (a Tuesday).
fn bench_date() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 3, 3).expect("a date")
}

/// Banks named `bank1`…: each with a same-day window and a next-day one whose
/// packaging phases are both open at 08:00 New York time (and neither submits then),
/// so one tick packages the whole day.
fn bench_rules(banks: u32, cap: u32) -> String {
    let mut s = String::from("[engine]\ntick = \"5m\"\nclaim_ttl = \"10m\"\n");
    let routings = [
        "021000021",
        "026009593",
        "011000015",
        "091000019",
        "121000248",
        "071000013",
    ];
    for b in 1..=banks {
        let odfi = routings[(b as usize - 1) % routings.len()];
        s.push_str(&format!(
            r#"
[[bank]]
name = "bank{b}"
odfi = "{odfi}"
immediate_destination = "{odfi}"
immediate_destination_name = "BANK {b}"
immediate_origin = "1234567890"
immediate_origin_name = "BENCH PAYROLL"
max_entries_per_file = {cap}
pacing = "0s"
[bank.delivery]
kind = "outbox"
dir = "outbox/bank{b}"
[[bank.window]]
name = "sd1"
eligible = "same-day"
submission_begin = "08:30"
submission_end = "10:30"
lead = "2h"
[[bank.window]]
name = "nd"
eligible = "next-day"
submission_begin = "17:30"
submission_end = "20:00"
lead = "10h30m"
"#
        ));
    }
    s
}

#[derive(Serialize)]
struct Report {
    entries: u64,
    banks: u32,
    entries_per_file: u32,
    backend: String,
    ledger: String,
    worker_processes: usize,
    import_seconds: f64,
    import_entries_per_sec: f64,
    http_import_seconds: f64,
    http_import_entries_per_sec: f64,
    package_seconds: f64,
    package_entries_per_sec: f64,
    packaged_entries: u64,
    files: u64,
    /// The peak while packaging (None where the kernel cannot reset the peak).
    package_peak_rss_mb: Option<f64>,
    /// The peak of the whole bench: import, packaging and HTTP intake.
    peak_rss_mb: f64,
}

#[derive(Serialize)]
struct WriterReport {
    entries: u64,
    entries_per_file: u32,
    files: u64,
    seconds: f64,
    entries_per_sec: f64,
    /// Our validator reading the files back.
    validate_entries_per_sec: f64,
    peak_rss_mb: f64,
}

pub async fn ach(at: &DataArgs, args: BenchAch) -> Result<ExitCode> {
    if args.writer_only {
        return writer_only(&args);
    }
    let keep = args.dir.is_some();
    let temp = tempfile::Builder::new()
        .prefix("tranche-bench-ach-")
        .tempdir()?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let date = bench_date();
    let banks: Vec<String> = (1..=args.banks).map(|b| format!("bank{b}")).collect();
    eprintln!(
        "generating {} entries over {} banks in {}",
        args.entries,
        args.banks,
        dir.display()
    );
    let day = write_day(
        &dir,
        &DayOptions {
            entries: args.entries,
            date,
            seed: args.seed,
            banks,
            ..DayOptions::default()
        },
    )?;
    let rules_file = dir.join("ach.toml");
    std::fs::write(&rules_file, bench_rules(args.banks, args.cap))?;
    let rules = Rules::load(&rules_file).map_err(|e| anyhow::anyhow!("{e}"))?;
    drop(day);

    let ledger: Arc<dyn Ledger> = match &at.ledger {
        Some(_) => open_ledger(at, false).await?.context("no ledger")?,
        None => Arc::new(SqliteLedger::open(&dir.join("ledger"))?),
    };
    eprintln!("importing {}", dir.join("entries.csv").display());
    let started = Instant::now();
    let tally = import_into(&ledger, &dir.join("entries.csv"), Some(&rules), false).await?;
    let import_seconds = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        tally.rejected + tally.conflicts == 0 && tally.new == args.entries,
        "the import did not store every entry: {tally:?} (an empty --ledger is needed)"
    );
    eprintln!(
        "  {} entries in {import_seconds:.2} s ({:.0}/s)",
        tally.new,
        tally.new as f64 / import_seconds
    );

    let prefix = format!("{{tranche-bench-ach-{}}}:", stamp());
    let client: Client = match &at.broker {
        Some(url) => riding_outages(open_redis(url, &prefix).await?, at),
        None => open_with(&dir.join("state"), tranche_sqlite::SqliteOptions::default())?,
    };
    let store = tranche_storage::open_store(&dir.join("store").display().to_string())?;
    let payments = Payments::new(client, ledger.clone(), store, rules);
    let stop = tokio_util::sync::CancellationToken::new();
    let (worker, mut children) = if args.processes == 0 {
        (
            Some(spawn_worker(&payments, args.concurrency, &stop)?),
            Vec::new(),
        )
    } else {
        (
            None,
            start_processes(at, &prefix, &rules_file, &dir, &args)?,
        )
    };

    let moment = chrono_tz::America::New_York
        .from_local_datetime(&date.and_hms_opt(8, 0, 0).expect("a time"))
        .single()
        .expect("no clock change at 08:00")
        .with_timezone(&Utc);
    eprintln!("packaging");
    // The peak memory of the packaging alone (not of the import before it).
    let peak_reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let started = Instant::now();
    let tick = payments.tick(moment).await?;
    for run in tick.runs() {
        let p = payments
            .client()
            .wait_finished(&run, Duration::from_millis(20), None, |_| {})
            .await?;
        anyhow::ensure!(p.failed == 0, "{run}: {} jobs failed", p.failed);
    }
    let package_seconds = started.elapsed().as_secs_f64();
    stop.cancel();
    if let Some(w) = worker {
        w.await??;
    }
    for c in &mut children {
        let _ = c.start_kill();
        let _ = c.wait().await;
    }
    let status = payments.status(date).await?;
    let packaged: u64 = status
        .banks
        .iter()
        .flat_map(|b| b.entries.iter())
        .filter(|t| t.state == State::Packaged.as_str())
        .map(|t| t.entries)
        .sum();
    let left: u64 = status
        .banks
        .iter()
        .flat_map(|b| b.entries.iter())
        .filter(|t| t.state == State::Accepted.as_str())
        .map(|t| t.entries)
        .sum();
    anyhow::ensure!(left == 0, "{left} accepted entries were not packaged");
    let files: u64 = status
        .banks
        .iter()
        .flat_map(|b| b.windows.iter())
        .flat_map(|w| w.files.iter())
        .map(|f| f.files)
        .sum();
    eprintln!(
        "  {packaged} entries into {files} files in {package_seconds:.2} s ({:.0}/s)",
        packaged as f64 / package_seconds
    );

    let package_peak_rss_mb = peak_rss_mb();

    eprintln!("importing the same day over HTTP (POST /v1/ach/entries, 10,000 a request) into a fresh ledger");
    let bodies = write_bodies(&dir.join("entries.csv"), &dir.join("http-bodies"))?;
    let http_import_seconds = http_intake(&dir, &bodies).await?;
    std::fs::remove_dir_all(dir.join("http-bodies"))?;
    eprintln!(
        "  {} entries in {http_import_seconds:.2} s ({:.0}/s)",
        args.entries,
        args.entries as f64 / http_import_seconds
    );

    let report = Report {
        entries: args.entries,
        banks: args.banks,
        entries_per_file: args.cap,
        backend: if at.broker.is_some() {
            "redis".into()
        } else {
            "sqlite".into()
        },
        ledger: if at.ledger.is_some() {
            "postgres".into()
        } else {
            "sqlite".into()
        },
        worker_processes: args.processes,
        import_seconds,
        import_entries_per_sec: tally.new as f64 / import_seconds,
        http_import_seconds,
        http_import_entries_per_sec: args.entries as f64 / http_import_seconds,
        package_seconds,
        package_entries_per_sec: packaged as f64 / package_seconds,
        packaged_entries: packaged,
        files,
        package_peak_rss_mb: peak_reset.then_some(package_peak_rss_mb),
        peak_rss_mb: peak_rss_mb(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "ach: {} entries, {} banks, files of {}: import {:.0}/s ({:.2} s), over HTTP {:.0}/s, packaging {:.0}/s ({:.2} s, {} files, peak RSS {} MB), peak RSS {:.0} MB",
            report.entries,
            report.banks,
            report.entries_per_file,
            report.import_entries_per_sec,
            report.import_seconds,
            report.http_import_entries_per_sec,
            report.package_entries_per_sec,
            report.package_seconds,
            report.files,
            report
                .package_peak_rss_mb
                .map_or("?".to_string(), |m| format!("{m:.0}")),
            report.peak_rss_mb
        );
    }
    if keep {
        eprintln!("kept in {}", dir.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Entries per request of the HTTP intake (the API's largest batch).
const HTTP_BATCH: usize = 10_000;

/// The day's entries, read back from its CSV a request's worth at a time, as the
/// bodies of the HTTP intake: one file each in `out`, in order. Kept on disk rather
/// than in memory: a million entries' bodies are about 450 MB, which made the bench's
/// own peak RSS the day's request bodies rather than the engine's.
fn write_bodies(csv_file: &Path, out: &Path) -> Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(out)?;
    let mut reader = csv::Reader::from_path(csv_file)?;
    let mut rows = reader.deserialize::<Entry>();
    let mut bodies = Vec::new();
    loop {
        let chunk: Vec<Entry> = rows
            .by_ref()
            .take(HTTP_BATCH)
            .collect::<Result<_, _>>()
            .with_context(|| format!("reading {}", csv_file.display()))?;
        if chunk.is_empty() {
            return Ok(bodies);
        }
        let body = out.join(format!("{:05}.json", bodies.len()));
        let file = std::io::BufWriter::new(std::fs::File::create(&body)?);
        serde_json::to_writer(file, &serde_json::json!({ "entries": chunk }))?;
        bodies.push(body);
    }
}

/// Serve the HTTP API on loopback over a fresh SQLite ledger in `dir/ledger-http` and
/// post the `bodies` to it, two requests in flight (bodies made before the clock
/// starts, each read from its file as it is sent): seconds.
async fn http_intake(dir: &Path, bodies: &[std::path::PathBuf]) -> Result<f64> {
    let ledger: Arc<dyn Ledger> = Arc::new(SqliteLedger::open(&dir.join("ledger-http"))?);
    let backend = open_with(
        &dir.join("state-http"),
        tranche_sqlite::SqliteOptions::default(),
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let config = tranche_server::ServerConfig {
        listen: listener.local_addr()?,
        ledger: Some(tranche_server::LedgerHandle(ledger)),
        ..tranche_server::ServerConfig::default()
    };
    let url = format!("http://{}/v1/ach/entries", config.listen);
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(tranche_server::serve(
        listener,
        backend,
        config,
        stop.clone(),
    ));
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut pending = futures::stream::iter(bodies.iter().map(|file| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let body = tokio::fs::read(file)
                .await
                .with_context(|| format!("reading {}", file.display()))?;
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await?;
            anyhow::ensure!(
                r.status().is_success(),
                "POST /v1/ach/entries: {}",
                r.status()
            );
            r.bytes().await?;
            Ok(())
        }
    }))
    .buffer_unordered(2);
    while let Some(r) = pending.next().await {
        r?;
    }
    let took = started.elapsed().as_secs_f64();
    stop.cancel();
    server.await??;
    Ok(took)
}

/// Worker processes (this binary's `ach engine --work-only`) sharing the bench's broker,
/// ledger and store.
fn start_processes(
    at: &DataArgs,
    prefix: &str,
    rules: &Path,
    dir: &Path,
    args: &BenchAch,
) -> Result<Vec<tokio::process::Child>> {
    anyhow::ensure!(
        at.broker.is_some() && at.ledger.is_some(),
        "--processes needs --broker and --ledger (the processes share them)"
    );
    let exe = std::env::current_exe().context("could not find this program to start workers")?;
    (1..=args.processes)
        .map(|i| {
            tokio::process::Command::new(&exe)
                .args(["--broker", at.broker.as_deref().unwrap_or_default()])
                .args(["--prefix", prefix])
                .args(["--ledger", at.ledger.as_deref().unwrap_or_default()])
                .arg("--data")
                .arg(dir.join(format!("worker{i}")))
                .args(["ach", "engine", "--work-only"])
                .arg("--rules")
                .arg(rules)
                .arg("--store")
                .arg(dir.join("store"))
                .args(["--concurrency", &args.concurrency.to_string()])
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("could not start worker process {i}"))
        })
        .collect()
}

/// `--writer-only`: the writer alone in a process of its own, as the peer runs.
fn writer_only(args: &BenchAch) -> Result<ExitCode> {
    let temp = tempfile::Builder::new()
        .prefix("tranche-bench-ach-writer-")
        .tempdir()?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    eprintln!(
        "the writer alone: {} PPD credits into files of {} on one core",
        args.entries, args.cap
    );
    let (seconds, validate_seconds, files) = writer_alone(args.entries, args.cap, &dir)?;
    let report = WriterReport {
        entries: args.entries,
        entries_per_file: args.cap,
        files,
        seconds,
        entries_per_sec: args.entries as f64 / seconds,
        validate_entries_per_sec: args.entries as f64 / validate_seconds,
        peak_rss_mb: peak_rss_mb(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "ach writer alone: {} entries into {} files of {} in {:.2} s on one core: {:.0} entries/s (then validated at {:.0} entries/s), peak RSS {:.0} MB",
            report.entries,
            report.files,
            report.entries_per_file,
            report.seconds,
            report.entries_per_sec,
            report.validate_entries_per_sec,
            report.peak_rss_mb
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Write `n` PPD credits (built here, as the peer builds its own) into files of `cap`
/// written to `dir`, on this thread, then read each back with our validator: seconds
/// writing, seconds validating, files.
fn writer_alone(n: u64, cap: u32, dir: &Path) -> Result<(f64, f64, u64)> {
    std::fs::create_dir_all(dir)?;
    let profile = BankProfile {
        bank: "bench".into(),
        odfi: "121042882".parse()?,
        immediate_destination: "231380104".parse()?,
        immediate_destination_name: "FEDERAL RESERVE BANK".into(),
        immediate_origin: "121042882".into(),
        immediate_origin_name: "TRANCHE TEST ODFI".into(),
        reference_code: String::new(),
    };
    let date = bench_date();
    let created = date.and_hms_opt(8, 0, 0).expect("a time");
    let rdfi = "231380104".parse()?;
    let started = Instant::now();
    let mut files = 0;
    let mut done = 0u64;
    let mut checked = Duration::ZERO;
    // One buffer for every file, as a long-running writer keeps one.
    let mut buffer: Vec<u8> = Vec::with_capacity(cap as usize * 95 + 1_000);
    while done < n {
        let count = (n - done).min(u64::from(cap));
        let entries: Vec<Entry> = (done..done + count)
            .map(|i| Entry {
                entry_id: format!("W{i}"),
                bank: "bench".into(),
                company_name: "TRANCHE PAYROLL".into(),
                company_id: "1234567890".into(),
                sec_code: SecCode::Ppd,
                transaction_code: TransactionCode::new(AccountKind::Checking, Direction::Credit),
                rdfi_routing: rdfi,
                account_number: AccountNumber::new(format!("{:012}", files * 10_000_000 + i)),
                amount_cents: 1_000 + i % 500_000,
                individual_id: format!("EMP{i:09}"),
                individual_name: "RECEIVER NAME".into(),
                entry_description: "PAYROLL".into(),
                descriptive_date: String::new(),
                effective_date: date.succ_opt().expect("a date"),
                submission_date: date,
                same_day: false,
                addenda: None,
            })
            .collect();
        let modifier = tranche_ach_pipeline::naming::MODIFIERS[files as usize % 36] as char;
        buffer.clear();
        write_file(
            &mut buffer,
            &profile,
            &FileOptions::new(created, modifier),
            &entries,
            Grouping::Separate,
        )?;
        std::fs::write(dir.join(format!("file{files:03}.ach")), &buffer)?;
        // Our validator reads every file back, on the clock of its own: the writer
        // already validated each entry and computed every control, as moov-io/ach's
        // writer does; reading the file again is the pipeline's extra check.
        let checking = Instant::now();
        let report = validate(&buffer);
        checked += checking.elapsed();
        anyhow::ensure!(
            report.is_valid(),
            "the writer wrote an invalid file: {:?}",
            report.findings.first()
        );
        files += 1;
        done += count;
    }
    let total = started.elapsed();
    Ok((
        (total - checked).as_secs_f64(),
        checked.as_secs_f64(),
        files,
    ))
}
