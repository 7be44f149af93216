//! A feed server in this process on free loopback ports (`tranche-feed-http`'s router
//! and `tranche-feed-tcp`'s listener over a feed of one or more shards, or a read
//! replica of one): for tests and `tranche bench feed --in-process`.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_feed::{Durability, FeedOptions, Shards, Store, StoreError};
use tranche_feed_service::{FeedService, FeedTokens};
use tranche_feed_tcp::{Replica, ReplicaConfig};
use url::Url;

/// Why a loopback server did not start or stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum LoopbackError {
    /// The store.
    #[error("feed store in {dir}: {source}")]
    Store {
        /// Its directory.
        dir: String,
        /// The error.
        #[source]
        source: StoreError,
    },
    /// The listener or the server.
    #[error("loopback feed server: {0}")]
    Io(#[from] std::io::Error),
}

/// A running feed server on `127.0.0.1`: HTTP and TCP over one feed (a primary's
/// shards, or a replica's copy of them).
pub struct LoopbackServer {
    /// Its base URL (`http://127.0.0.1:PORT/`).
    pub url: Url,
    /// Its TCP protocol's address (`127.0.0.1:PORT`).
    pub tcp: SocketAddr,
    /// Its shards (for figures: orders held, marks).
    pub feed: Shards,
    shutdown: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
    tcp_server: JoinHandle<()>,
    writers: Vec<JoinHandle<Result<(), StoreError>>>,
    replica: Option<Replica>,
}

impl std::fmt::Debug for LoopbackServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackServer")
            .field("url", &self.url.as_str())
            .field("tcp", &self.tcp)
            .field("shards", &self.feed.len())
            .field("replica", &self.replica.is_some())
            .finish()
    }
}

fn options(durability: Durability) -> FeedOptions {
    FeedOptions {
        durability,
        ..FeedOptions::default()
    }
}

fn store_error(dir: &Path) -> impl FnOnce(StoreError) -> LoopbackError + '_ {
    move |source| LoopbackError::Store {
        dir: dir.display().to_string(),
        source,
    }
}

/// Opens a store in `dir` (created if missing) with `durability` and serves it over
/// HTTP and over TCP, each on a free loopback port, without tokens.
pub async fn serve_loopback(
    dir: &Path,
    durability: Durability,
) -> Result<LoopbackServer, LoopbackError> {
    serve_loopback_shards(dir, 1, durability).await
}

/// [`serve_loopback`] for a feed of `shards` shards (as `tranche feed serve --shards`:
/// shard 0 in `dir`, shard `k` in `dir/shard-k`), a writer task per shard.
pub async fn serve_loopback_shards(
    dir: &Path,
    shards: usize,
    durability: Durability,
) -> Result<LoopbackServer, LoopbackError> {
    std::fs::create_dir_all(dir)?;
    let owned = dir.to_owned();
    let (feed, writers) =
        tokio::task::spawn_blocking(move || Shards::open(&owned, shards, options(durability)))
            .await
            .expect("opening a store does not panic")
            .map_err(store_error(dir))?;
    let sync_every = match durability {
        Durability::Interval(every) => Some(every),
        _ => None,
    };
    let (ingest, writers) = tranche_feed_service::spawn_writers(writers, sync_every);
    serve(FeedService::primary(feed, ingest), writers, None).await
}

/// A read replica (as `tranche feed serve --replica-of`) of the primary whose TCP
/// listener is `primary`, in `dir` with `durability`, following every shard and
/// serving unfiltered reads over HTTP and TCP on free loopback ports.
pub async fn serve_loopback_replica(
    dir: &Path,
    primary: SocketAddr,
    durability: Durability,
) -> Result<LoopbackServer, LoopbackError> {
    std::fs::create_dir_all(dir)?;
    let mut config = ReplicaConfig::new(primary.to_string(), None, dir.to_owned());
    config.options = options(durability);
    let replica = Replica::start(config).await.map_err(store_error(dir))?;
    serve(replica.service(), Vec::new(), Some(replica)).await
}

async fn serve(
    feed: FeedService,
    writers: Vec<JoinHandle<Result<(), StoreError>>>,
    replica: Option<Replica>,
) -> Result<LoopbackServer, LoopbackError> {
    let shutdown = CancellationToken::new();
    let tcp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let tcp = tcp_listener.local_addr()?;
    let tcp_server = tokio::spawn(tranche_feed_tcp::serve_feed(
        tcp_listener,
        feed.clone(),
        FeedTokens::default(),
        shutdown.clone(),
    ));
    let shards = feed.shards.clone();
    let app = tranche_feed_http::feed_router(feed, shutdown.clone(), FeedTokens::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = Url::parse(&format!("http://{}/", listener.local_addr()?)).expect("a valid URL");
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned())
            .into_future(),
    );
    Ok(LoopbackServer {
        url,
        tcp,
        feed: shards,
        shutdown,
        server,
        tcp_server,
        writers,
        replica,
    })
}

impl LoopbackServer {
    /// Shard `shard`'s store.
    ///
    /// # Panics
    /// If the feed has no such shard.
    pub fn store(&self, shard: usize) -> Store {
        self.feed
            .shard(shard)
            .unwrap_or_else(|| panic!("the feed has {} shard(s), not {shard}", self.feed.len()))
    }

    /// Whether this is a replica.
    pub fn is_replica(&self) -> bool {
        self.replica.is_some()
    }

    /// A replica's report of how far behind its primary it is (`None` on a primary).
    pub fn replica_lag(&self) -> Option<tranche_feed::LagReport> {
        self.replica.as_ref().map(Replica::lag)
    }

    /// Stops serving (waiting polls answer at once), waits up to `grace` for open
    /// connections to finish, then for the writers to sync and end (a replica: for
    /// its followers to stop).
    pub async fn stop(self, grace: Duration) -> Result<(), LoopbackError> {
        self.shutdown.cancel();
        let both = async {
            let http = self.server.await.expect("the server does not panic");
            self.tcp_server
                .await
                .expect("the TCP server does not panic");
            http
        };
        let dir = self.feed.dir().to_owned();
        let served = tokio::time::timeout(grace, both).await;
        if let Some(replica) = self.replica {
            replica.stop().await.map_err(store_error(&dir))?;
        }
        match served {
            Ok(served) => served?,
            // Connections still open: the writers end once they close.
            Err(_) => return Ok(()),
        }
        for writer in self.writers {
            writer
                .await
                .expect("the writer does not panic")
                .map_err(store_error(&dir))?;
        }
        Ok(())
    }
}
