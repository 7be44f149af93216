//! Redis time per job of each transition script, read from the server's own
//! `INFO commandstats` (EVALSHA usec), not from the client's clock: the figure that
//! bounds a fleet's throughput, since one Redis core serves every worker.
//!
//! ```text
//! cargo run --release -p tranche-redis --example script_cost -- redis://127.0.0.1:6379 [JOBS]
//! ```
//!
//! Enqueues JOBS no-op jobs (default 100,000) in batches of 1,000, reserves them in
//! batches of 1,024 and completes them in batches of 1,024, one phase after the other,
//! under the prefix `{script-cost}:` (deleted first and after).

use std::time::Instant;

use tranche_backend::Backend;
use tranche_redis::{RedisBackend, RedisOptions};
use tranche_types::{
    Completion, EnqueueItem, EnqueueRequest, JobSpec, ReserveRequest, Resolution, RunName,
};

const PREFIX: &str = "{script-cost}:";

fn evalsha_usec(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("usec=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn clear(conn: &mut redis::Connection) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{PREFIX}*"))
        .query(conn)
        .expect("KEYS");
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("DEL").arg(chunk).query(conn).expect("DEL");
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let jobs: usize = args.next().map_or(100_000, |n| n.parse().expect("JOBS"));
    let mut admin = redis::Client::open(url.as_str())
        .and_then(|c| c.get_connection())
        .expect("connecting to Redis");
    clear(&mut admin);
    let backend = RedisBackend::connect(RedisOptions {
        url: url.clone(),
        prefix: PREFIX.into(),
        ..RedisOptions::default()
    })
    .await
    .expect("connecting the backend");
    let run = RunName::new("cost").expect("run name");

    let phase = |name: &str, started: Instant, before: u64, admin: &mut redis::Connection| {
        let usec = evalsha_usec(admin) - before;
        println!(
            "{name:<10} {:>7.2} µs/job in Redis, {:>9.0} jobs/s wall",
            usec as f64 / jobs as f64,
            jobs as f64 / started.elapsed().as_secs_f64()
        );
    };

    let (t, u) = (Instant::now(), evalsha_usec(&mut admin));
    for start in (0..jobs).step_by(1000) {
        let items = (start..(start + 1000).min(jobs))
            .map(|i| EnqueueItem::Job(JobSpec::new("noop", format!("{{\"i\":{i}}}"))))
            .collect();
        backend
            .enqueue(EnqueueRequest {
                run: run.clone(),
                items,
                on_done: None,
            })
            .await
            .expect("enqueue");
    }
    phase("enqueue", t, u, &mut admin);

    let (t, u) = (Instant::now(), evalsha_usec(&mut admin));
    let mut leases = Vec::with_capacity(jobs);
    while leases.len() < jobs {
        let got = backend
            .reserve(ReserveRequest {
                queue: JobSpec::DEFAULT_QUEUE.into(),
                max: 1024,
                lease: std::time::Duration::from_secs(600),
                wait: std::time::Duration::ZERO,
            })
            .await
            .expect("reserve");
        assert!(!got.is_empty(), "ran dry after {} jobs", leases.len());
        leases.extend(got.iter().map(|j| j.lease()));
    }
    phase("reserve", t, u, &mut admin);

    let (t, u) = (Instant::now(), evalsha_usec(&mut admin));
    for chunk in leases.chunks(1024) {
        let batch = chunk
            .iter()
            .map(|&lease| Completion {
                lease,
                resolution: Resolution::Succeeded {
                    result: "null".into(),
                },
            })
            .collect();
        backend.complete(batch).await.expect("complete");
    }
    phase("complete", t, u, &mut admin);
    let used: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut admin)
        .expect("INFO memory");
    let mem = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap_or("?");
    println!("used_memory after: {mem} bytes");
    clear(&mut admin);
}
