//! A read replica: follows every shard of a primary over FOLLOW, applies what it
//! streams, and reconnects when it goes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tranche_feed::{FeedOptions, LagReport, Order, ReplicaLag, ReplicaWriter, Shards, StoreError};
use tranche_feed_service::{FeedService, ReplicaOf};

use crate::client::{handshake, next_frame, unexpected, ClientError};
use crate::frame::{self, ErrorCode, Follow, Frame};

/// How a [`Replica`] follows its primary.
#[derive(Clone, Debug)]
pub struct ReplicaConfig {
    /// The primary's TCP address (`HOST:PORT`, its `--tcp` listener).
    pub primary: String,
    /// A `reader` token of the primary (`None` when it has no tokens).
    pub token: Option<String>,
    /// The replica's own directory (shard 0 in it, the others in `shard-<k>`).
    pub dir: PathBuf,
    /// How the replica's stores are opened (its durability).
    pub options: FeedOptions,
    /// How often the primary is asked to say something when nothing changes; three
    /// of them without a word and the replica reconnects.
    pub heartbeat: Duration,
    /// The first wait before reconnecting after a failure, doubled at each failure
    /// in a row up to `max_backoff`.
    pub min_backoff: Duration,
    /// The longest wait before reconnecting.
    pub max_backoff: Duration,
}

