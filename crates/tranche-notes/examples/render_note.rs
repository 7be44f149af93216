//! Render one client's note of a synthetic day to a PDF file, to look at the layout:
//! `cargo run -p tranche-notes --example render_note -- OUT.pdf [TRADES]`.

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::build;
use tranche_notes::render::Renderer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().ok_or("usage: render_note OUT.pdf [TRADES]")?;
    let heavy: Option<usize> = args.next().map(|t| t.parse()).transpose()?;
    let dir = tempfile::tempdir()?;
    let date = "2026-11-20".parse()?;
    generate(
        dir.path(),
        &GenerateOptions {
            clients: if heavy.is_some() { 0 } else { 1 },
            date,
            seed: 11,
            heavy_trades: heavy,
        },
    )?;
    let broker = load_broker(&dir.path().join("broker.toml"))?;
    let clients = read_clients(&dir.path().join("clients.csv"))?;
    let trades = read_trades(&dir.path().join("trades.csv"))?;
    let (code, ts) = trades.by_client.iter().next().ok_or("no trades")?;
    let note = build(&broker, &clients.by_code[code], ts, date, 1)?;
    let started = std::time::Instant::now();
    let pdf = Renderer::new().render(&note)?;
    std::fs::write(&out, &pdf.bytes)?;
    eprintln!(
        "{out}: {} pages, {} bytes, {:?}",
        pdf.pages,
        pdf.bytes.len(),
        started.elapsed()
    );
    Ok(())
}
