//! A quick ingest figure, not a benchmark: applies a seeded book's events in batches
//! and prints writes per second, while one reader polls a firm's orders (`READERS`
//! 0: none), and the CPU time the writing thread ran (from
//! `/proc/thread-self/schedstat`: time stolen by the hypervisor is not in it, so it
//! compares builds on a noisy host where the writes/s do not), and the slowest batch's
//! apply: readers wait behind it.
//!
//! `cargo run --release -p tranche-feed --example throughput -- [EVENTS] [BATCH] [every|interval|never] [READERS]`

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tranche_feed::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let events: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let batch: usize = args.next().map_or(Ok(1_000), |a| a.parse())?;
    let durability = match args.next().as_deref() {
        None | Some("every") => Durability::EveryWrite,
        Some("interval") => Durability::Interval(Duration::from_millis(5)),
        Some("never") => Durability::Never,
        Some(other) => return Err(format!("expected every, interval or never, got {other}").into()),
    };
    let readers: usize = args.next().map_or(Ok(1), |a| a.parse())?;
    let mut book = common::Book::new(42);
    book.firms = 50;
    let batches: Vec<Vec<Event>> = (0..events.div_ceil(batch))
        .map(|_| book.batch(batch))
        .collect();
    let dir = tempfile::tempdir()?;
    let (store, mut writer) = Store::open(
        dir.path(),
        FeedOptions {
            durability,
            snapshot_after_bytes: None,
            ..FeedOptions::default()
        },
    )?;
    let done = Arc::new(AtomicBool::new(false));
    let reader = (readers > 0).then(|| {
        let (store, done) = (store.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let (mut cursor, mut reads, mut orders) = (Cursor::START, 0u64, 0usize);
            let mut out = Vec::with_capacity(1000);
            while !done.load(Ordering::Relaxed) {
                out.clear();
                cursor = store
                    .read_into(cursor, Filter::Firm(FirmId(7)), 1000, &mut out)
                    .expect("a cursor from the store");
                reads += 1;
                orders += out.len();
            }
            (reads, orders)
        })
    });
    let ran = || -> Result<Duration, Box<dyn std::error::Error>> {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat")?;
        let ns: u64 = stat.split_whitespace().next().unwrap_or("0").parse()?;
        Ok(Duration::from_nanos(ns))
    };
    let ran_before = ran()?;
    let start = Instant::now();
    let mut slowest = (Duration::ZERO, 0);
    for (n, batch) in batches.iter().enumerate() {
        let applying = Instant::now();
        writer.apply(batch)?;
        slowest = slowest.max((applying.elapsed(), n * batch.len()));
    }
    writer.sync()?;
    let elapsed = start.elapsed();
    let cpu = ran()? - ran_before;
    done.store(true, Ordering::Relaxed);
    let (reads, orders) = match reader {
        Some(reader) => reader.join().expect("the reader"),
        None => (0, 0),
    };
    println!(
        "{events} events in batches of {batch}, {durability:?}: {:.0} writes/s ({elapsed:.2?}, \
         writer on CPU {cpu:.2?}); {} orders held, log {} MB; a concurrent reader did {reads} \
         reads ({orders} orders of firm 7); slowest apply {:.2?}, at {} orders",
        events as f64 / elapsed.as_secs_f64(),
        store.len(),
        writer.log_bytes() >> 20,
        slowest.0,
        slowest.1,
    );
    Ok(())
}
