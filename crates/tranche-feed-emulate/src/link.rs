//! The transport seam: how a core sends a batch and how a client reads a page. The
//! emulators know only these traits; [`crate::HttpConnector`] implements them over
//! the feed's HTTP API and [`crate::TcpConnector`] over its binary TCP protocol.

use std::future::Future;

use tranche_feed::{Cursor, Event, Filter, Order};

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
    /// lost answer), so a core stops at the first one.
    fn send(&mut self, events: &[Event]) -> impl Future<Output = Result<(), LinkError>> + Send;
    /// Waits until the oldest batch sent and not yet acknowledged is applied and
    /// durable. Cancel-safe: dropped before it resolves, nothing is lost.
    fn acked(&mut self) -> impl Future<Output = Result<(), LinkError>> + Send;
}

/// One long poll: what a client asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// Read after this position.
    pub cursor: Cursor,
    /// Which orders.
    pub filter: Filter,
    /// At most this many.
    pub limit: usize,
    /// Wait until this many are ready…
    pub min_batch: usize,
    /// …or this many milliseconds have passed.
    pub wait_ms: u64,
}

/// A page's header: known before its rows are read, so the next poll can be sent
/// while they still arrive (pipelining).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHead {
    /// Where to read on from.
    pub next: Cursor,
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

/// A client's connection to one shard. Polls are answered in the order sent, each
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

/// Opens links to the shards of a run: shard `i` is served by the `i`th target.
pub trait Connector: Send + Sync + 'static {
    /// A core's link.
    type Core: CoreLink;
    /// A client's link.
    type Feed: FeedLink;
    /// How many shards (targets) there are.
    fn shards(&self) -> usize;
    /// A core's link to shard `shard`.
    fn core(&self, shard: usize) -> impl Future<Output = Result<Self::Core, LinkError>> + Send;
    /// A client's link to shard `shard`.
    fn feed(&self, shard: usize) -> impl Future<Output = Result<Self::Feed, LinkError>> + Send;
}

/// The wall clock in nanoseconds since the epoch: what cores stamp events with and
/// clients time arrivals by (both on the machine's one clock).
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}
