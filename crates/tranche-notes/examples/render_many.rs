//! Render the short notes of a synthetic day in-process, on T threads sharing one
//! Renderer, and print notes/s: how render throughput scales with threads in one
//! process (Typst's memoisation cache is global to it).
//! `cargo run --release -p tranche-notes --example render_many -- [THREADS] [CLIENTS] [MOST_TRADES]`
//! (notes of more than MOST_TRADES trades, default 40, are left out; TEMPLATE=FILE.typ
//! renders with that template instead of the built-in one, to time a change to it)

use std::sync::Arc;
use std::time::Instant;

use tranche_notes::generate::{generate, GenerateOptions};
use tranche_notes::input::{load_broker, read_clients, read_trades};
use tranche_notes::note::build;
use tranche_notes::render::{evict_cache, Renderer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(1);
    let clients: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(200);
    let most_trades: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(40);
    let dir = tempfile::tempdir()?;
    let date = "2026-11-20".parse()?;
    let o = GenerateOptions {
        clients,
        date,
        seed: 1,
        heavy_trades: None,
    };
    generate(dir.path(), &o)?;
    let broker = load_broker(&dir.path().join("broker.toml"))?;
    let cl = read_clients(&dir.path().join("clients.csv"))?;
    let trades = read_trades(&dir.path().join("trades.csv"))?;
    let notes: Vec<_> = trades
        .by_client
        .iter()
        .filter(|(_, t)| t.len() <= most_trades)
        .enumerate()
        .map(|(i, (c, t))| build(&broker, &cl.by_code[c], t, date, i as u32 + 1))
        .collect::<Result<_, _>>()?;
    let notes = Arc::new(notes);
    let renderer = Arc::new(match std::env::var_os("TEMPLATE") {
        Some(p) => Renderer::from_file(std::path::Path::new(&p))?,
        None => Renderer::new(),
    });
    renderer.render(&notes[0])?; // warm: fonts parsed, template evaluated once
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|k| {
            let (notes, renderer) = (notes.clone(), renderer.clone());
            std::thread::spawn(move || {
                for note in notes.iter().skip(k).step_by(threads) {
                    renderer.render(note).expect("render");
                    evict_cache();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a render thread panicked")?;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{threads} thread(s): {} notes in {secs:.2} s = {:.1} notes/s ({:.1} ms per note per thread)",
        notes.len(),
        notes.len() as f64 / secs,
        secs * 1000.0 * threads as f64 / notes.len() as f64
    );
    Ok(())
}
