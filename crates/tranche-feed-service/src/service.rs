//! What a feed server serves: its shards and their writers, or a replica's copy of a
//! primary.

use std::time::Duration;

use tokio::task::JoinHandle;
use tranche_feed::{ReplicaLag, Shards, Store, StoreError, Writer};

use crate::metrics::FeedMetrics;
use crate::writer::{spawn_writer_with, Ingest};

/// The primary a replica follows, for its status.
#[derive(Clone, Debug)]
pub struct ReplicaOf {
    /// The primary's address, as given to the replica.
    pub primary: String,
    /// How far behind it the replica is.
    pub lag: ReplicaLag,
}

/// What a feed server serves, over HTTP and TCP alike.
#[derive(Clone, Debug)]
pub struct FeedService {
    /// The shards readers read, by [`VectorCursor`](tranche_feed::VectorCursor).
    pub shards: Shards,
    /// Shard `k`'s writer task is `ingest[k]`; none on a read replica, which takes no
    /// events (they go to its primary).
    pub ingest: Vec<Ingest>,
    /// The server's figures (`GET /metrics`), which every protocol's reads record.
    pub metrics: FeedMetrics,
    /// On a read replica: its primary and lag.
    pub replica: Option<ReplicaOf>,
}

impl FeedService {
    /// One store and its writer task.
    pub fn single(store: Store, ingest: Ingest) -> FeedService {
        FeedService {
            shards: Shards::single(store),
            metrics: ingest.metrics().clone(),
            ingest: vec![ingest],
            replica: None,
        }
    }

    /// A primary's shards, shard `k` written through `ingest[k]` (one per shard:
    /// [`spawn_writers`]).
    ///
    /// # Panics
    /// If there is not one writer task per shard.
    pub fn primary(shards: Shards, ingest: Vec<Ingest>) -> FeedService {
        assert_eq!(shards.len(), ingest.len(), "one writer task per shard");
        FeedService {
            metrics: ingest[0].metrics().clone(),
            shards,
            ingest,
            replica: None,
        }
    }

    /// A read replica's shards, following `replica`: unfiltered reads only, no
    /// writes. Its lag is exported with the metrics.
    pub fn replica(shards: Shards, replica: ReplicaOf) -> FeedService {
        let metrics = FeedMetrics::new(shards.len());
        metrics.watch_replica(replica.lag.clone());
        FeedService {
            shards,
            ingest: Vec::new(),
            metrics,
            replica: Some(replica),
        }
    }

    /// The writer task of shard `shard`, or why a batch cannot go to it.
    pub fn ingest_for(&self, shard: usize) -> Result<&Ingest, NoIngest> {
        if self.replica.is_some() {
            return Err(NoIngest::Replica);
        }
        self.ingest.get(shard).ok_or(NoIngest::NoSuchShard {
            shard,
            shards: self.ingest.len(),
        })
    }
}

/// Why a server takes no batch for a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoIngest {
    /// The server is a read replica: events go to its primary.
    Replica,
    /// The server has no such shard.
    NoSuchShard {
        /// The shard asked for.
        shard: usize,
        /// How many the server has (0 to `shards - 1`).
        shards: usize,
    },
}

impl std::fmt::Display for NoIngest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoIngest::Replica => {
                write!(
                    f,
                    "this server is a read replica: post events to its primary"
                )
            }
            NoIngest::NoSuchShard { shard, shards } => write!(
                f,
                "expected a shard from 0 to {}, got {shard}",
                shards.saturating_sub(1)
            ),
        }
    }
}

/// Starts one writer task per shard ([`spawn_writer_with`]), recording into
/// one [`FeedMetrics`] with a series per shard; returns them shard 0 first, with
/// their tasks.
pub fn spawn_writers(
    writers: Vec<Writer>,
    sync_every: Option<Duration>,
) -> (Vec<Ingest>, Vec<JoinHandle<Result<(), StoreError>>>) {
    let metrics = FeedMetrics::new(writers.len());
    writers
        .into_iter()
        .enumerate()
        .map(|(shard, writer)| spawn_writer_with(writer, sync_every, metrics.clone(), shard))
        .unzip()
}
