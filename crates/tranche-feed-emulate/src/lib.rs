//! Emulators for the order-state feed (issue 17): trading cores that send a
//! realistic book at a paced rate, and clients that poll it, time every row's
//! delivery and check that nothing was lost or reordered. `tranche feed emulate-core`,
//! `tranche feed emulate-clients` and `tranche bench feed` are thin commands over this
//! crate.
//!
//! # The book
//!
//! [`Book`] is one shard's stream of events, deterministic from a seed: new orders
//! (firms, broker accounts, instruments, sides, prices, quantities), most of them
//! amended or partly filled one to three times and then filled, cancelled or expired
//! (a fifth left resting); a tenth immediate-or-cancel, ended by the shard's very next
//! event; bursts that crowd new orders and changes onto one hot instrument at a time.
//! Each shard numbers its own events (`seq`) and inserts (`rec`) from 1 and its own
//! orders (the shard in the id's top bits). What comes next depends on the seed and
//! the number of events so far, never on time or batching: the wall-clock stamps
//! (`created_at`, `updated_at`) are passed in.
//!
//! # Open-loop pacing
//!
//! [`run_core`] drives one book per shard. A generator wakes every `tick`, makes the
//! events due by then (`rate × elapsed − made`), stamps them with the wall clock and
//! queues them; a sender per shard sends what is queued, merging what queued up behind
//! a slow request, in `seq` order: one request at a time over HTTP (two in flight
//! could be applied out of order), a window of pipelined batches over TCP. The
//! generator never waits for the sender: a closed loop (send, wait,
//! send) slows down with the server and so measures the server's speed instead of
//! its latency at a given load, hiding the very queueing a feed must survive (the
//! "coordinated omission" of load generators). Because events are stamped when made,
//! queueing in the core counts in the clients' latency. A shard that falls behind
//! its schedule by more than `max_backlog` stops the run with [`CoreError::Behind`];
//! otherwise the report says the rate asked and the rate achieved, the lag from
//! generation to acknowledgement and the generator's own lateness, and whether it
//! kept up (95 %). It never silently delivers less than asked.
//!
//! # Shards
//!
//! A shard is one core with its own `seq` and `rec`. A [`Layout`] says where the
//! shards are: all on one feed server of that many shards (`tranche feed serve
//! --shards K`), each core writing its own (HTTP `POST /v1/feed/events?shard=k`, TCP
//! [`CoreConnection::connect_shard`](tranche_feed_tcp::CoreConnection::connect_shard));
//! or each on a server of its own (a target per shard, as before the server had
//! shards: kept because it costs only the mapping). A client reads each target
//! through one opaque [`VectorCursor`](tranche_feed::VectorCursor) (HTTP's `cursor`,
//! TCP's READV), so against one server of `K` shards it has one cursor and one link,
//! and its pages merge every shard. Unfiltered clients may read a read replica of
//! each target instead ([`HttpConnector::with_replicas`],
//! [`TcpConnector::with_replicas`]); firms read the primary (a replica serves
//! unfiltered reads only).
//!
//! # Checking
//!
//! Each client keeps a [`FeedView`] per target: the last version of every order
//! received. A page merges shards (by `updated_at`), so order is judged per shard:
//! a row's shard is its id's top bits ([`shard_of`], as the book numbers orders), and
//! a *reordering* is a row whose position is not after everything received before it
//! from that shard (within a page and from one page to the next, from the cursor
//! read from), a version of an order no newer than one already held, or a next
//! cursor behind a page's last row of a shard; a row outside the client's filter is
//! *misfiltered*.
//!
//! The final state is not shipped: the core publishes its seed, book and the number
//! of events each shard sent (in-process, the [`CoreReport`]; across processes, the
//! [`RunFile`]), and the checker replays the books ([`Expected::replay`]) to the same
//! counts. That yields exactly the store's final state, times aside (a
//! [`Fingerprint`] per order: its last `seq`, `rec`, filter keys and a digest of its
//! other fields), shard by shard: the feed's final state is their union. Once it is
//! known, each client polls on until its cursor reaches its filter's last position
//! in every shard it reads, then its view is compared with the union of those
//! shards' final states: an order of its filter missing or held at an older version
//! is an *omission*; one held with other contents, or one the final state does not
//! hold for that filter (or of a shard the target does not serve), a *mismatch*.
//! Unfiltered clients on a replica are held to the primary's final state: they wait
//! for the replica to catch up, and the replication lag counts in their latency.
//!
//! # Latency
//!
//! A row's delivery latency runs from its version's stamp (`updated_at`, which is
//! `created_at` for a new order: the time the core made the event) to the arrival of
//! the last byte of the page holding it, both on the wall clock (one machine). The
//! feed delivers each order's latest version, so a version superseded before a client
//! read it is never timed. [`Latency`] is an HDR histogram of microseconds whose JSON
//! form is its buckets, so reports from several processes merge exactly
//! ([`ClientsReport::merge`]). Reports keep it overall and by client group (the firms'
//! clients; the unfiltered ones, which on a replica add the replication lag).
//!
//! # Transports
//!
//! The emulators know only [`CoreLink`] (send a batch; acknowledgements in order,
//! up to a window of batches unacknowledged), [`FeedLink`] (send a poll by vector
//! cursor; receive an answer's header, then its rows, so the next poll can go out in
//! between) and [`Connector`] (its [`Layout`]; a core's link per shard, a client's
//! per target). [`HttpConnector`] implements them over the feed's HTTP API (a window
//! of one: parallel posts could be applied out of order; each poll a task on the
//! pooled connections, its header taken from the first bytes of the JSON),
//! [`TcpConnector`] over its binary TCP protocol (batches pipelined on one connection;
//! READV, the HEADERV frame ahead of the ORDERS).
//!
//! # Lost servers
//!
//! Told to ([`CorePlan::reconnect`], [`ClientsPlan::reconnect`]: a [`Reconnect`]), cores
//! and clients ride out a server that goes away (a restart, a crash): a failure that
//! looks like one ([`LinkError::server_lost`]) makes the link again through the
//! [`Connector`], with backoff, for up to the reconnect's `retry_for` per outage, and
//! each outage is told once per server ([`Outage`]) however many links noticed it.
//! A core resumes from the shard's highest `seq` on the server
//! ([`CoreLink::applied_seq`]). The feed has no idempotency key; its `seq` rule does
//! the work: a batch is applied whole, and only above the shard's highest `seq`, so of
//! the batches left unacknowledged those that `seq` reaches were applied (and count as
//! acknowledged) and the rest were not (and are sent again, in order). Nothing is lost
//! or applied twice, the run's counts stay exact, and the checker needs no "maybe
//! applied" slack. A client polls on from its view's cursor, the next cursor of the
//! last page it took whole, so its checks run on across the outage unchanged.
//!
//! # The bench
//!
//! `tranche bench feed` runs [`run_core`] and [`run_clients`] together against a
//! server (and a replica) it starts as child processes (`tranche feed serve`), or in
//! this process with [`serve_loopback_shards`] and [`serve_loopback_replica`]; the
//! clients' final state comes from the core's report, and it prints a [`Summary`],
//! judged against [`Criteria`]. Reports are `serde` types, so cores and clients in
//! processes of their own (`--json`) can be merged ([`ClientsReport::merge`]).

