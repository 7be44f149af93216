//! How long a durable write takes to be acknowledged, with zeros written ahead of the
//! log ([`FeedOptions::zero_ahead`]) and without, alternated in one process on the
//! same disk: each round opens a fresh store in a temporary directory under `DIR`
//! (default `target`, the build directory), applies `BATCHES` batches of `BATCH` events one at a
//! time, paced to `RATE` batches per second, each synced before `apply` returns
//! (`Durability::EveryWrite`), and prints the percentiles of `apply`'s duration.
//!
//! `cargo run --release -p tranche-feed --example ack_latency -- [BATCHES] [BATCH] [RATE] [ROUNDS] [DIR]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use tranche_feed::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let batches: usize = args.next().map_or(Ok(5_000), |a| a.parse())?;
    let batch: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let rate: u64 = args.next().map_or(Ok(1_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let parent = args.next().unwrap_or_else(|| "target".to_string());
    let every = Duration::from_nanos(1_000_000_000 / rate.max(1));
    println!(
        "{batches} batches of {batch} events, {rate} batches/s, every write synced, in {parent}"
    );
    for round in 1..=rounds {
        for zero_ahead in [None, Some(8 << 20)] {
            let dir = tempfile::tempdir_in(&parent)?;
            let options = FeedOptions {
                durability: Durability::EveryWrite,
                snapshot_after_bytes: None,
                zero_ahead,
            };
            let (_store, mut writer) = Store::open(dir.path(), options)?;
            let mut book = common::Book::new(42);
            let work: Vec<Vec<Event>> = (0..batches).map(|_| book.batch(batch)).collect();
            let mut took = Vec::with_capacity(batches);
            let start = Instant::now();
            for (i, events) in work.iter().enumerate() {
                let due = start + every * i as u32;
                while Instant::now() < due {
                    std::thread::sleep(due - Instant::now());
                }
                let t = Instant::now();
                writer.apply(events)?;
                took.push(t.elapsed());
            }
            took.sort_unstable();
            let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
            let avg = took.iter().map(Duration::as_secs_f64).sum::<f64>() / took.len() as f64 * 1e3;
            println!(
                "round {round} {:<16} avg {avg:.3} ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
                if writer.zeroes_ahead() {
                    "zeros ahead"
                } else {
                    "appending"
                },
                at(0.5),
                at(0.9),
                at(0.99),
                at(1.0),
            );
        }
    }
    Ok(())
}
