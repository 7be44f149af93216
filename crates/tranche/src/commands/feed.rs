//! `tranche feed serve`: the order-state feed's store over HTTP (`tranche-feed-http`)
//! and, with `--tcp`, over the binary TCP protocol (`tranche-feed-tcp`) beside it.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tranche_feed::{Durability, FeedOptions, Shards};
use tranche_feed_service::{FeedService, FeedTokens};
use tranche_feed_tcp::{Replica, ReplicaConfig};

use crate::cli::FeedServeArgs;

/// `<n><unit>` (e.g. `5ms`, `24h`) as the count and the unit, the unit not checked;
/// `None` without digits first.
pub(super) fn count_and_unit(text: &str) -> Option<(u64, &str)> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    Some((digits.parse().ok()?, unit))
}

/// `every-write`, `never` or `interval:<n><us|ms|s>`.
pub fn parse_durability(text: &str) -> Result<Durability, String> {
    match text {
        "every-write" => return Ok(Durability::EveryWrite),
        "never" => return Ok(Durability::Never),
        _ => {}
    }
    let expected = || {
        format!(
            "expected every-write, never or interval:<n>us|ms|s (e.g. interval:5ms), got {text:?}"
        )
    };
    let every = text.strip_prefix("interval:").ok_or_else(expected)?;
    let (n, unit) = count_and_unit(every).ok_or_else(expected)?;
    let every = match unit {
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        _ => return Err(expected()),
    };
    if every.is_zero() {
        return Err(format!(
            "an interval must be more than 0 (every-write syncs every write), got {text:?}"
        ));
    }
    Ok(Durability::Interval(every))
}

/// The reader token a replica presents to its primary: from --replica-token-file, or
/// TRANCHE_FEED_REPLICA_TOKEN, or none (a primary without tokens).
fn replica_token(args: &FeedServeArgs) -> Result<Option<String>> {
    let token = match &args.replica_token_file {
        Some(path) => Some(tranche_types::secret::read_file(path)?.trim().to_string()),
        None => std::env::var("TRANCHE_FEED_REPLICA_TOKEN").ok(),
    };
    Ok(token.filter(|t| !t.is_empty()))
}

pub async fn serve(args: FeedServeArgs) -> Result<ExitCode> {
    let tokens = match &args.tokens {
        Some(path) => FeedTokens::from_file(path)?,
        None => FeedTokens::default(),
    };
    for addr in std::iter::once(args.listen).chain(args.tcp) {
        if tokens.is_empty() && !addr.ip().is_loopback() {
            bail!(
                "without tokens (--tokens FILE) the feed listens on loopback only (e.g. 127.0.0.1:{}), not {}",
                addr.port(),
                addr
            );
        }
    }
    let options = FeedOptions {
        durability: args.durability,
        ..FeedOptions::default()
    };
    let dir = args.dir.clone();
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let sync_every = match args.durability {
        Durability::Interval(every) => Some(every),
        _ => None,
    };
    let (feed, writer_tasks, replica) = match &args.replica_of {
        None => {
            let count = usize::from(args.shards);
            let (shards, writers) =
                tokio::task::spawn_blocking(move || Shards::open(&dir, count, options))
                    .await?
                    .with_context(|| {
                        format!("could not open the feed store in {}", args.dir.display())
                    })?;
            let (ingest, tasks) = tranche_feed_service::spawn_writers(writers, sync_every);
            (FeedService::primary(shards, ingest), tasks, None)
        }
        Some(primary) => {
            let mut config = ReplicaConfig::new(primary.clone(), replica_token(&args)?, dir);
            config.options = options;
            let replica = Replica::start(config).await.with_context(|| {
                format!(
                    "could not open the replica's store in {}",
                    args.dir.display()
                )
            })?;
            (replica.service(), Vec::new(), Some(replica))
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("could not listen on {}", args.listen))?;
    let tcp_listener = match args.tcp {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("could not listen on {addr} (--tcp)"))?,
        ),
        None => None,
    };
    let stop = tranche_core::on_terminate();
    // A replica follows its primary's eviction; a primary evicts by its own clock.
    // The task holds writer handles until `stop`, after which the writers may drain.
    if let (None, Some(retain)) = (&replica, args.retain.0) {
        tokio::spawn(super::feed_retention::run(
            feed.shards.clone(),
            feed.ingest.clone(),
            retain,
            stop.clone(),
        ));
    }
    if let Some(replica) = &replica {
        // A replica whose files failed stops following: stop serving it too, rather
        // than serve a copy that no longer follows.
        let halted = replica.halted();
        let stop = stop.clone();
        tokio::spawn(async move {
            halted.cancelled().await;
            stop.cancel();
        });
    }
    let token_count = tokens.len();
    let shards = feed.shards.clone();
    // One line for both addresses: whoever reads the first line finds them all.
    let mut tcp_address = String::new();
    let tcp_server = match tcp_listener {
        Some(tcp) => {
            tcp_address = format!(" and tcp://{}", tcp.local_addr()?);
            Some(tokio::spawn(tranche_feed_tcp::serve_feed(
                tcp,
                feed.clone(),
                tokens.clone(),
                stop.clone(),
            )))
        }
        None => None,
    };
    let role = match &args.replica_of {
        Some(primary) => format!("replica of {primary}, "),
        None => String::new(),
    };
    let limits = args.door.limits();
    println!(
        "tranche feed listening on http://{}{tcp_address} ({role}store in {}, {} shard(s), {} orders, {} token(s))",
        listener.local_addr()?,
        args.dir.display(),
        shards.len(),
        shards.orders(),
        token_count
    );
    std::io::stdout().flush()?;
    // The door member firms use: the same limits on slow and idle clients as `tranche
    // server`. Returns once every request in flight is answered.
    tranche_feed_http::serve(listener, feed, tokens, limits, stop.clone())
        .await
        .context("the feed server failed")?;
    if let Some(tcp_server) = tcp_server {
        // Returns once its connections have answered what they read and closed.
        tcp_server.await.context("the feed's TCP server failed")?;
    }
    // Every request is answered and the router dropped: the writers drain, sync, end.
    for task in writer_tasks {
        task.await?
            .context("the feed's log could not be synced on shutdown")?;
    }
    if let Some(replica) = replica {
        replica.stop().await.context("the replica's store failed")?;
    }
    // stderr: whoever read the address line may have closed stdout.
    eprintln!("tranche feed stopped (log synced)");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durabilities_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(parse_durability("every-write"), Ok(Durability::EveryWrite));
        assert_eq!(parse_durability("never"), Ok(Durability::Never));
        assert_eq!(
            parse_durability("interval:5ms"),
            Ok(Durability::Interval(Duration::from_millis(5)))
        );
        assert_eq!(
            parse_durability("interval:250us"),
            Ok(Durability::Interval(Duration::from_micros(250)))
        );
        assert_eq!(
            parse_durability("interval:1s"),
            Ok(Durability::Interval(Duration::from_secs(1)))
        );
        for bad in [
            "interval:",
            "interval:5",
            "interval:5m",
            "interval:ms",
            "always",
            "",
        ] {
            let error = parse_durability(bad).unwrap_err();
            assert!(error.contains("interval:<n>"), "{bad}: {error}");
        }
        assert!(parse_durability("interval:0ms")
            .unwrap_err()
            .contains("more than 0"));
    }
}
