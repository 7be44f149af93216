//! PUTs then GETs N objects of 150 KB (a signed contract note's size) with C in flight
//! to a store, and prints objects/s and p50/p99 latencies; deletes them afterwards.
//!
//! ```text
//! cargo run --release -p tranche-storage --example bench_store -- LOCATION [N] [C]
//! ```
//! LOCATION is a directory or `s3://bucket[/prefix]` (with the `AWS_*` environment).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tranche_storage::{open_store, Storage, StoreKey};

const SIZE: usize = 150 * 1024;

async fn phase(
    name: &str,
    store: &Arc<dyn Storage>,
    keys: &Arc<Vec<StoreKey>>,
    concurrency: usize,
    payload: &Arc<Vec<u8>>,
) {
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (store, keys, payload, next) =
            (store.clone(), keys.clone(), payload.clone(), next.clone());
        let op = name.to_string();
        workers.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(key) = keys.get(i) else { break };
                let t = Instant::now();
                match op.as_str() {
                    "put" => store.put(key, payload.to_vec()).await.unwrap(),
                    _ => assert_eq!(store.get(key).await.unwrap().len(), SIZE),
                }
                latencies.push(t.elapsed());
            }
            latencies
        });
    }
    let mut latencies: Vec<Duration> = Vec::new();
    while let Some(done) = workers.join_next().await {
        latencies.extend(done.unwrap());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).max(1) - 1];
    println!(
        "{name}: {} objects in {:.2} s = {:.0} objects/s ({:.1} MB/s), p50 {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        elapsed.as_secs_f64(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        (latencies.len() * SIZE) as f64 / elapsed.as_secs_f64() / 1e6,
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(location) = args.first() else {
        eprintln!("usage: bench_store LOCATION [N=2000] [C=16]");
        std::process::exit(2);
    };
    let n: usize = args.get(1).map_or(2000, |s| s.parse().expect("N"));
    let c: usize = args.get(2).map_or(16, |s| s.parse().expect("C"));
    let store = open_store(location).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    });
    let keys: Arc<Vec<StoreKey>> = Arc::new(
        (0..n)
            .map(|i| StoreKey::partitioned("bench-pdf", "2026-11-20", &format!("C{i:07}"), "pdf"))
            .collect::<Result<_, _>>()
            .unwrap(),
    );
    let payload: Arc<Vec<u8>> = Arc::new((0..SIZE).map(|i| (i % 251) as u8).collect());
    println!("{location}: {n} objects of {SIZE} bytes, {c} in flight");
    phase("put", &store, &keys, c, &payload).await;
    phase("get", &store, &keys, c, &payload).await;
    for key in keys.iter() {
        store.delete(key).await.unwrap();
    }
}
