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
//! A shard is one core with its own `seq`/`rec` and one target (a feed server, a
//! store) of its own: the store requires `seq` to grow, so two cores cannot share one
//! until the server has shards. A [`Connector`] maps shard `i` to its `i`th target;
//! clients follow every shard with a cursor per shard.
//!
//! # Checking
//!
//! Each client keeps a [`ShardView`] per shard: the last version of every order
//! received. As pages arrive it counts a *reordering* for each row not after
//! everything received before it (pages must ascend by `(seq, rec)` within a page
//! and from one page to the next, from the cursor they were read from), for a version
//! of an order no newer than one already held, and for a next cursor behind the page;
//! a row outside the client's filter is *misfiltered*.
//!
//! The final state is not shipped: the core publishes its seed, book and the number
//! of events each shard sent (in-process, the [`CoreReport`]; across processes, the
//! [`RunFile`]), and the checker replays the books ([`Expected::replay`]) to the same
//! counts. That yields exactly the store's final state, times aside (a
//! [`Fingerprint`] per order: its last `seq`, `rec`, filter keys and a digest of its
//! other fields). Once it is known, each client polls on until its cursor reaches its
//! filter's last position, then its view is compared: an order of its filter missing
//! or held at an older version is an *omission*; one held with other contents, or one
//! the final state does not hold for that filter, a *mismatch*.
//!
//! # Latency
//!
//! A row's delivery latency runs from its version's stamp (`updated_at`, which is
//! `created_at` for a new order: the time the core made the event) to the arrival of
//! the last byte of the page holding it, both on the wall clock (one machine). The
//! feed delivers each order's latest version, so a version superseded before a client
//! read it is never timed. [`Latency`] is an HDR histogram of microseconds whose JSON
//! form is its buckets, so reports from several processes merge exactly
//! ([`ClientsReport::merge`]).
//!
//! # Transports
//!
//! The emulators know only [`CoreLink`] (send a batch; acknowledgements in order,
//! up to a window of batches unacknowledged), [`FeedLink`] (send a poll; receive an
//! answer's header, then its rows, so the next poll can go out in between) and
//! [`Connector`] (open them per shard). [`HttpConnector`] implements them over the
//! feed's HTTP API (a window of one: parallel posts could be applied out of order;
//! each poll a task on the pooled connections, its header taken from the first
//! bytes of the JSON), [`TcpConnector`] over its binary TCP protocol (batches
//! pipelined on one connection; the HEADER frame ahead of the ORDERS).
//!
//! # In one process
//!
//! `tranche bench feed` runs [`serve_loopback`], [`run_core`] and [`run_clients`]
//! together, the clients' final state coming from the core's report, and prints a
//! [`Summary`]. Reports are `serde` types, so the same command can run cores and
//! clients as child processes (`--json`) and merge what they print.

#![deny(missing_docs)]

mod book;
mod check;
mod clients;
mod http;
mod latency;
mod link;
mod loopback;
mod paced;
mod run;
mod summary;
mod tcp;

pub use book::{order_id, Book, BookConfig, ConfigError, Kind, Step, SHARD_SHIFT};
pub use check::{digest, Expected, Fingerprint, ShardExpected, ShardView, Verdict};
pub use clients::{run_clients, ClientsError, ClientsPlan, ClientsReport};
pub use http::{HttpConnector, HttpCore, HttpFeed};
pub use latency::{Latency, LatencySummary, MAX_LATENCY_US};
pub use link::{now_ns, Connector, CoreLink, FeedLink, LinkError, PageBody, PageHead, ReadRequest};
pub use loopback::{serve_loopback, LoopbackError, LoopbackServer};
pub use paced::{run_core, CoreError, CorePlan, CoreReport};
pub use run::{RunFile, RunFileError, RunState, RUN_FILE_VERSION};
pub use summary::Summary;
pub use tcp::{TcpConnector, TcpCore, TcpFeed, DEFAULT_WINDOW};
