//! `tranche notes run` and `tranche notes demo`: a broker's night, as one command on the
//! embedded backend. Inputs are read and planned, one chain per client is enqueued (a
//! second run of the same night adds nothing and resumes), this process works the four
//! step queues until the run finishes, and `OUT/report.csv` is written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use chrono::NaiveDate;
use tranche_core::Backend;
use tranche_notes::generate::{generate as write_day, GenerateOptions, Generated};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::pipeline::{
    collect_report, plan_night, publish_broker, run_name, submit_night, work_until_finished,
    write_accounting, Attention, ChainIds, Corrections, Day, NightPlan, ReportRow, ReportSummary,
    StepCounts, LEASE,
};

use super::notes_report::place_report;
use super::notes_setup::{open_store, setup, RunOptions};
use crate::cli::{DataArgs, NotesDemo, NotesRun};
use crate::data::{open, riding_outages};
use crate::progress::RunDisplay;
use crate::stall::StallWatch;

/// Read the day's files. A broken broker file or an unreadable trades/clients file
/// stops the night (nothing could be right); a bad row only fails its client.
pub fn read_day(trades: &Path, clients: &Path, broker: &Path, date: NaiveDate) -> Result<Day> {
    let broker_file = broker;
    let broker = load_broker(broker_file)?;
    if broker.rates_on(date).is_none() {
        bail!(
            "{}: no charge-rate table applies on {date} (each [[rates]] applies from its `from` date)",
            broker_file.display()
        );
    }
    Ok(Day {
        date,
        trades_file: trades.display().to_string(),
        clients_file: clients.display().to_string(),
        broker,
        clients: read_clients(clients)?,
        trades: read_trades(trades)?,
    })
}

/// Write a synthetic day into `input` and read it back as a night's inputs.
pub fn generated_day(input: &Path, options: &GenerateOptions) -> Result<(Generated, Day)> {
    let g = write_day(input, options)
        .with_context(|| format!("cannot write the day's files to {}", input.display()))?;
    let day = read_day(
        &input.join("trades.csv"),
        &input.join("clients.csv"),
        &input.join("broker.toml"),
        options.date,
    )?;
    Ok((g, day))
}

/// The result of working a night in this process.
pub struct NightResult {
    /// Where the report was written; `None`: nowhere (said on stderr).
    pub report: Option<PathBuf>,
    pub rows: Vec<ReportRow>,
    pub chains: Vec<ChainIds>,
    /// Clients a person must look at: input changed after mailing, or while mailing.
    pub attention: Vec<Attention>,
    pub summary: ReportSummary,
    pub interrupted: bool,
    pub counts: Arc<StepCounts>,
    pub enqueue_time: Duration,
    pub work_time: Duration,
}

