//! Throughput of the SMTP mailer: N contract-note mails, each with a PDF-sized
//! attachment, sent to a local sink with each pool size; one JSON line per pool size.
//!
//!   cargo run --release -p tranche-mail --example bench_mail -- \
//!       --url smtp://127.0.0.1:2525 --count 2000 --pools 1,4
//!
//! bench/mail-vs-smtplib.sh starts postfix's smtp-sink and runs this beside Python's
//! smtplib sending the same messages.

use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use tranche_mail::{conformance, Mailer, SmtpConfig, SmtpMailer};

#[derive(Parser)]
struct Args {
    /// SMTP URL of the sink (password, if any, from TRANCHE_SMTP_PASSWORD).
    #[arg(long)]
    url: String,
    #[arg(long, default_value_t = 2000)]
    count: usize,
    /// Pool sizes to measure, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pools: Vec<u32>,
    /// Attachment size in bytes (a signed contract note is ~150 KB).
    #[arg(long, default_value_t = 150_000)]
    attachment_bytes: usize,
    /// Sends in flight; beyond the pool size they wait for a connection, as a
    /// worker's mail tasks do.
    #[arg(long, default_value_t = 64)]
    in_flight: usize,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let template = conformance::sample_mail(
        "x@broker.example",
        "client@client.example",
        args.attachment_bytes,
    );
    let message_bytes = tranche_mail::build_message(&template)?.len();
    for (run, &pool) in args.pools.iter().enumerate() {
        let mailer = SmtpMailer::new(SmtpConfig {
            pool_size: pool,
            timeout: Duration::from_secs(60),
            ..SmtpConfig::from_env(&args.url)?
        })?;
        let mails: Vec<_> = (0..args.count)
            .map(|i| {
                let mut m = template.clone();
                m.message_id = format!("CN-bench-{run}-{i:07}@broker.example");
                m.to = format!("client{i}@client.example");
                m
            })
            .collect();
        let started = Instant::now();
        let mut results = futures::stream::iter(mails.iter().map(|m| mailer.send(m)))
            .buffer_unordered(args.in_flight);
        // A benchmark with failures measures nothing: stop at the first.
        while let Some(r) = results.next().await {
            r?;
        }
        let secs = started.elapsed().as_secs_f64();
        mailer.close().await;
        println!(
            "{{\"client\":\"tranche-mail\",\"pool\":{pool},\"messages\":{},\"message_bytes\":{message_bytes},\"seconds\":{secs:.3},\"msgs_per_sec\":{:.1},\"mb_per_sec\":{:.1},\"connections\":{}}}",
            args.count,
            args.count as f64 / secs,
            (args.count * message_bytes) as f64 / secs / 1e6,
            mailer.connections_opened()
        );
    }
    Ok(())
}
