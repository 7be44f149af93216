//! `tranche notes run` and `tranche notes demo`: a broker's night, as one command. The
//! day's files are read (or, for the demo, generated), the night is done as
//! `tranche_notes::night` says (a second run of the same night adds nothing and
//! resumes), and its outcome printed, with an exit code saying whether a person must act.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use tranche_notes::generate::GenerateOptions;
use tranche_notes::night::{generated_day, read_day, NightSummary};
use tranche_notes::pipeline::{run_name, Corrections, ReportRow};

use crate::cli::{DataArgs, NotesDemo, NotesRun};
use crate::data::{open, riding_outages};
use crate::night::work_night;
use crate::notes_setup::RunOptions;

fn print_outcome(run: &str, at: &DataArgs, out: &Path, r: &NightSummary) -> ExitCode {
    let s = &r.totals;
    println!(
        "{run}: {} mailed, {} failed, {} cancelled, {} not finished  ({:.1} s)",
        s.mailed,
        s.failed,
        s.cancelled,
        s.pending,
        (r.enqueue_time + r.work_time).as_secs_f64()
    );
    match r.report.path() {
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
    if r.report.path().is_none() {
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
    let result = work_night(backend, day, &options, corrections, !args.no_work).await?;
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
    super::demo_dir::prepare(dir, DEMO_MARKER, "tranche notes demo")?;
    let input = dir.join("input");
    std::fs::create_dir_all(&input)
        .with_context(|| format!("cannot create {}", input.display()))?;
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
        ledger: global.ledger.clone(),
    };
    let options = RunOptions::local(dir, args.smtp.clone());
    let backend = open(&at).await?;
    let run = run_name(date);
    let result = work_night(backend, day, &options, Corrections::default(), true).await?;
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