/// Enqueue the night (idempotently), work it to the end (or, with `work` false, watch
/// workers elsewhere do it), write the report.
pub async fn work_night(
    backend: Arc<dyn Backend>,
    day: Day,
    options: &RunOptions,
    corrections: &Corrections,
    work: bool,
    quiet: bool,
) -> Result<NightResult> {
    let date = day.date;
    let run = run_name(date);
    let trades = day.trades.count();
    let store = open_store(options)?;
    let steps = if work {
        Some(setup(options, store.clone())?)
    } else {
        None
    };
    publish_broker(&*store, date, &day.broker)
        .await
        .context("cannot publish the night's broker details to the store")?;
    let broker = day.broker.clone();
    let NightPlan {
        chains,
        unattributed,
        accounts,
    } = plan_night(day)?;
    std::fs::create_dir_all(&options.out)
        .with_context(|| format!("cannot create {}", options.out.display()))?;
    let accounting = options.out.join("accounting.csv");
    write_accounting(&accounting, &accounts)
        .with_context(|| format!("cannot write {}", accounting.display()))?;
    if !quiet {
        let how = match &steps {
            Some(s) => format!("{}; {}", s.signer_note, s.mail_to),
            None => "submitted for workers elsewhere (--no-work)".to_string(),
        };
        eprintln!("{run}: {} clients, {trades} trades; {how}", chains.len());
        for a in &accounts {
            eprintln!("  {a}");
        }
    }
    let started = Instant::now();
    let submitted = submit_night(
        &*backend,
        &broker,
        date,
        &chains,
        corrections,
        2_000,
        |_| {},
    )
    .await?;
    let enqueue_time = started.elapsed();
    drop(chains);
    if !quiet {
        if submitted.redone > 0 {
            eprintln!(
                "  {} client(s) not yet mailed had changed input: their notes are made again from it",
                submitted.redone
            );
        }
        if submitted.corrected > 0 {
            eprintln!(
                "  {} corrected note(s) decided (--issue-corrections), recorded in the run",
                submitted.corrected
            );
        }
        for a in &submitted.attention {
            eprintln!("  attention: {a}");
        }
    }
    let ids = submitted.chains;

    let counts = Arc::new(StepCounts::default());
    let work_started = Instant::now();
    // A day without trades has no run to work: its report is empty, and nothing is wrong.
    let finished = ids.is_empty() || {
        let worker = match &steps {
            Some(s) => Some(options.workers.worker(
                backend.clone(),
                s.source.clone(),
                counts.clone(),
            )?),
            None => None,
        };
        let mut display = (!quiet).then(|| RunDisplay::new(run.as_str()));
        let mut stalls = match (&display, &steps, &worker) {
            (Some(_), Some(s), Some(w)) => {
                Some(StallWatch::new(s.source.space.clone(), w.stats(), LEASE))
            }
            _ => None,
        };
        let stop = tranche_core::on_terminate();
        let c = counts.clone();
        let finished = work_until_finished(
            backend.clone(),
            worker,
            &run,
            stop,
            Duration::from_millis(200),
            |p| {
                if let Some(d) = display.as_mut() {
                    if let Some(w) = stalls.as_mut() {
                        d.stalled(w.check(p));
                    }
                    let detail = if work { c.summary() } else { String::new() };
                    d.update(p, &detail);
                }
            },
        )
        .await?;
        if let Some(d) = &display {
            d.finish();
        }
        finished.is_some()
    };
    let work_time = work_started.elapsed();
    if let Some(s) = &steps {
        s.mailer.close().await;
    }
    let rows = collect_report(&*backend, &ids, &unattributed).await?;
    let report = place_report(&options.out.join("report.csv"), &run, &rows);
    Ok(NightResult {
        report,
        summary: ReportSummary::of(&rows),
        rows,
        chains: ids,
        attention: submitted.attention,
        interrupted: !finished,
        counts,
        enqueue_time,
        work_time,
    })
}

