//! The order-state feed's fast path (issue 17): a binary, length-prefixed protocol on
//! TCP for trading cores streaming events in and clients long-polling orders out.
//! It serves the same [`tranche_feed::Store`] as `tranche-feed-http`, through the same
//! group-committing writer task ([`tranche_feed_service::spawn_writer`]; the two
//! protocols share `tranche-feed-service` and neither depends on the other), with the
//! same tokens and the same answers: HTTP is for convenience, this is for throughput and
//! latency.
//!
//! - [`serve`]: the server (tokio), one task per connection.
//! - [`CoreConnection`]: a trading core's client, sending batches pipelined and
//!   receiving their acknowledgements in order.
//! - [`FeedClient`]: a reader's client, sending read requests (pipelined, header
//!   first) and receiving orders.
//! - [`frame`]: the frames' encoders and decoders, for other clients and tests.
//!
//! # A connection
//!
//! The client sends HELLO with its token; the server answers WELCOME (what the token
//! may do, and for a core the store's marks: the highest `seq` and `rec` applied, to
//! resume after a reconnect) or ERROR and closes. Then:
//!
//! - **A core** sends BATCHes numbered 1, 2, 3… without waiting. Each is decoded
//!   whole before anything of it is used, then queued for the one writer task, which
//!   group-commits whatever batches every connection (and HTTP) has queued with one
//!   log write and one sync. Each batch is applied all-or-nothing and answered, in the
//!   order sent, by an ACK once it is durable per the store's
//!   [`Durability`](tranche_feed::Durability) — or by an ERROR `bad_batch` naming the
//!   event's index and field (nothing of it applied; the connection goes on, and the
//!   batches after it are judged on their own, as separate HTTP posts are).
//! - **A client** sends READs: cursor, filter, `limit`, `min_batch`, `wait_ms`, the
//!   parameters of `GET /v1/feed/orders` with the same defaults and caps. If fewer
//!   than `min_batch` orders of the filter are ready, the server waits on that filter
//!   key's own wake-up ([`tranche_feed::Store::wait_for`]) until enough arrive or
//!   `wait_ms` passes — one answer per request, never a stream of empty ones. The
//!   answer is a HEADER (next cursor, count, oldest `created_at`, the server's wait and
//!   read times) and then, always, an ORDERS frame with that many orders: a client can
//!   send its next request as soon as it has the header. Requests are answered in
//!   order, each starting its wait once the one before is answered. A cursor the
//!   store cannot serve is answered by an ERROR instead (`bad_cursor` saying why: HTTP's
//!   400; `cursor_too_old` with the oldest cursor served: HTTP's 410; `cursor_ahead`),
//!   and the connection goes on.
//!
//! # Shards
//!
//! A server of several shards ([`serve_feed`] over a
//! [`FeedService`](tranche_feed_service::FeedService) of
//! [`Shards`](tranche_feed::Shards)) keeps one store and writer task per trading
//! core. A core names its shard in its HELLO ([`CoreConnection::connect_shard`]; 0 by
//! default) and its BATCHes go to that shard's writer; its WELCOME carries that
//! shard's marks. Readers read every shard at once by
//! [`VectorCursor`](tranche_feed::VectorCursor): a READV is a READ whose cursor has a
//! length of its own, answered by a HEADERV whose next cursor does, then the ORDERS
//! (merged across the shards, see [`Shards`](tranche_feed::Shards)). A READ's 21-byte
//! cursor is a one-shard cursor: READ is served by a one-shard feed (exactly as
//! before shards) and refused (`malformed`, naming READV) by a feed of several, whose
//! next cursor it could not carry. A READV works on any feed, so a client written
//! for it need not know how many shards there are.
//!
//! # Replication
//!
//! A read replica ([`Replica`]; `tranche feed serve --replica-of`) connects with a
//! `reader` token and sends one FOLLOW per primary shard, on a connection of its own:
//! the shard, the position after which it wants orders (after the newest `seq` it has
//! applied, which survives its restarts) and the primary's eviction floor as it knows
//! it. The connection is then the primary's: it streams REPLICATEs, each the orders
//! that changed after the position, in `(seq, rec)` order, at their latest versions
//! (read from the primary's store as an unfiltered reader reads, woken by the shard's
//! writes, never polling), with the shard's newest `seq` and floor when they were
//! read and the number of shards the primary has. When nothing changes it sends an
//! empty REPLICATE every heartbeat (the FOLLOW's, 1 s by default): the replica knows
//! the primary's marks and that it is alive, and reconnects after three heartbeats of
//! silence. Nothing is acknowledged: the replica's durable position is where it
//! resumes, and TCP's flow control holds the stream back when the replica applies
//! slowly. The replica applies each REPLICATE as one log record (its store's own
//! durability), adopts the floor, and when the primary has more shards than it,
//! opens and follows them. If its position cannot be served (the primary evicted
//! past what it knows: orders it holds may have ended unseen; or the primary holds
//! less than it) the primary answers `cursor_too_old` or `cursor_ahead`, and the
//! replica starts over from the primary's beginning. A primary that restarts closes
//! the stream with `shutting_down`; the replica reconnects with backoff (doubling
//! from 50 ms to 5 s, reset once the primary answers) and resumes.
//!
//! Tokens are the feed's [`FeedTokens`](tranche_feed_service::FeedTokens), as on HTTP: a
//! `core` token may only send batches, a `firm=N` token may only read firm N's orders
//! (a read of every order is served as firm N's; any other filter is refused), a
//! `reader` token may read everything. With no tokens configured every connection may
//! do everything, so such a server belongs on loopback only. A refused permission, a
//! bad token and a malformed frame are ERRORs that close the connection: the
//! server answers everything it read before, sends the ERROR naming the frame (by its
//! number on the connection) and the field, and closes, and nothing of the offending
//! frame was applied.
//!
//! # Frames
//!
//! Every frame is a little-endian `u32` length `L` (1 to [`MAX_FRAME_LEN`]; at most
//! [`MAX_HELLO_LEN`] before the HELLO, and from a connection whose token may not
//! write), then `L` bytes: a kind byte and the body.
//! Frames are numbered from 1 in each direction of a connection (the HELLO is the
//! client's frame 1). All integers are little-endian; "reserved" bytes are 0 and
//! refused otherwise (so that a later version can give them a meaning). Offsets are
//! within the body.
//!
//! | kind | from | body |
//! |---|---|---|
//! | `0x01` HELLO | client, first | `0` magic `"TRFD"`, `4` version u16 = 1, `6` shard u16 (a core's; 0 for others), `8` token length u16 (≤ 1,024), `10` token |
//! | `0x02` BATCH | core | `0` batch u64 (greater than the last on the connection), `8` count u32 (≤ [`MAX_BATCH_EVENTS`]), `12` reserved u32, `16` count × 64-byte events |
//! | `0x03` READ | client | `0` request u64 (greater than the last), `8` cursor (21 bytes, [`Cursor::to_bytes`](tranche_feed::Cursor::to_bytes)), `29` filter u8 (0 all, 1 firm, 2 broker, 3 instrument), `30` linger_us u16 (0: none), `32` key u32 (0 for all), `36` limit u32 (≥ 1), `40` min_batch u32, `44` wait_ms u32 — 48 bytes |
//! | `0x04` READV | client | `0` request u64, `8` filter u8, `9` reserved u8, `10` cursor length u16 (≤ 262), `12` key u32, `16` limit u32 (≥ 1), `20` min_batch u32, `24` wait_ms u32, `28` linger_us u16 (0: none), `30` reserved u16, `32` cursor ([`VectorCursor::to_bytes`](tranche_feed::VectorCursor::to_bytes): 21 bytes for one shard, `6 + 16K` for `K`) |
//! | `0x05` FOLLOW | replica | `0` shard u16, `2` reserved u16, `4` max orders per REPLICATE u32 (0: 10,000), `8` after seq u64, `16` after rec u64, `24` known floor seq u64, `32` known floor rec u64, `40` heartbeat ms u32 (0: 1,000), `44` reserved u32 — 48 bytes |
//! | `0x81` WELCOME | server, first | `0` version u16, `2` access u8 (0 open, 1 core, 2 firm, 3 reader), `3` reserved, `4` firm u32 (access 2, else 0), `8` seq u64, `16` rec u64 (the store's marks; 0 unless the token may write), `24` max events per batch u32 — 28 bytes |
//! | `0x82` ACK | server | `0` batch u64, `8` events u32, `12` reserved u32, `16` seq u64, `24` rec u64 (the position of the batch's last event) — 32 bytes |
//! | `0x83` HEADER | server | `0` request u64, `8` next cursor (21 bytes), `29` reserved (3), `32` count u32, `36` reserved u32, `40` oldest created_at u64 (0: no orders), `48` server wait µs u64, `56` server read µs u64 — 64 bytes |
//! | `0x84` ORDERS | server, after each HEADER or HEADERV | count × 80-byte orders |
//! | `0x86` HEADERV | server | `0` request u64, `8` count u32, `12` next cursor length u16, `14` reserved u16, `16` oldest created_at u64 (0: no orders), `24` server wait µs u64, `32` server read µs u64, `40` next cursor |
//! | `0x87` REPLICATE | server, to a FOLLOW | `0` shard u16, `2` shards u16 (the primary's), `4` count u32, `8` newest seq u64 (the shard's, before the read), `16` floor seq u64, `24` floor rec u64, `32` next seq u64, `40` next rec u64 (the last order's position, else the FOLLOW's), `48` complete u8 (1: every order after the position as of newest seq), `49` reserved (7), `56` count × 80-byte orders |
//! | `0x85` ERROR | server | `0` code u8, `1` reserved u8, `2` vector cursor length u16 (0 unless `cursor_too_old` with a cursor of several shards), `4` event index u32 (`u32::MAX`: none), `8` frame u64 (the client frame answered; 0: none), `16` batch or request number u64 (0: none), `24` oldest cursor (21 bytes; zeros unless `cursor_too_old` with a one-shard cursor), `45` field length u8, `46` message length u16, `48` field, message (UTF-8), then the vector cursor |
//!
//! An **event** (64 bytes): `0` type u8 (1 insert, 2 change), `1` side u8 (insert: 1
//! buy, 2 sell) or status u8 (change: 1 new … 7 expired, as
//! [`Status::code`](tranche_feed::Status::code)), `2` reserved u16, `4` firm u32, `8`
//! broker u32, `12` instrument u32 (all three 0 in a change), `16` seq u64, `24` id
//! u64, `32` price i64, `40` quantity u64, `48` rec u64 (insert) or filled u64
//! (change), `56` created_at u64 (insert) or updated_at u64 (change).
//!
//! An **order** (80 bytes): `0` id u64, `8` firm u32, `12` broker u32, `16` instrument
//! u32, `20` side u8, `21` status u8, `22` reserved u16, `24` price i64, `32` quantity
//! u64, `40` filled u64, `48` created_at u64, `56` updated_at u64, `64` seq u64, `72`
//! rec u64.
//!
//! **Error codes** ([`ErrorCode`]): 1 `malformed`, 2 `unauthorized`, 3 `forbidden`, 8
//! `store_failed` and 9 `shutting_down` close the connection; 4 `bad_cursor`, 5
//! `cursor_too_old`, 6 `cursor_ahead` answer one READ or READV (or end a FOLLOW's
//! stream) and 7 `bad_batch` one BATCH. A filtered read of a replica is `forbidden`.
//! A malformed frame's ERROR names its frame number and field, e.g. `frame 3 (BATCH),
//! field events[2].side: expected 1 (buy) or 2 (sell), got 9`; a refused batch's names
//! the event, e.g. `events[4].seq`.
//!
//! # Design
//!
//! **Hand-written, fixed-width layout.** As the store's log does, and for the same
//! reasons: every field has a fixed width, so a BATCH's length says how many events
//! it holds before any is read, an event is decoded with a handful of loads at fixed
//! offsets straight into a reused `Vec<Event>`, and an order is encoded with a
//! handful of copies into a reused output buffer — no serde dispatch, no varints, no
//! allocation per event or order. A derive-based format (bincode, postcard) would
//! tie the wire to a crate's version and to Rust; this layout is the table above, so
//! a core in C or Java can speak it. Fields are naturally aligned within events and
//! orders (64 and 80 bytes) so that such a client can also map them onto a struct.
//!
//! **Pipelining and group commit.** A connection's task reads and answers at once
//! (two halves joined in one task). The reading half decodes a BATCH into a pooled
//! `Vec<Event>` and queues it for the writer task with
//! [`Ingest::submit`](tranche_feed_service::Ingest::submit), which waits only for room
//! in the writer's queue; the answering half awaits the batches in order and writes
//! their ACKs, taking every answer already given in one write and flushing before any
//! wait, and hands each batch's `Vec` back to the pool. So a core with many batches in
//! flight has them committed together, several per sync, while the network carries
//! the next. At most [`MAX_IN_FLIGHT`] batches and reads wait for their answers per
//! connection: past that the server stops reading it, and the core's sends wait.
//!
//! **Header first.** The HEADER is a frame of its own ahead of the ORDERS, so a client
//! reading frame by frame has the next cursor before it has read the body, and its
//! next request overlaps the body's transfer and decoding. Both are written with one
//! write, from one buffer reused for the connection's life; the orders are read out
//! of the store into a reused `Vec` ([`tranche_feed::Store::read_into`]).
//!
//! **Sockets.** `TCP_NODELAY` on both ends: every write is a whole frame or several,
//! and a small ACK or HEADER held back by Nagle's algorithm would be latency. A
//! connection that has not sent its HELLO within [`HELLO_TIMEOUT`] is closed, and
//! until it has (and for good, unless its token may write), frames are limited to
//! [`MAX_HELLO_LEN`], so strangers and readers cannot make the server buffer much.
//! After an ERROR that closes a connection the server reads on for a moment before
//! closing, so that the client's unread bytes do not reset the connection and destroy
//! the ERROR before the client reads it.

#![deny(missing_docs)]

mod client;
pub mod frame;
mod replica;
mod server;
mod stream;

pub use client::{
    AckReceiver, AnswerReceiver, BatchSender, ClientError, CoreConnection, FeedClient, ReadSender,
};
pub use frame::{
    Access, Ack, CursorBytes, ErrorCode, Follow, FrameError, ReadHeader, ReadRequest,
    ReplicateHead, ServerError, VectorHeader, VectorRead, Welcome, MAX_BATCH_EVENTS, MAX_FRAME_LEN,
    MAX_HELLO_LEN,
};
pub use replica::{Replica, ReplicaConfig};
pub use server::{serve, serve_feed, DEFAULT_HEARTBEAT, HELLO_TIMEOUT, MAX_IN_FLIGHT};
