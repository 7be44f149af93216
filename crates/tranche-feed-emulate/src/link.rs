//! The transport seam: how a core sends a batch and how a client reads a page. The
//! emulators know only these traits; [`crate::HttpConnector`] implements them over
//! the feed's HTTP API and [`crate::TcpConnector`] over its binary TCP protocol.

use std::future::Future;
use std::ops::Range;

use tranche_feed::{Event, Filter, Order, VectorCursor, MAX_SHARDS};

/// Why a link failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The connection or request failed (refused, reset, timed out…).
    #[error("{target}: {message}")]
    Transport {
        /// Where to (a URL or address).
        target: String,
        /// What went wrong, with its causes.
        message: String,
    },
    /// The server answered with an error.
    #[error("{target}: answered {status} {code}: {message}")]
    Refused {
        /// Where from.
        target: String,
        /// The status (HTTP) or error number.
        status: u16,
        /// The server's error code (`bad_batch`, `cursor_too_old`…).
        code: String,
        /// The server's message.
        message: String,
    },
    /// The answer could not be understood.
    #[error("{target}: unreadable answer: {message}")]
    Protocol {
        /// Where from.
        target: String,
        /// What was wrong with it.
        message: String,
    },
    /// The connector has no such shard or target.
    #[error("{0}")]
    Layout(#[from] LayoutError),
}

impl LinkError {
    /// Whether the failure is what a lost server looks like, so that reconnecting may
    /// help: the connection refused, reset or timed out, an answer cut off (a
    /// [`LinkError::Transport`]), an HTTP 5xx, or the TCP server's `shutting_down` or
    /// `store_failed` (each closes the connection). Refusals of the request itself
    /// (a bad batch or cursor, a token) and unreadable answers are not.
    pub fn server_lost(&self) -> bool {
        match self {
            LinkError::Transport { .. } => true,
            LinkError::Refused { status, code, .. } => {
                (500..600).contains(status) || code == "shutting_down" || code == "store_failed"
            }
            LinkError::Protocol { .. } | LinkError::Layout(_) => false,
        }
    }
}

/// A layout of shards on targets that cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

/// Where a run's shards are: all on one feed server of that many shards (`tranche
/// feed serve --shards K`), or each on a server of its own (a target per shard).
///
/// A core of shard `k` writes to [`Layout::core`]: shard `k` of the one target, or
/// the only shard of target `k`. A client reads each target through one vector
/// cursor; the run's shards a target serves, in that cursor's order, are
/// [`Layout::served`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    shards: usize,
    targets: usize,
}

impl Layout {
    /// `shards` shards on `targets` targets: one target (a server of that many
    /// shards) or one per shard.
    pub fn new(shards: usize, targets: usize) -> Result<Layout, LayoutError> {
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(LayoutError(format!(
                "expected 1 to {MAX_SHARDS} shards, got {shards}"
            )));
        }
        if targets != 1 && targets != shards {
            return Err(LayoutError(format!(
                "{shards} shard(s) on {targets} targets: expected one target (a server of \
                 {shards} shards, `tranche feed serve --shards {shards}`) or one per shard"
            )));
        }
        Ok(Layout { shards, targets })
    }

    /// The run's shards (cores).
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// The targets (servers).
    pub fn targets(&self) -> usize {
        self.targets
    }

    /// Where shard `shard`'s core writes: the target and its shard there.
    pub fn core(&self, shard: usize) -> (usize, usize) {
        if self.targets == 1 {
            (0, shard)
        } else {
            (shard, 0)
        }
    }

    /// The run's shards target `target` serves, in the order of its cursors'
    /// positions.
    pub fn served(&self, target: usize) -> Range<usize> {
        if self.targets == 1 {
            0..self.shards
        } else {
            target..target + 1
        }
    }

    pub(crate) fn check_shard(&self, shard: usize) -> Result<(), LinkError> {
        if shard < self.shards {
            Ok(())
        } else {
            Err(LayoutError(format!(
                "expected a shard below {}, got {shard}",
                self.shards
            ))
            .into())
        }
    }

    pub(crate) fn check_target(&self, target: usize) -> Result<(), LinkError> {
        if target < self.targets {
            Ok(())
        } else {
            Err(LayoutError(format!(
                "expected a target below {}, got {target}",
                self.targets
            ))
            .into())
        }
    }
}

