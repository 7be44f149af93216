//! What an order-state feed server serves, whatever the protocol (issue 17): the
//! pieces that `tranche-feed-http` and `tranche-feed-tcp` share, so that neither
//! protocol depends on the other.
//!
//! - [`writer`]: the one group-committing writer task per shard. Every protocol hands
//!   its batches to an [`Ingest`]; the task drains whatever batches are queued into one
//!   [`Writer::apply_group`](tranche_feed::Writer::apply_group) call (group commit: one
//!   log write and one sync for all of them) and answers each batch once it is durable
//!   per the store's [`Durability`](tranche_feed::Durability).
//! - [`FeedService`]: one store and its writer, a primary's shards with a writer task
//!   each ([`spawn_writers`]), or a read replica's copy of a primary.
//! - [`FeedTokens`]: which token may write, read one firm's orders, or read all.
//! - [`metrics`]: the server's figures ([`FeedMetrics`]), which the writer task and
//!   every protocol's read path record, rendered in the Prometheus text format.
//! - The long poll's defaults and bounds, the same on every protocol:
//!   [`DEFAULT_WAIT_MS`], [`MAX_WAIT_MS`], [`DEFAULT_LIMIT`].
//!
//! The crate has no network code: the HTTP layer serves these with axum, the TCP
//! layer with its own binary protocol.

#![deny(missing_docs)]

pub mod metrics;
mod service;
mod tokens;
pub mod writer;

pub use metrics::{FeedMetrics, Protocol};
pub use service::{spawn_writers, FeedService, NoIngest, ReplicaOf};
pub use tokens::{FeedTokens, Grant};
pub use writer::{spawn_writer, spawn_writer_with, Ingest, Pending, Refused};

/// How long a long poll waits for `min_batch` orders when `wait_ms` is not given.
pub const DEFAULT_WAIT_MS: u64 = 1_000;
/// The longest a long poll waits, whatever `wait_ms` says (under common proxies'
/// idle timeouts).
pub const MAX_WAIT_MS: u64 = 30_000;
/// The longest a read lingers for `min_batch` once some orders are ready, whatever
/// `linger_us` says: what the TCP READ's 16-bit field holds. A linger is meant to be
/// well under a millisecond.
pub const MAX_LINGER_US: u64 = u16::MAX as u64;

/// A read's linger from its `linger_us`: 0 is none; longer than [`MAX_LINGER_US`] is
/// cut to it.
///
/// ```
/// use std::time::Duration;
/// use tranche_feed_service::linger_of;
/// assert_eq!(linger_of(0), None);
/// assert_eq!(linger_of(300), Some(Duration::from_micros(300)));
/// assert_eq!(linger_of(10_000_000), Some(Duration::from_micros(65_535)));
/// ```
pub fn linger_of(linger_us: u64) -> Option<std::time::Duration> {
    (linger_us > 0).then(|| std::time::Duration::from_micros(linger_us.min(MAX_LINGER_US)))
}
/// Orders per answer when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 1_000;
