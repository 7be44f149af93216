use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::NaiveDate;
use rust_decimal::Decimal;
use tranche_notes::generate::{generate as write_day, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::build;
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

pub fn check(
    trades_file: &Path,
    clients: &Path,
    broker: &Path,
    date: NaiveDate,
    show: usize,
) -> Result<ExitCode> {
    let broker = load_broker(broker)?;
    let clients = read_clients(clients)?;
    let trades = read_trades(trades_file)?;
    let mut problems: Vec<String> = Vec::new();
    problems.extend(clients.errors.iter().map(|e| e.to_string()));
    problems.extend(trades.errors.iter().map(|e| e.to_string()));
    let failed_clients: std::collections::BTreeSet<&str> = trades
        .errors
        .iter()
        .chain(&clients.errors)
        .filter_map(|e| e.client.as_deref())
        .collect();
    let (mut ok, mut net) = (0usize, Decimal::ZERO);
    for (i, (code, ts)) in trades.by_client.iter().enumerate() {
        if failed_clients.contains(code.as_str()) {
            continue;
        }
        let Some(client) = clients.by_code.get(code) else {
            let line = ts[0].line;
            problems.push(format!(
                "{}:{line}: field client_code: expected a client in the client master, got {code:?}",
                trades_file.display()
            ));
            continue;
        };
        match build(&broker, client, ts, date, i as u32 + 1) {
            Ok(note) => {
                ok += 1;
                net += note.net_amount;
            }
            Err(e) => problems.push(format!("client {code}: {e}")),
        }
    }
    let failing = trades.by_client.len() - ok;
    println!(
        "{} clients with {} trades on {date}: {ok} notes ready, {failing} would fail; net across notes {net} (positive: receivable by clients)",
        trades.by_client.len(),
        trades.count(),
    );
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
    Ok(if problems.is_empty() {
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