impl ReplicaConfig {
    /// Following `primary` with `token` into `dir`, with the default durability (every
    /// write synced), a 1 s heartbeat and backoff from 50 ms to 5 s.
    pub fn new(primary: impl Into<String>, token: Option<String>, dir: PathBuf) -> ReplicaConfig {
        ReplicaConfig {
            primary: primary.into(),
            token,
            dir,
            options: FeedOptions::default(),
            heartbeat: crate::DEFAULT_HEARTBEAT,
            min_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// A running read replica: its shards (serve them with [`Replica::service`]), its lag,
/// and the tasks following the primary.
#[derive(Debug)]
pub struct Replica {
    shards: Shards,
    lag: ReplicaLag,
    primary: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), StoreError>>,
}

/// Why one connection of a follower ended.
enum Ended {
    /// The replica is stopping.
    Stopped,
    /// The primary can no longer serve the replica's position: it has started over
    /// and reconnects at once.
    Resynced,
    /// It failed; the follower waits and reconnects.
    Failed(String),
    /// The replica's files failed: the follower stops (a replica that cannot write
    /// must not go on serving as if it followed).
    Broken(StoreError),
}

impl Replica {
    /// Opens the replica's stores in `config.dir` (created if missing) and starts
    /// following the primary: shard 0 at once, and every other shard as the primary
    /// is found to have it. Returns once the stores are open, not once connected
    /// ([`Replica::lag`] says when it is).
    pub async fn start(config: ReplicaConfig) -> Result<Replica, StoreError> {
        let dir = config.dir.clone();
        let options = config.options.clone();
        let (shards, writers) =
            tokio::task::spawn_blocking(move || Shards::open_replica(&dir, options))
                .await
                .expect("opening a replica does not panic")?;
        let lag = ReplicaLag::new();
        for writer in &writers {
            lag.applied(writer.shard(), writer.position().seq);
            lag.set_connected(writer.shard(), false);
        }
        let stop = CancellationToken::new();
        let task = tokio::spawn(supervise(
            config.clone(),
            shards.clone(),
            writers,
            lag.clone(),
            stop.clone(),
        ));
        Ok(Replica {
            shards,
            lag,
            primary: config.primary,
            stop,
            task,
        })
    }

    /// The replica's shards, growing as the primary's are found.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// How far behind the primary it is now, per shard: the primary's newest `seq`
    /// against the one applied here, and for how long (see
    /// [`tranche_feed::ShardLag`]).
    pub fn lag(&self) -> LagReport {
        self.lag.report()
    }

    /// The lag's live handle (for metrics: each report is read when asked).
    pub fn lag_handle(&self) -> ReplicaLag {
        self.lag.clone()
    }

    /// What to serve over HTTP (`tranche_feed_http::feed_router`) and TCP
    /// ([`crate::serve_feed`]): unfiltered reads of its shards, no writes, its lag
    /// in `/v1/feed/status` and `/metrics`.
    pub fn service(&self) -> FeedService {
        FeedService::replica(
            self.shards.clone(),
            ReplicaOf {
                primary: self.primary.clone(),
                lag: self.lag.clone(),
            },
        )
    }

    /// Cancelled when the replica stops: by [`Replica::stop`], or by itself when a
    /// shard's files fail (then [`Replica::stop`] returns the error). A server serving
    /// the replica stops with it rather than serve a copy that no longer follows.
    pub fn halted(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops following: every follower ends its connection, syncs its shard's log and
    /// closes its store. Returns an error of the files, if one happened.
    pub async fn stop(self) -> Result<(), StoreError> {
        self.stop.cancel();
        self.task
            .await
            .expect("the replica's supervisor does not panic")
    }
}

/// Starts a follower per shard, and one more whenever the primary is found to have
/// more shards than the replica; returns once every follower has ended.
async fn supervise(
    config: ReplicaConfig,
    shards: Shards,
    writers: Vec<ReplicaWriter>,
    lag: ReplicaLag,
    stop: CancellationToken,
) -> Result<(), StoreError> {
    let (primary_shards, mut found) = watch::channel(1u16);
    let mut followers = JoinSet::new();
    for writer in writers {
        followers.spawn(follow(
            config.clone(),
            writer,
            lag.clone(),
            primary_shards.clone(),
            stop.clone(),
        ));
    }
    let mut result = Ok(());
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(ended) = followers.join_next() => {
                // A follower only ends early when its shard's files failed: the
                // whole replica stops rather than serve that shard stale.
                result = result.and(ended.expect("a follower does not panic"));
                stop.cancel();
                break;
            }
            changed = found.changed() => {
                if changed.is_err() {
                    break;
                }
                let wanted = usize::from(*found.borrow_and_update());
                while shards.len() < wanted {
                    let options = config.options.clone();
                    let grow = shards.clone();
                    let added =
                        tokio::task::spawn_blocking(move || grow.add_replica_shard(options))
                            .await
                            .expect("opening a shard does not panic");
                    match added {
                        Ok(writer) => {
                            tracing::info!(shard = writer.shard(), "feed replica: following a new shard");
                            lag.set_connected(writer.shard(), false);
                            followers.spawn(follow(
                                config.clone(),
                                writer,
                                lag.clone(),
                                primary_shards.clone(),
                                stop.clone(),
                            ));
                        }
                        Err(error) => {
                            // Its orders would go unserved: the replica stops rather
                            // than serve a part of the feed as if it were all of it.
                            tracing::error!(%error, "feed replica: could not open a new shard");
                            result = Err(error);
                            stop.cancel();
                            break;
                        }
                    }
                }
            }
        }
    }
    drop(primary_shards);
    while let Some(ended) = followers.join_next().await {
        if let Err(error) = ended.expect("a follower does not panic") {
            result = result.and(Err(error));
        }
    }
    result
}

/// Follows one shard until the replica stops: connects, FOLLOWs from the shard's
/// position, applies every REPLICATE, and after a failure reconnects with backoff.
async fn follow(
    config: ReplicaConfig,
    mut writer: ReplicaWriter,
    lag: ReplicaLag,
    primary_shards: watch::Sender<u16>,
    stop: CancellationToken,
) -> Result<(), StoreError> {
    let shard = writer.shard();
    let mut backoff = config.min_backoff;
    let mut orders = Vec::new();
    let result = loop {
        let (ended, back, heard) =
            follow_once(&config, writer, &mut orders, &lag, &primary_shards, &stop).await;
        writer = back;
        lag.set_connected(shard, false);
        match ended {
            Ended::Stopped => break Ok(()),
            Ended::Broken(error) => break Err(error),
            Ended::Resynced => {
                lag.resynced(shard);
                continue;
            }
            Ended::Failed(why) => {
                if heard {
                    backoff = config.min_backoff;
                }
                tracing::warn!(shard, %why, retry_in = ?backoff, "feed replica: lost the primary");
                tokio::select! {
                    () = stop.cancelled() => break Ok(()),
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(config.max_backoff);
            }
        }
    };
    let synced = tokio::task::spawn_blocking(move || {
        let synced = writer.sync();
        drop(writer);
        synced
    })
    .await
    .expect("closing a shard does not panic");
    result.and(synced)
}

/// One connection of a follower: how it ended, the writer handed back, and whether
/// the primary said anything.
async fn follow_once(
    config: &ReplicaConfig,
    writer: ReplicaWriter,
    orders: &mut Vec<Order>,
    lag: &ReplicaLag,
    primary_shards: &watch::Sender<u16>,
    stop: &CancellationToken,
) -> (Ended, ReplicaWriter, bool) {
    let shard = writer.shard();
    let connected = tokio::select! {
        () = stop.cancelled() => return (Ended::Stopped, writer, false),
        connected = handshake(config.primary.as_str(), config.token.as_deref(), 0) => connected,
    };
    let (mut reader, mut wr, _) = match connected {
        Ok(connected) => connected,
        Err(error) => return (Ended::Failed(chain(&error)), writer, false),
    };
    let mut buf = Vec::new();
    frame::encode_follow(
        &Follow {
            shard: shard as u16,
            max_orders: 0,
            after: writer.position(),
            known_floor: writer.known_floor(),
            heartbeat_ms: config.heartbeat.as_millis().clamp(1, u128::from(u32::MAX)) as u32,
        },
        &mut buf,
    );
    if let Err(error) = wr.write_all(&buf).await {
        return (
            Ended::Failed(format!("could not send FOLLOW: {error}")),
            writer,
            false,
        );
    }
    let silence = config.heartbeat * 3;
    let mut writer = writer;
    let mut heard = false;
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return (Ended::Stopped, writer, heard),
            next = tokio::time::timeout(silence, next_frame(&mut reader)) => next,
        };
        let at = Instant::now();
        let (number, frame) = match next {
            Ok(Ok(frame)) => frame,
            Ok(Err(error)) => return (Ended::Failed(chain(&error)), writer, heard),
            Err(_) => {
                let why = format!("nothing from the primary for {silence:?}");
                return (Ended::Failed(why), writer, heard);
            }
        };
        match frame {
            Frame::Replicate(replicate) => {
                let head = replicate.head;
                orders.clear();
                if let Err(error) = replicate.decode_into(writer.position(), orders) {
                    let why = format!("the primary's stream is malformed: {error}");
                    return (Ended::Failed(why), writer, heard);
                }
                if !heard {
                    heard = true;
                    lag.set_connected(shard, true);
                }
                lag.heard(shard, head.newest_seq, at);
                primary_shards.send_if_modified(|known| {
                    let more = head.shards > *known;
                    *known = (*known).max(head.shards);
                    more
                });
                let batch = std::mem::take(orders);
                let (back, batch, applied) = tokio::task::spawn_blocking(move || {
                    // Heartbeats included: under an interval durability an idle replica
                    // still syncs what it applied last.
                    let applied = writer
                        .apply(&batch, head.floor)
                        .and_then(|()| writer.sync_if_due().map(drop));
                    (writer, batch, applied)
                })
                .await
                .expect("applying a replica's batch does not panic");
                writer = back;
                *orders = batch;
                if let Err(error) = applied {
                    tracing::error!(shard, %error, "feed replica: could not apply the primary's orders");
                    return (Ended::Broken(error), writer, heard);
                }
                let applied = writer.position().seq;
                lag.applied(
                    shard,
                    if head.complete {
                        applied.max(head.newest_seq)
                    } else {
                        applied
                    },
                );
            }
            Frame::Error(error)
                if matches!(error.code, ErrorCode::CursorTooOld | ErrorCode::CursorAhead) =>
            {
                // Orders it holds may have ended and been evicted unseen, or the
                // primary holds less than it: only a copy from the start is right.
                tracing::warn!(shard, %error, "feed replica: starting over from the primary's beginning");
                let (back, reset) = tokio::task::spawn_blocking(move || {
                    let reset = writer.reset();
                    (writer, reset)
                })
                .await
                .expect("resetting a replica does not panic");
                return match reset {
                    Ok(()) => {
                        lag.applied(shard, 0);
                        (Ended::Resynced, back, heard)
                    }
                    Err(error) => (Ended::Broken(error), back, heard),
                };
            }
            Frame::Error(error) => {
                return (
                    Ended::Failed(format!("the primary said: {error}")),
                    writer,
                    heard,
                )
            }
            other => {
                let error = unexpected(number, &other, "a REPLICATE or an ERROR");
                return (Ended::Failed(chain(&error)), writer, heard);
            }
        }
    }
}

/// An error with its causes, for the log.
fn chain(error: &ClientError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
