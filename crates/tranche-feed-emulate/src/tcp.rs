//! The links over the feed's binary TCP protocol (`tranche-feed-tcp`): a connection
//! per core (its HELLO naming its shard) and per client and target.
//!
//! A core pipelines its batches: up to a window of them unacknowledged on its
//! connection, acknowledgements read by a task of their own. A client reads by vector
//! cursor (READV, every shard of the server merged) and sends its next READV as soon
//! as the HEADERV of the last answer arrives, before its ORDERS frame.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tranche_feed::{Event, Filter};
use tranche_feed_tcp::{
    BatchSender, ClientError, CoreConnection, FeedClient, VectorRead, MAX_BATCH_EVENTS,
};

use crate::link::{
    now_ns, Connector, CoreLink, FeedLink, Layout, LayoutError, LinkError, PageBody, PageHead,
    ReadRequest,
};

/// Batches a core keeps unacknowledged on its connection by default.
pub const DEFAULT_WINDOW: usize = 8;

/// Connects to the run's TCP feed servers (`HOST:PORT`): one of `K` shards (`tranche
/// feed serve --shards K --tcp`), or one per shard ([`Layout`]); and, if given, a
/// read replica of each for the unfiltered clients.
#[derive(Clone)]
pub struct TcpConnector {
    targets: Vec<String>,
    replicas: Vec<String>,
    layout: Layout,
    core_token: Option<String>,
    read_token: Option<String>,
    window: usize,
}

/// By hand: tokens are left out.
impl std::fmt::Debug for TcpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpConnector")
            .field("targets", &self.targets)
            .field("replicas", &self.replicas)
            .field("layout", &self.layout)
            .field("core_token", &self.core_token.as_ref().map(|_| "…"))
            .field("read_token", &self.read_token.as_ref().map(|_| "…"))
            .field("window", &self.window)
            .finish()
    }
}

impl TcpConnector {
    /// A connector to these addresses (`HOST:PORT`), one per shard (see
    /// [`TcpConnector::with_shards`] for one server of several).
    ///
    /// # Panics
    /// If there are no targets or more than [`tranche_feed::MAX_SHARDS`].
    pub fn new(targets: Vec<String>) -> TcpConnector {
        let layout = Layout::new(targets.len(), targets.len()).expect("1 to MAX_SHARDS targets");
        TcpConnector {
            targets,
            replicas: Vec::new(),
            layout,
            core_token: None,
            read_token: None,
            window: DEFAULT_WINDOW,
        }
    }

    /// Runs `shards` shards on the targets: all on one server of that many shards,
    /// or one per target.
    pub fn with_shards(mut self, shards: usize) -> Result<TcpConnector, LayoutError> {
        self.layout = Layout::new(shards, self.targets.len())?;
        Ok(self)
    }

    /// Sends the unfiltered clients' reads to these read replicas (`tranche feed
    /// serve --replica-of`, their `--tcp` addresses), one per target, instead of the
    /// targets.
    pub fn with_replicas(mut self, replicas: Vec<String>) -> Result<TcpConnector, LayoutError> {
        if !replicas.is_empty() && replicas.len() != self.targets.len() {
            return Err(LayoutError(format!(
                "expected a replica per target ({}), got {}",
                self.targets.len(),
                replicas.len()
            )));
        }
        self.replicas = replicas;
        Ok(self)
    }

    /// Sends `core` as the token of cores and `read` as that of clients.
    pub fn with_tokens(mut self, core: Option<String>, read: Option<String>) -> TcpConnector {
        self.core_token = core;
        self.read_token = read;
        self
    }

    /// Keeps up to `window` batches unacknowledged per core connection (at least 1).
    pub fn with_window(mut self, window: usize) -> TcpConnector {
        self.window = window.max(1);
        self
    }
}

/// A client error with its causes on one line, as a link error.
fn link_error(target: &str, error: ClientError) -> LinkError {
    match error.server_error() {
        Some(refused) => LinkError::Refused {
            target: target.to_owned(),
            status: u16::from(refused.code.code()),
            code: refused.code.to_string(),
            message: refused.to_string(),
        },
        None => {
            let mut message = error.to_string();
            let mut source = std::error::Error::source(&error);
            while let Some(cause) = source {
                let said = cause.to_string();
                if !message.contains(&said) {
                    message.push_str(": ");
                    message.push_str(&said);
                }
                source = cause.source();
            }
            LinkError::Transport {
                target: target.to_owned(),
                message,
            }
        }
    }
}

impl Connector for TcpConnector {
    type Core = TcpCore;
    type Feed = TcpFeed;

    fn layout(&self) -> Layout {
        self.layout
    }