/// A core's connection to the shard it feeds.
///
/// Batches are acknowledged in the order sent. A link with a [`CoreLink::window`] of
/// 1 (HTTP: one request at a time, since parallel requests could arrive out of
/// order) acknowledges each batch before its `send` returns; a pipelining link (TCP)
/// lets `send` return at once and acknowledges later.
pub trait CoreLink: Send + 'static {
    /// How many batches may be unacknowledged at once.
    fn window(&self) -> usize;
    /// The most events one batch may hold.
    fn max_batch(&self) -> usize;
    /// Sends one batch. An error leaves it unknown whether the batch was applied (a
    /// lost answer): a core stops at the first one, or, told to reconnect, opens a
    /// new link and learns from its [`CoreLink::applied_seq`].
    fn send(&mut self, events: &[Event]) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Waits until the oldest batch sent and not yet acknowledged is applied and
    /// durable. Cancel-safe: dropped before it resolves, nothing is lost.
    fn acked(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// The highest `seq` the shard had applied when this link was opened (HTTP's `GET
    /// /v1/feed/status`, TCP's WELCOME): where a core that reconnected after losing
    /// its server resumes. The store applies a batch whole or not at all, and only
    /// above its highest `seq`, so this says exactly which of the batches left
    /// unacknowledged by the lost link were applied. `None` (the default): the link
    /// cannot say, and a core that loses its server stops.
    fn applied_seq(&self) -> Option<u64> {
        None
    }
}

/// One long poll: what a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// Read after this position: one per shard of the target.
    pub cursor: VectorCursor,
    /// Which orders.
    pub filter: Filter,
    /// At most this many.
    pub limit: usize,
    /// Wait until this many are ready…
    pub min_batch: usize,
    /// …or this many milliseconds have passed…
    pub wait_ms: u64,
    /// …or, once some are ready, this many microseconds (0: no linger).
    pub linger_us: u64,
}

/// A page's header: known before its rows are read, so the next poll can be sent
/// while they still arrive (pipelining).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHead {
    /// Where to read on from.
    pub next: VectorCursor,
    /// How many rows follow.
    pub count: usize,
}

/// A page's rows, as received.
#[derive(Clone, Debug, Default)]
pub struct PageBody {
    /// The rows in the order received.
    pub orders: Vec<Order>,
    /// When the last byte of the page arrived (ns since the epoch, wall clock).
    pub received_at: u64,
}

/// A client's connection to one target: every shard it serves, read through one
/// vector cursor (merged by the server). Polls are answered in the order sent, each
/// answer a header ([`FeedLink::recv_head`]) and then its rows
/// ([`FeedLink::recv_body`]); a client may send its next poll between the two.
pub trait FeedLink: Send + 'static {
    /// Sends one long poll without waiting for its answer.
    fn send_read(
        &mut self,
        request: ReadRequest,
    ) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// The header of the oldest answer not yet received.
    fn recv_head(&mut self) -> impl Future<Output = Result<PageHead, LinkError>> + Send;
    /// The rows of the answer whose header was received last.
    fn recv_body(&mut self) -> impl Future<Output = Result<PageBody, LinkError>> + Send;
}

/// Opens links to the shards of a run, laid out on targets as its [`Layout`] says.
/// Cloned into each shard's sender and each client, which reconnect through it after
/// losing their server.
pub trait Connector: Clone + Send + Sync + 'static {
    /// A core's link.
    type Core: CoreLink;
    /// A client's link.
    type Feed: FeedLink;
    /// Where the shards are.
    fn layout(&self) -> Layout;
    /// How many shards (cores) there are.
    fn shards(&self) -> usize {
        self.layout().shards()
    }
    /// The server a core of shard `shard` writes to, for messages (its base URL or
    /// address; by default `target N`). Outages are told once per server.
    fn core_server(&self, shard: usize) -> String {
        format!("target {}", self.layout().core(shard).0)
    }
    /// The server a client of `filter` reads target `target` from, for messages (the
    /// target's replica for an unfiltered client, if it has one).
    fn feed_server(&self, target: usize, filter: Filter) -> String {
        let _ = filter;
        format!("target {target}")
    }
    /// A core's link to the run's shard `shard` (where [`Layout::core`] says).
    fn core(&self, shard: usize) -> impl Future<Output = Result<Self::Core, LinkError>> + Send;
    /// A link for a client of `filter` to target `target` ([`Layout::served`] says
    /// which shards it reads): to the target's replica, if it has one and `filter`
    /// reads every order (a replica serves unfiltered reads only).
    fn feed(
        &self,
        target: usize,
        filter: Filter,
    ) -> impl Future<Output = Result<Self::Feed, LinkError>> + Send;
}

/// The wall clock in nanoseconds since the epoch: what cores stamp events with and
/// clients time arrivals by (both on the machine's one clock).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}