fn print_outcome(run: &str, at: &DataArgs, out: &Path, r: &NightResult) -> ExitCode {
    let s = &r.summary;
    println!(
        "{run}: {} mailed, {} failed, {} cancelled, {} not finished  ({:.1} s)",
        s.mailed,
        s.failed,
        s.cancelled,
        s.pending,
        (r.enqueue_time + r.work_time).as_secs_f64()
    );
    match &r.report {
        Some(report) => println!("  report   {}", report.display()),
        None => println!("  report   not written: free space and run this command again"),
    }
    println!(
        "  rows     {} (every input row: in a note, not needed, or rejected)",
        out.join("accounting.csv").display()
    );
    println!("  artifacts under the store's signed-pdf/ and contract-notes-data/ prefixes");
    let data_arg = format!(" {}", at.as_args());
    if r.interrupted {
        println!("interrupted: run the same command again to resume (nothing done is redone)");
        return ExitCode::from(130);
    }
    if s.failed > 0 {
        let shown: Vec<&ReportRow> = r
            .rows
            .iter()
            .filter(|row| row.error.is_some() && row.status.as_str() == "failed")
            .take(10)
            .collect();
        println!("failed:");
        for row in shown {
            let who = if row.client_code.is_empty() {
                "(input)"
            } else {
                &row.client_code
            };
            println!("  {who:<10} {}", row.error.as_deref().unwrap_or(""));
        }
        println!("  details:  tranche{data_arg} status {run}");
        println!(
            "  bad input: fix the files and run this command again (clients whose input changed are made again)"
        );
        println!(
            "  a passing failure (mail server down): tranche{data_arg} retry {run}, then this command again"
        );
        return ExitCode::from(2);
    }
    if !r.attention.is_empty() {
        println!("needs a decision:");
        for a in &r.attention {
            println!("  {a}");
        }
        return ExitCode::from(2);
    }
    if r.report.is_none() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

pub async fn run(at: &DataArgs, args: NotesRun) -> Result<ExitCode> {
    let options = RunOptions::new(&args.out, &args.steps, Vec::new());
    let day = read_day(&args.trades, &args.clients, &args.broker_file, args.date)?;
    let backend = riding_outages(open(at).await?, at);
    let corrections = args
        .issue_corrections
        .as_deref()
        .map(Corrections::parse)
        .unwrap_or_default();
    let result = work_night(backend, day, &options, &corrections, !args.no_work, false).await?;
    Ok(print_outcome(
        run_name(args.date).as_str(),
        at,
        &options.out,
        &result,
    ))
}

/// Marks a directory as made by `notes demo`, so a second demo may clear it.
const DEMO_MARKER: &str = ".tranche-demo";

pub async fn demo(global: &DataArgs, args: NotesDemo) -> Result<ExitCode> {
    let dir = &args.dir;
    if dir.exists() {
        if dir.join(DEMO_MARKER).exists() {
            std::fs::remove_dir_all(dir)
                .with_context(|| format!("cannot clear the previous demo in {}", dir.display()))?;
        } else if std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
        {
            bail!(
                "{} exists and was not made by `tranche notes demo`: pass --dir with a new or empty directory",
                dir.display()
            );
        }
    }
    let input = dir.join("input");
    std::fs::create_dir_all(&input)
        .with_context(|| format!("cannot create {}", input.display()))?;
    std::fs::write(dir.join(DEMO_MARKER), "made by tranche notes demo\n")
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    let date = args.date;
    let (g, day) = generated_day(
        &input,
        &GenerateOptions {
            clients: args.clients,
            date,
            seed: args.seed,
            heavy_trades: None,
        },
    )?;
    eprintln!(
        "generated {} clients, {} trades for {date} in {}",
        g.clients,
        g.trades,
        input.display()
    );
    // The demo's own state directory, unless a broker was given: then the night runs
    // on it (a previous demo's night there is resumed, not sent again).
    let at = DataArgs {
        data: dir.join("state"),
        broker: global.broker.clone(),
        prefix: global.prefix.clone(),
        reconnect_for: global.reconnect_for,
    };
    let options = RunOptions::local(dir, args.smtp.clone());
    let backend = open(&at).await?;
    let run = run_name(date);
    let result = work_night(backend, day, &options, &Corrections::default(), true, false).await?;
    let code = print_outcome(run.as_str(), &at, dir, &result);
    let mailed = result.rows.iter().find(|r| r.message_id.is_some());
    println!("where to look:");
    println!("  inputs        {}", input.display());
    if args.smtp.is_none() {
        println!("  e-mails       {}", dir.join("outbox").display());
    }
    println!(
        "  signed notes  {}  (open with the client's PAN in upper case, e.g. `qpdf --password=PAN --decrypt`)",
        dir.join("store/*-signed-pdf").display()
    );
    println!(
        "  verify        pdfsig -upw PAN FILE  (the demo certificate: {})",
        dir.join("demo-signer/demo-signer.pem").display()
    );
    println!("  progress      tranche {} status {run}", at.as_args());
    if let Some(row) = mailed {
        println!(
            "  e.g. client {}: {} page(s), net {} (negative: payable by the client)",
            row.client_code,
            row.pages.unwrap_or(0),
            row.net_amount
                .map(|n| format!("{n:.2}"))
                .unwrap_or_default()
        );
    }
    Ok(code)
}
