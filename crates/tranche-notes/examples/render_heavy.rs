//! Measure rendering a heavy trader's note: wall time, pages and peak memory.
//! `cargo run --release -p tranche-notes --example render_heavy -- [TRADES] [OUT.pdf]`
//! (default 60,000 trades).

use std::time::Instant;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::build;
use tranche_notes::render::Renderer;

/// Peak resident memory of this process so far, from the kernel.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let trades: usize = args
        .next()
        .map(|t| t.parse())
        .transpose()?
        .unwrap_or(60_000);
    let out = args.next();
    let dir = tempfile::tempdir()?;
    let date = "2026-11-20".parse()?;
    generate(
        dir.path(),
        &GenerateOptions {
            clients: 0,
            date,
            seed: 11,
            heavy_trades: Some(trades),
        },
    )?;
    let broker = load_broker(&dir.path().join("broker.toml"))?;
    let clients = read_clients(&dir.path().join("clients.csv"))?;
    let day = read_trades(&dir.path().join("trades.csv"))?;
    let (code, ts) = day.by_client.iter().next().ok_or("no trades")?;
    let note = build(&broker, &clients.by_code[code], ts, date, 1)?;
    let before = peak_rss_mib().unwrap_or(0.0);

    // TRANCHE_TEMPLATE=FILE measures a template of one's own.
    let renderer = match std::env::var_os("TRANCHE_TEMPLATE") {
        Some(path) => Renderer::from_file(std::path::Path::new(&path))?,
        None => Renderer::new(),
    };
    let started = Instant::now();
    let pdf = renderer.render(&note)?;
    let wall = started.elapsed();

    println!(
        "{} trades, {} lines: {} pages, {:.1} MiB PDF, {:.1} s wall, peak RSS {:.0} MiB ({:.0} MiB before rendering)",
        note.annexure.len(),
        note.lines.len(),
        pdf.pages,
        pdf.bytes.len() as f64 / (1024.0 * 1024.0),
        wall.as_secs_f64(),
        peak_rss_mib().unwrap_or(0.0),
        before,
    );
    if let Some(out) = out {
        std::fs::write(&out, &pdf.bytes)?;
    }
    Ok(())
}
