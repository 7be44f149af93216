//! A feed server in this process on a free loopback port (`tranche-feed-http`'s router
//! over a store): for tests and `tranche bench feed`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use std::future::IntoFuture;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tranche_feed::{Durability, FeedOptions, Store, StoreError};
use tranche_feed_http::FeedTokens;
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

/// A running feed server on `127.0.0.1`: HTTP and TCP over one store.
pub struct LoopbackServer {
    /// Its base URL (`http://127.0.0.1:PORT/`).
    pub url: Url,
    /// Its TCP protocol's address (`127.0.0.1:PORT`).
    pub tcp: SocketAddr,
    /// Its store (for figures: orders held, waiters).
    pub store: Store,
    shutdown: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
    tcp_server: JoinHandle<()>,
    writer: JoinHandle<Result<(), StoreError>>,
}

impl std::fmt::Debug for LoopbackServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackServer")
            .field("url", &self.url.as_str())
            .finish()
    }
}

/// Opens a store in `dir` (created if missing) with `durability` and serves it over
/// HTTP and over TCP, each on a free loopback port, without tokens.
pub async fn serve_loopback(
    dir: &Path,
    durability: Durability,
) -> Result<LoopbackServer, LoopbackError> {
    std::fs::create_dir_all(dir)?;
    let options = FeedOptions {
        durability,
        ..FeedOptions::default()
    };
    let owned = dir.to_owned();
    let (store, writer) = tokio::task::spawn_blocking(move || Store::open(&owned, options))
        .await
        .expect("opening a store does not panic")
        .map_err(|source| LoopbackError::Store {
            dir: dir.display().to_string(),
            source,
        })?;
    let sync_every = match durability {
        Durability::Interval(every) => Some(every),
        _ => None,
    };
    let (ingest, writer) = tranche_feed_http::spawn_writer(writer, sync_every);
    let shutdown = CancellationToken::new();
    let tcp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let tcp = tcp_listener.local_addr()?;
    let tcp_server = tokio::spawn(tranche_feed_tcp::serve(
        tcp_listener,
        store.clone(),
        ingest.clone(),
        FeedTokens::default(),
        shutdown.clone(),
    ));
    let app = tranche_feed_http::router(
        store.clone(),
        ingest,
        shutdown.clone(),
        FeedTokens::default(),
    );
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
        store,
        shutdown,
        server,
        tcp_server,
        writer,
    })
}

impl LoopbackServer {
    /// Stops serving (waiting polls answer at once), waits up to `grace` for open
    /// connections to finish, then for the writer to sync and end.
    pub async fn stop(self, grace: Duration) -> Result<(), LoopbackError> {
        self.shutdown.cancel();
        let both = async {
            let http = self.server.await.expect("the server does not panic");
            self.tcp_server
                .await
                .expect("the TCP server does not panic");
            http
        };
        match tokio::time::timeout(grace, both).await {
            Ok(served) => served?,
            // Connections still open: the writer ends once they close.
            Err(_) => return Ok(()),
        }
        self.writer
            .await
            .expect("the writer does not panic")
            .map_err(|source| LoopbackError::Store {
                dir: self.store.dir().display().to_string(),
                source,
            })
    }
}