#![deny(missing_docs)]

mod book;
mod check;
mod clients;
mod http;
mod latency;
mod link;
mod loopback;
mod paced;
mod reconnect;
mod run;
mod seen;
mod summary;
mod tcp;

pub use book::{order_id, shard_of, Book, BookConfig, ConfigError, Kind, Step, SHARD_SHIFT};
pub use check::{digest, reached, Ends, Expected, FeedView, Fingerprint, ShardExpected, Verdict};
pub use clients::{run_clients, ClientsError, ClientsPlan, ClientsReport};
pub use http::{HttpConnector, HttpCore, HttpFeed};
pub use latency::{Latency, LatencySummary, MAX_LATENCY_US};
pub use link::{
    now_ns, Connector, CoreLink, FeedLink, Layout, LayoutError, LinkError, PageBody, PageHead,
    ReadRequest,
};
pub use loopback::{
    serve_loopback, serve_loopback_replica, serve_loopback_shards, LoopbackError, LoopbackServer,
};
pub use paced::{run_core, CoreError, CorePlan, CoreReport};
pub use reconnect::{Outage, Reconnect};
pub use run::{RunFile, RunFileError, RunState, RUN_FILE_VERSION};
pub use summary::{Criteria, Summary};
pub use tcp::{TcpConnector, TcpCore, TcpFeed, DEFAULT_WINDOW};