    fn core_server(&self, shard: usize) -> String {
        let target = self.layout.core(shard).0;
        self.targets
            .get(target)
            .cloned()
            .unwrap_or_else(|| format!("target {target}"))
    }

    fn feed_server(&self, target: usize, filter: Filter) -> String {
        match (self.replicas.get(target), self.targets.get(target)) {
            (Some(replica), _) if filter == Filter::All => replica.clone(),
            (_, Some(addr)) => addr.clone(),
            _ => format!("target {target}"),
        }
    }

    async fn core(&self, shard: usize) -> Result<TcpCore, LinkError> {
        self.layout.check_shard(shard)?;
        let (target, on_target) = self.layout.core(shard);
        let target = self.targets[target].clone();
        let connection = CoreConnection::connect_shard(
            target.as_str(),
            self.core_token.as_deref(),
            on_target as u16,
        )
        .await
        .map_err(|e| link_error(&format!("{target} (shard {on_target})"), e))?;
        let max_batch = connection.welcome().max_batch_events as usize;
        let applied = connection.welcome().marks.0;
        let (sender, mut receiver) = connection.split();
        let (tx, acks) = mpsc::unbounded_channel();
        let acks_target = target.clone();
        let reader = tokio::spawn(async move {
            loop {
                let ack = receiver
                    .recv()
                    .await
                    .map(|_| ())
                    .map_err(|e| link_error(&acks_target, e));
                let failed = ack.is_err();
                if tx.send(ack).is_err() || failed {
                    return;
                }
            }
        });
        Ok(TcpCore {
            target,
            sender,
            acks,
            reader,
            window: self.window,
            max_batch: max_batch.clamp(1, MAX_BATCH_EVENTS as usize),
            applied,
        })
    }

    async fn feed(&self, target: usize, filter: Filter) -> Result<TcpFeed, LinkError> {
        self.layout.check_target(target)?;
        let target = match self.replicas.get(target) {
            Some(replica) if filter == Filter::All => replica.clone(),
            _ => self.targets[target].clone(),
        };
        let client = FeedClient::connect(target.as_str(), self.read_token.as_deref())
            .await
            .map_err(|e| link_error(&target, e))?;
        Ok(TcpFeed { target, client })
    }
}

/// A core's link: a pipelined [`CoreConnection`].
pub struct TcpCore {
    target: String,
    sender: BatchSender,
    acks: mpsc::UnboundedReceiver<Result<(), LinkError>>,
    reader: JoinHandle<()>,
    window: usize,
    max_batch: usize,
    /// The shard's highest `seq` as the WELCOME said.
    applied: u64,
}

impl Drop for TcpCore {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl CoreLink for TcpCore {
    fn window(&self) -> usize {
        self.window
    }

    fn max_batch(&self) -> usize {
        self.max_batch
    }

    fn applied_seq(&self) -> Option<u64> {
        Some(self.applied)
    }

    async fn send(&mut self, events: &[Event]) -> Result<(), LinkError> {
        self.sender
            .send(events)
            .await
            .map(|_| ())
            .map_err(|e| link_error(&self.target, e))
    }

    async fn acked(&mut self) -> Result<(), LinkError> {
        match self.acks.recv().await {
            Some(ack) => ack,
            None => Err(LinkError::Transport {
                target: self.target.clone(),
                message: "the connection's acknowledgements ended".into(),
            }),
        }
    }
}

/// A client's link: a [`FeedClient`] reading by vector cursor (READV).
pub struct TcpFeed {
    target: String,
    client: FeedClient,
}

impl FeedLink for TcpFeed {
    async fn send_read(&mut self, request: ReadRequest) -> Result<(), LinkError> {
        let mut read = VectorRead::new(&request.cursor, request.filter);
        read.limit = u32::try_from(request.limit).unwrap_or(u32::MAX);
        read.min_batch = u32::try_from(request.min_batch).unwrap_or(u32::MAX);
        read.wait_ms = u32::try_from(request.wait_ms).unwrap_or(u32::MAX);
        read.linger_us = u16::try_from(request.linger_us).unwrap_or(u16::MAX);
        self.client
            .send_read_vector(&read)
            .await
            .map(|_| ())
            .map_err(|e| link_error(&self.target, e))
    }

    async fn recv_head(&mut self) -> Result<PageHead, LinkError> {
        let header = self
            .client
            .recv_vector_header()
            .await
            .map_err(|e| link_error(&self.target, e))?;
        Ok(PageHead {
            next: header.next,
            count: header.count as usize,
        })
    }

    async fn recv_body(&mut self) -> Result<PageBody, LinkError> {
        let mut orders = Vec::new();
        self.client
            .recv_orders(&mut orders)
            .await
            .map_err(|e| link_error(&self.target, e))?;
        Ok(PageBody {
            orders,
            received_at: now_ns(),
        })
    }
}
