use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use tranche_notes::generate::{generate as write_day, GenerateOptions};
use tranche_notes::night::read_day;
use tranche_notes::pipeline::plan_night;
use tranche_notes::render::{helper, Renderer};

pub fn generate(
    clients: usize,
    date: NaiveDate,
    out: &Path,
    seed: u64,
    heavy_trades: Option<usize>,
) -> Result<ExitCode> {
    let g = write_day(
        out,
        &GenerateOptions {
            clients,
            date,
            seed,
            heavy_trades,
        },
    )
    .with_context(|| format!("could not write the day's files to {}", out.display()))?;
    println!(
        "wrote {} clients and {} trades for {date} to {} (trades.csv, clients.csv, broker.toml)",
        g.clients,
        g.trades,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What `notes run` would do with these files, without doing it: the same reading and
/// planning, and each note built as the `process` step would.
pub fn check(
    trades_file: &Path,
    clients: &Path,
    broker_file: &Path,
    date: NaiveDate,
    show: usize,
) -> Result<ExitCode> {
    let day = read_day(trades_file, clients, broker_file, date)?;
    let broker = day.broker.clone();
    let trades = day.trades.count();
    let plan = plan_night(day)?;
    let mut problems: Vec<String> = plan.unattributed.clone();
    let (mut ok, mut net) = (0usize, Decimal::ZERO);
    for chain in &plan.chains {
        match chain.process.note(&broker) {
            Ok(note) => {
                ok += 1;
                net += note.net_amount;
            }
            Err(e) => problems.push(format!("client {}: {e}", chain.client_code)),
        }
    }
    let failing = plan.chains.len() - ok;
    println!(
        "{} clients with {trades} trades on {date}: {ok} notes ready, {failing} would fail; net across notes {net} (positive: receivable by clients)",
        plan.chains.len(),
    );
    for a in &plan.accounts {
        println!("  {a}");
    }
    for p in problems.iter().take(show) {
        println!("  {p}");
    }
    if problems.len() > show {
        println!(
            "  … {} more (--show {})",
            problems.len() - show,
            problems.len()
        );
    }
    let rejected: u64 = plan.accounts.iter().map(|a| a.rejected).sum();
    Ok(if problems.is_empty() && rejected == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Be a render helper of the worker that started this process (see
/// `tranche_notes::render::helper`) until it closes our stdin.
pub fn render_helper(template: Option<&Path>) -> Result<ExitCode> {
    let renderer = match template {
        Some(path) => Renderer::from_file(path)?,
        None => Renderer::new(),
    };
    helper::serve(&renderer, std::io::stdin().lock(), std::io::stdout().lock())
        .context("render helper: the pipe to the worker")?;
    Ok(ExitCode::SUCCESS)
}
