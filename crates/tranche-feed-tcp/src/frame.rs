//! The frames: their layouts, encoders and decoders (the format is in the crate docs).
//!
//! Encoders append whole frames to a caller's `Vec<u8>` (reused from frame to frame);
//! decoders read a frame's body in place. Event and order records are decoded
//! straight into a caller's `Vec`, so neither direction allocates per event or order.

use std::fmt;

use tranche_feed::{
    BrokerId, Cursor, Event, Filter, FirmId, InstrumentId, NewOrder, Order, OrderChange, OrderId,
    Side, Status, VectorCursor, CURSOR_BYTES, MAX_VECTOR_CURSOR_BYTES,
};

/// The protocol version this build speaks (in HELLO and WELCOME).
pub const VERSION: u16 = 1;
/// The first bytes of a HELLO's body: a stranger speaking another protocol is told so.
pub const MAGIC: [u8; 4] = *b"TRFD";
/// Bytes of the length prefix.
pub const LEN_BYTES: usize = 4;
/// Bytes of one event in a BATCH.
pub const EVENT_BYTES: usize = 64;
/// Bytes of one order in ORDERS.
pub const ORDER_BYTES: usize = 80;
/// The most events one BATCH may carry (the writer groups up to as many per commit).
pub const MAX_BATCH_EVENTS: u32 = 65_536;
/// The longest token a HELLO may carry.
pub const MAX_TOKEN_BYTES: usize = 1_024;

const HELLO_HEAD: usize = 10;
const BATCH_HEAD: usize = 16;
const READ_BYTES: usize = 48;
const WELCOME_BYTES: usize = 28;
const ACK_BYTES: usize = 32;
const HEADER_BYTES: usize = 64;
const ERROR_HEAD: usize = 48;
const READV_HEAD: usize = 32;
const HEADERV_HEAD: usize = 40;
const FOLLOW_BYTES: usize = 48;
const REPLICATE_HEAD: usize = 56;

/// The largest length a frame may declare: a BATCH of [`MAX_BATCH_EVENTS`] events.
pub const MAX_FRAME_LEN: u32 = (1 + BATCH_HEAD + MAX_BATCH_EVENTS as usize * EVENT_BYTES) as u32;
/// The largest length the first frame may declare (a HELLO with the longest token):
/// a connection that has not said who it is cannot make the server buffer more.
pub const MAX_HELLO_LEN: u32 = (1 + HELLO_HEAD + MAX_TOKEN_BYTES) as u32;

/// What a frame is: its kind byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Client, first frame: magic, version, token.
    Hello,
    /// Client: a batch of events, applied all-or-nothing.
    Batch,
    /// Client: a read request (a batched long poll).
    Read,
    /// Client: a read request with a vector cursor (any number of shards).
    ReadV,
    /// Client (a replica): stream one shard's orders after a position.
    Follow,
    /// Server, first frame: what the token may do, where a core resumes.
    Welcome,
    /// Server: a batch is applied and durable.
    Ack,
    /// Server: the header of a read's answer (before its orders).
    Header,
    /// Server: the header of a READV's answer (before its orders).
    HeaderV,
    /// Server: orders of a followed shard, with the primary's marks.
    Replicate,
    /// Server: the orders of a read's answer (right after its header).
    Orders,
    /// Server: something was refused; some errors close the connection.
    Error,
}

impl Kind {
    /// The kind's byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            Kind::Hello => 0x01,
            Kind::Batch => 0x02,
            Kind::Read => 0x03,
            Kind::ReadV => 0x04,
            Kind::Follow => 0x05,
            Kind::Welcome => 0x81,
            Kind::Ack => 0x82,
            Kind::Header => 0x83,
            Kind::Orders => 0x84,
            Kind::Error => 0x85,
            Kind::HeaderV => 0x86,
            Kind::Replicate => 0x87,
        }
    }

    /// The kind with this byte, if any.
    pub fn from_code(code: u8) -> Option<Kind> {
        Some(match code {
            0x01 => Kind::Hello,
            0x02 => Kind::Batch,
            0x03 => Kind::Read,
            0x04 => Kind::ReadV,
            0x05 => Kind::Follow,
            0x81 => Kind::Welcome,
            0x82 => Kind::Ack,
            0x83 => Kind::Header,
            0x84 => Kind::Orders,
            0x85 => Kind::Error,
            0x86 => Kind::HeaderV,
            0x87 => Kind::Replicate,
            _ => return None,
        })
    }

    /// Its name in the docs and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hello => "HELLO",
            Kind::Batch => "BATCH",
            Kind::Read => "READ",
            Kind::ReadV => "READV",
            Kind::Follow => "FOLLOW",
            Kind::Welcome => "WELCOME",
            Kind::Ack => "ACK",
            Kind::Header => "HEADER",
            Kind::Orders => "ORDERS",
            Kind::Error => "ERROR",
            Kind::HeaderV => "HEADERV",
            Kind::Replicate => "REPLICATE",
        }
    }

    /// Whether clients send it (else the server does).
    pub fn from_client(self) -> bool {
        self.code() < 0x80
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame that is not what the format says, naming the frame (counted from 1 in each
/// direction of a connection, the HELLO or WELCOME being frame 1) and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FrameError {
    /// The frame's number on its connection, in its direction.
    pub frame: u64,
    /// Its kind byte, when it was read.
    pub kind: Option<u8>,
    /// The field at fault: `length`, `kind`, `magic`, `version`, `count`,
    /// `events[3].side`, `cursor`, …
    pub field: String,
    /// What was expected and what came.
    pub problem: String,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "frame {}", self.frame)?;
        match self.kind.map(|k| (k, Kind::from_code(k))) {
            Some((_, Some(kind))) => write!(f, " ({kind})")?,
            Some((code, None)) => write!(f, " (kind {code:#04x})")?,
            None => {}
        }
        write!(f, ", field {}: {}", self.field, self.problem)
    }
}

impl FrameError {
    /// An error of frame `frame` (of kind byte `kind`, if read) in `field`.
    pub fn new(
        frame: u64,
        kind: Option<u8>,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> FrameError {
        FrameError {
            frame,
            kind,
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Why the server refused something ([`ServerError::code`]). After those that
/// [`close`](ErrorCode::closes) the server closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A frame is not what the format says (closes; nothing of it was applied).
    Malformed,
    /// No token, or an unknown one, while the server has tokens (closes).
    Unauthorized,
    /// The token may not do this: a core's reads, a client's writes, another firm's
    /// orders (closes; nothing of it was applied).
    Forbidden,
    /// The read's cursor is malformed or altered (the request's answer; HTTP's 400).
    BadCursor,
    /// The read's cursor is older than the store retains: `oldest` is the oldest
    /// served (the request's answer; HTTP's 410).
    CursorTooOld,
    /// The read's cursor is past everything the store holds (the request's answer).
    CursorAhead,
    /// The batch is invalid: `index` and `field` name the event (the batch's answer;
    /// nothing of it was applied).
    Refused,
    /// The store could not write: nothing of the batch was acknowledged (closes).
    StoreFailed,
    /// The server is stopping (closes, after answering everything before it).
    ShuttingDown,
}

impl ErrorCode {
    /// The code's byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            ErrorCode::Malformed => 1,
            ErrorCode::Unauthorized => 2,
            ErrorCode::Forbidden => 3,
            ErrorCode::BadCursor => 4,
            ErrorCode::CursorTooOld => 5,
            ErrorCode::CursorAhead => 6,
            ErrorCode::Refused => 7,
            ErrorCode::StoreFailed => 8,
            ErrorCode::ShuttingDown => 9,
        }
    }

    /// The code with this byte, if any.
    pub fn from_code(code: u8) -> Option<ErrorCode> {
        Some(match code {
            1 => ErrorCode::Malformed,
            2 => ErrorCode::Unauthorized,
            3 => ErrorCode::Forbidden,
            4 => ErrorCode::BadCursor,
            5 => ErrorCode::CursorTooOld,
            6 => ErrorCode::CursorAhead,
            7 => ErrorCode::Refused,
            8 => ErrorCode::StoreFailed,
            9 => ErrorCode::ShuttingDown,
            _ => return None,
        })
    }

    /// The name HTTP uses for the same error (`bad_cursor`, `cursor_too_old`, …).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::Malformed => "malformed",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::BadCursor => "bad_cursor",
            ErrorCode::CursorTooOld => "cursor_too_old",
            ErrorCode::CursorAhead => "cursor_ahead",
            ErrorCode::Refused => "bad_batch",
            ErrorCode::StoreFailed => "store_failed",
            ErrorCode::ShuttingDown => "shutting_down",
        }
    }

    /// Whether the server closes the connection after this error. The others answer
    /// one batch or read, and the connection goes on.
    pub fn closes(self) -> bool {
        !matches!(
            self,
            ErrorCode::BadCursor
                | ErrorCode::CursorTooOld
                | ErrorCode::CursorAhead
                | ErrorCode::Refused
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An ERROR frame: what the server refused and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ServerError {
    /// Why.
    pub code: ErrorCode,
    /// The number of the client's frame it answers (0: none, e.g. shutting down).
    pub frame: u64,
    /// The batch or request number it answers (0: none).
    pub id: u64,
    /// A refused batch: the index of the event at fault.
    pub index: Option<u32>,
    /// [`ErrorCode::CursorTooOld`]: the oldest cursor served (for a READ, a
    /// one-shard cursor: [`VectorCursor::position`] 0 is the [`Cursor`]).
    pub oldest: Option<VectorCursor>,
    /// The field at fault (empty: none).
    pub field: String,
    /// For people: what was expected and what came.
    pub message: String,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if self.frame > 0 {
            write!(f, ", frame {}", self.frame)?;
        }
        if !self.field.is_empty() {
            write!(f, ", field {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// What a connection's token lets it do (in WELCOME).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// The server has no tokens (loopback only): everything.
    Open,
    /// A trading core's token: send batches only.
    Core,
    /// A firm's client: read that firm's orders only.
    Firm(FirmId),
    /// Read every order.
    Reader,
}

impl Access {
    /// Whether it may send batches.
    pub fn may_write(self) -> bool {
        matches!(self, Access::Open | Access::Core)
    }

    /// The filter a read asking for `asked` is served with, or why it may not read it.
    /// A firm's client asking for every order gets its firm's.
    pub fn read_filter(self, asked: Filter) -> Result<Filter, String> {
        match (self, asked) {
            (Access::Open | Access::Reader, asked) => Ok(asked),
            (Access::Firm(firm), Filter::All) => Ok(Filter::Firm(firm)),
            (Access::Firm(firm), Filter::Firm(f)) if f == firm => Ok(asked),
            (Access::Firm(firm), _) => Err(format!(
                "this token may read firm {firm}'s orders only (filter all or firm {firm})"
            )),
            (Access::Core, _) => Err("a core's token may not read".into()),
        }
    }
}

/// A HELLO: the client's token (`Debug` does not show it).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    /// The token as configured in the server's tokens file (empty: none).
    pub token: &'a [u8],
    /// The shard a core's batches go to (0: the first, and the only one of a
    /// one-shard feed; readers read every shard whatever it says).
    pub shard: u16,
}

impl fmt::Debug for Hello<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Hello {{ token: {} bytes, shard: {} }}",
            self.token.len(),
            self.shard
        )
    }
}

/// A WELCOME: the server's answer to a HELLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// The protocol version the server speaks.
    pub version: u16,
    /// What the token may do.
    pub access: Access,
    /// For a token that may write: the highest `seq` and `rec` the store has applied
    /// (a core resuming after a reconnect continues after them); 0 otherwise.
    pub marks: (u64, u64),
    /// The most events a BATCH may carry.
    pub max_batch_events: u32,
}

/// A BATCH as read: its events are decoded by [`Batch::decode_into`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch<'a> {
    frame: u64,
    /// The client's number for it (each greater than the last on a connection),
    /// echoed by its ACK or ERROR.
    pub batch: u64,
    /// How many events it carries.
    pub count: u32,
    events: &'a [u8],
}

/// A read request: HTTP's `GET /v1/feed/orders` parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    /// Read after this cursor: [`Cursor::to_bytes`], passed on opaque; the server
    /// checks it ([`ErrorCode::BadCursor`]).
    pub cursor: [u8; CURSOR_BYTES],
    /// Which orders.
    pub filter: Filter,
    /// The most orders in the answer (at least 1; cut to the store's
    /// [`tranche_feed::MAX_READ_LIMIT`]).
    pub limit: u32,
    /// Wait until this many are ready (cut to `limit`; 0 answers at once).
    pub min_batch: u32,
    /// Wait at most this long (cut to [`tranche_feed_service::MAX_WAIT_MS`]).
    pub wait_ms: u32,
    /// Once some orders are ready but fewer than `min_batch`, wait at most this many
    /// microseconds more (0: until `min_batch` or `wait_ms`, as before there was a
    /// linger; see `Shards::wait_for`).
    pub linger_us: u16,
}

impl ReadRequest {
    /// Up to [`tranche_feed_service::DEFAULT_LIMIT`] orders of `filter` after `cursor`,
    /// answered as soon as one is ready or after
    /// [`tranche_feed_service::DEFAULT_WAIT_MS`].
    pub fn new(cursor: Cursor, filter: Filter) -> ReadRequest {
        ReadRequest {
            cursor: cursor.to_bytes(),
            filter,
            limit: tranche_feed_service::DEFAULT_LIMIT as u32,
            min_batch: 1,
            wait_ms: tranche_feed_service::DEFAULT_WAIT_MS as u32,
            linger_us: 0,
        }
    }
}

/// A cursor as a READV carries it: up to [`MAX_VECTOR_CURSOR_BYTES`], passed on
/// opaque (the server checks it, answering [`ErrorCode::BadCursor`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CursorBytes {
    len: u16,
    bytes: [u8; MAX_VECTOR_CURSOR_BYTES],
}

impl CursorBytes {
    /// `bytes` as they are, if they fit.
    pub fn from_slice(bytes: &[u8]) -> Option<CursorBytes> {
        let mut out = CursorBytes {
            len: u16::try_from(bytes.len()).ok()?,
            bytes: [0; MAX_VECTOR_CURSOR_BYTES],
        };
        out.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(out)
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The cursor they encode, or why not.
    pub fn cursor(&self) -> Result<VectorCursor, tranche_feed::CursorError> {
        VectorCursor::from_bytes(self.as_bytes())
    }
}

impl From<&VectorCursor> for CursorBytes {
    fn from(cursor: &VectorCursor) -> CursorBytes {
        CursorBytes::from_slice(&cursor.to_bytes()).expect("a cursor fits")
    }
}

impl fmt::Debug for CursorBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cursor() {
            Ok(cursor) => write!(f, "CursorBytes({cursor:?})"),
            Err(_) => write!(f, "CursorBytes({:?})", self.as_bytes()),
        }
    }
}

/// A read request by vector cursor (READV): [`ReadRequest`]'s parameters with a cursor
/// of any number of shards. Its answer is a [`VectorHeader`] and the ORDERS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorRead {
    /// Read after this cursor (a [`VectorHeader::next`], or
    /// [`VectorCursor::START`]).
    pub cursor: CursorBytes,
    /// Which orders.
    pub filter: Filter,
    /// The most orders in the answer (at least 1; cut to the store's
    /// [`tranche_feed::MAX_READ_LIMIT`]).
    pub limit: u32,
    /// Wait until this many are ready (cut to `limit`; 0 answers at once).
    pub min_batch: u32,
    /// Wait at most this long (cut to [`tranche_feed_service::MAX_WAIT_MS`]).
    pub wait_ms: u32,
    /// As [`ReadRequest::linger_us`].
    pub linger_us: u16,
}

impl VectorRead {
    /// [`ReadRequest::new`]'s defaults, after `cursor`.
    pub fn new(cursor: &VectorCursor, filter: Filter) -> VectorRead {
        VectorRead {
            cursor: cursor.into(),
            filter,
            limit: tranche_feed_service::DEFAULT_LIMIT as u32,
            min_batch: 1,
            wait_ms: tranche_feed_service::DEFAULT_WAIT_MS as u32,
            linger_us: 0,
        }
    }
}

/// A HEADERV: what a READV's answer holds, before its orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorHeader {
    /// The request's number.
    pub request: u64,
    /// Where to read on from (the request's cursor, every shard spelled out, when
    /// there are no orders).
    pub next: VectorCursor,
    /// Orders in the ORDERS frame that follows.
    pub count: u32,
    /// The earliest `created_at` of those orders (ns); `None` when there are none.
    pub oldest_created_at: Option<u64>,
    /// Microseconds the server waited for `min_batch` orders.
    pub server_wait_us: u64,
    /// Microseconds the server spent reading them out of the store.
    pub server_read_us: u64,
}

/// A FOLLOW: a replica asks for one shard's orders after a position, as a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Follow {
    /// The primary's shard.
    pub shard: u16,
    /// The most orders per REPLICATE (0: the server's default; cut to
    /// [`tranche_feed::MAX_READ_LIMIT`]).
    pub max_orders: u32,
    /// Stream the orders after this position.
    pub after: Cursor,
    /// The primary's eviction floor as the replica knows it (see
    /// [`tranche_feed::Store::read_for_replica`]).
    pub known_floor: Cursor,
    /// Send a REPLICATE, empty if need be, at least this often (0: the server's
    /// default), so the replica knows the primary's marks and that it is alive.
    pub heartbeat_ms: u32,
}

/// A REPLICATE's head: one shard's orders streamed to a replica, and the primary's
/// marks when they were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicateHead {
    /// The shard.
    pub shard: u16,
    /// How many shards the primary has.
    pub shards: u16,
    /// Orders that follow (80 bytes each, as in ORDERS), in `(seq, rec)` order.
    pub count: u32,
    /// The newest `seq` the primary's shard had applied when they were read.
    pub newest_seq: u64,
    /// The shard's eviction floor, as it was before they were read.
    pub floor: Cursor,
    /// The position after them: the last one's, or the position followed from.
    pub next: Cursor,
    /// Whether they are every order after the position followed from as of
    /// `newest_seq` (the read was not cut short): a replica that applies them
    /// reflects the primary's shard up to `newest_seq`, even when the newest orders
    /// were evicted and `next` is behind it.
    pub complete: bool,
}

/// A REPLICATE as read: its head, and orders decoded by [`Replicate::decode_into`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replicate<'a> {
    /// The head.
    pub head: ReplicateHead,
    orders: Orders<'a>,
}

impl Replicate<'_> {
    /// Appends its orders to `out`, checking their codes and that they ascend from
    /// the position followed, ending at [`ReplicateHead::next`].
    pub fn decode_into(&self, after: Cursor, out: &mut Vec<Order>) -> Result<(), FrameError> {
        let start = out.len();
        self.orders.decode_into(out)?;
        let mut last = after;
        for (i, order) in out[start..].iter().enumerate() {
            if order.position() <= last {
                return Err(FrameError::new(
                    self.orders.frame,
                    Some(Kind::Replicate.code()),
                    format!("orders[{i}].seq"),
                    format!(
                        "expected a position after ({}, {}), got ({}, {})",
                        last.seq, last.rec, order.seq, order.rec
                    ),
                ));
            }
            last = order.position();
        }
        if self.head.count > 0 && last != self.head.next {
            return Err(FrameError::new(
                self.orders.frame,
                Some(Kind::Replicate.code()),
                "next",
                format!(
                    "expected the last order's position ({}, {}), got ({}, {})",
                    last.seq, last.rec, self.head.next.seq, self.head.next.rec
                ),
            ));
        }
        Ok(())
    }
}

/// An ACK: a batch is applied and durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    /// The batch's number.
    pub batch: u64,
    /// Events applied (all of the batch's).
    pub events: u32,
    /// The position of its last event (the newest position for an empty batch).
    pub position: Cursor,
}

/// A HEADER: what a read's answer holds, before its orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadHeader {
    /// The request's number.
    pub request: u64,
    /// Where to read on from (the request's cursor when there are no orders).
    pub next: Cursor,
    /// Orders in the ORDERS frame that follows.
    pub count: u32,
    /// The earliest `created_at` of those orders (ns); `None` when there are none.
    pub oldest_created_at: Option<u64>,
    /// Microseconds the server waited for `min_batch` orders.
    pub server_wait_us: u64,
    /// Microseconds the server spent reading them out of the store.
    pub server_read_us: u64,
}

/// An ORDERS frame as read: its orders are decoded by [`Orders::decode_into`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Orders<'a> {
    frame: u64,
    orders: &'a [u8],
}

/// One decoded frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// See [`Hello`].
    Hello(Hello<'a>),
    /// See [`Batch`].
    Batch(Batch<'a>),
    /// A read request and its number (each greater than the last on a connection).
    Read {
        /// The client's number for it, echoed by its HEADER or ERROR.
        request: u64,
        /// What to read.
        read: ReadRequest,
    },
    /// See [`Welcome`].
    Welcome(Welcome),
    /// See [`Ack`].
    Ack(Ack),
    /// See [`ReadHeader`].
    Header(ReadHeader),
    /// A read request by vector cursor and its number.
    ReadV {
        /// The client's number for it, echoed by its HEADERV or ERROR.
        request: u64,
        /// What to read.
        read: VectorRead,
    },
    /// See [`Follow`].
    Follow(Follow),
    /// See [`VectorHeader`].
    HeaderV(VectorHeader),
    /// See [`Replicate`].
    Replicate(Replicate<'a>),
    /// See [`Orders`].
    Orders(Orders<'a>),
    /// See [`ServerError`].
    Error(ServerError),
}

impl Frame<'_> {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Frame::Hello(_) => Kind::Hello,
            Frame::Batch(_) => Kind::Batch,
            Frame::Read { .. } => Kind::Read,
            Frame::Welcome(_) => Kind::Welcome,
            Frame::Ack(_) => Kind::Ack,
            Frame::Header(_) => Kind::Header,
            Frame::ReadV { .. } => Kind::ReadV,
            Frame::Follow(_) => Kind::Follow,
            Frame::HeaderV(_) => Kind::HeaderV,
            Frame::Replicate(_) => Kind::Replicate,
            Frame::Orders(_) => Kind::Orders,
            Frame::Error(_) => Kind::Error,
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Checks that the body of frame `frame` of `kind` is `expected` bytes long.
fn exact(frame: u64, kind: Kind, body: &[u8], expected: usize) -> Result<(), FrameError> {
    if body.len() != expected {
        return Err(FrameError::new(
            frame,
            Some(kind.code()),
            "length",
            format!(
                "expected {} bytes (the kind byte and a {expected}-byte body), got {}",
                expected + 1,
                body.len() + 1
            ),
        ));
    }
    Ok(())
}

fn at_least(frame: u64, kind: Kind, body: &[u8], head: usize) -> Result<(), FrameError> {
    if body.len() < head {
        return Err(FrameError::new(
            frame,
            Some(kind.code()),
            "length",
            format!(
                "expected at least {} bytes (the kind byte and a {head}-byte head), got {}",
                head + 1,
                body.len() + 1
            ),
        ));
    }
    Ok(())
}

fn zero(
    frame: u64,
    kind: Kind,
    field: impl FnOnce() -> String,
    bytes: &[u8],
) -> Result<(), FrameError> {
    if bytes.iter().any(|&b| b != 0) {
        let mut value = 0u64;
        for &b in bytes.iter().rev().take(8) {
            value = (value << 8) | u64::from(b);
        }
        return Err(FrameError::new(
            frame,
            Some(kind.code()),
            field(),
            format!("expected 0 (reserved), got {value}"),
        ));
    }
    Ok(())
}

/// The filter of a READ or READV: its code and key.
fn filter_of(
    code: u8,
    key: u32,
    fail: impl Fn(&str, String) -> FrameError,
) -> Result<Filter, FrameError> {
    Ok(match code {
        0 => {
            if key != 0 {
                return Err(fail(
                    "key",
                    format!("expected 0 with filter 0 (all), got {key}"),
                ));
            }
            Filter::All
        }
        1 => Filter::Firm(FirmId(key)),
        2 => Filter::Broker(BrokerId(key)),
        3 => Filter::Instrument(InstrumentId(key)),
        other => {
            return Err(fail(
                "filter",
                format!("expected 0 (all), 1 (firm), 2 (broker) or 3 (instrument), got {other}"),
            ))
        }
    })
}

fn filter_code(filter: Filter) -> (u8, u32) {
    match filter {
        Filter::All => (0, 0),
        Filter::Firm(f) => (1, f.0),
        Filter::Broker(b) => (2, b.0),
        Filter::Instrument(i) => (3, i.0),
    }
}

/// Decodes frame number `frame` of kind byte `kind` with `body` (the bytes after the
/// kind byte). BATCH events and ORDERS orders are checked when decoded into a `Vec`
/// ([`Batch::decode_into`], [`Orders::decode_into`]).
pub fn decode(frame: u64, kind: u8, body: &[u8]) -> Result<Frame<'_>, FrameError> {
    let Some(k) = Kind::from_code(kind) else {
        return Err(FrameError::new(
            frame,
            Some(kind),
            "kind",
            format!(
                "expected a frame kind (0x01 HELLO, 0x02 BATCH, 0x03 READ, 0x04 READV, \
                 0x05 FOLLOW, 0x81 WELCOME, 0x82 ACK, 0x83 HEADER, 0x84 ORDERS, 0x85 ERROR, \
                 0x86 HEADERV, 0x87 REPLICATE), got {kind:#04x}"
            ),
        ));
    };
    let fail = |field: &str, problem: String| FrameError::new(frame, Some(kind), field, problem);
    match k {
        Kind::Hello => {
            at_least(frame, k, body, HELLO_HEAD)?;
            if body[..4] != MAGIC {
                return Err(fail(
                    "magic",
                    format!(
                        "expected {:?} (the tranche feed protocol), got {:?}",
                        String::from_utf8_lossy(&MAGIC),
                        String::from_utf8_lossy(&body[..4])
                    ),
                ));
            }
            let version = u16_at(body, 4);
            if version != VERSION {
                return Err(fail(
                    "version",
                    format!("expected {VERSION}, got {version}"),
                ));
            }
            let shard = u16_at(body, 6);
            let len = usize::from(u16_at(body, 8));
            if len > MAX_TOKEN_BYTES {
                return Err(fail(
                    "token_len",
                    format!("expected at most {MAX_TOKEN_BYTES} bytes, got {len}"),
                ));
            }
            exact(frame, k, body, HELLO_HEAD + len)?;
            Ok(Frame::Hello(Hello {
                token: &body[HELLO_HEAD..],
                shard,
            }))
        }
        Kind::Batch => {
            at_least(frame, k, body, BATCH_HEAD)?;
            let count = u32_at(body, 8);
            zero(frame, k, || "reserved".into(), &body[12..16])?;
            if count > MAX_BATCH_EVENTS {
                return Err(fail(
                    "count",
                    format!("expected at most {MAX_BATCH_EVENTS} events, got {count}"),
                ));
            }
            exact(frame, k, body, BATCH_HEAD + count as usize * EVENT_BYTES)?;
            Ok(Frame::Batch(Batch {
                frame,
                batch: u64_at(body, 0),
                count,
                events: &body[BATCH_HEAD..],
            }))
        }
        Kind::Read => {
            exact(frame, k, body, READ_BYTES)?;
            let filter = filter_of(body[29], u32_at(body, 32), fail)?;
            let limit = u32_at(body, 36);
            if limit == 0 {
                return Err(fail("limit", "expected at least 1, got 0".into()));
            }
            Ok(Frame::Read {
                request: u64_at(body, 0),
                read: ReadRequest {
                    cursor: body[8..8 + CURSOR_BYTES].try_into().expect("21 bytes"),
                    filter,
                    limit,
                    min_batch: u32_at(body, 40),
                    wait_ms: u32_at(body, 44),
                    linger_us: u16_at(body, 30),
                },
            })
        }
        Kind::ReadV => {
            at_least(frame, k, body, READV_HEAD)?;
            zero(frame, k, || "reserved".into(), &body[9..10])?;
            zero(frame, k, || "reserved".into(), &body[30..32])?;
            let len = usize::from(u16_at(body, 10));
            if len > MAX_VECTOR_CURSOR_BYTES {
                return Err(fail(
                    "cursor_len",
                    format!("expected at most {MAX_VECTOR_CURSOR_BYTES} bytes, got {len}"),
                ));
            }
            exact(frame, k, body, READV_HEAD + len)?;
            let filter = filter_of(body[8], u32_at(body, 12), fail)?;
            let limit = u32_at(body, 16);
            if limit == 0 {
                return Err(fail("limit", "expected at least 1, got 0".into()));
            }
            Ok(Frame::ReadV {
                request: u64_at(body, 0),
                read: VectorRead {
                    cursor: CursorBytes::from_slice(&body[READV_HEAD..]).expect("checked"),
                    filter,
                    limit,
                    min_batch: u32_at(body, 20),
                    wait_ms: u32_at(body, 24),
                    linger_us: u16_at(body, 28),
                },
            })
        }
        Kind::Follow => {
            exact(frame, k, body, FOLLOW_BYTES)?;
            zero(frame, k, || "reserved".into(), &body[2..4])?;
            zero(frame, k, || "reserved".into(), &body[44..48])?;
            Ok(Frame::Follow(Follow {
                shard: u16_at(body, 0),
                max_orders: u32_at(body, 4),
                after: Cursor::new(u64_at(body, 8), u64_at(body, 16)),
                known_floor: Cursor::new(u64_at(body, 24), u64_at(body, 32)),
                heartbeat_ms: u32_at(body, 40),
            }))
        }
        Kind::HeaderV => {
            at_least(frame, k, body, HEADERV_HEAD)?;
            zero(frame, k, || "reserved".into(), &body[14..16])?;
            exact(frame, k, body, HEADERV_HEAD + usize::from(u16_at(body, 12)))?;
            let next = VectorCursor::from_bytes(&body[HEADERV_HEAD..])
                .map_err(|e| fail("next", e.to_string()))?;
            let oldest = u64_at(body, 16);
            Ok(Frame::HeaderV(VectorHeader {
                request: u64_at(body, 0),
                next,
                count: u32_at(body, 8),
                oldest_created_at: (oldest != 0).then_some(oldest),
                server_wait_us: u64_at(body, 24),
                server_read_us: u64_at(body, 32),
            }))
        }
        Kind::Replicate => {
            at_least(frame, k, body, REPLICATE_HEAD)?;
            let count = u32_at(body, 4);
            let complete = match body[48] {
                0 => false,
                1 => true,
                other => return Err(fail("complete", format!("expected 0 or 1, got {other}"))),
            };
            zero(frame, k, || "reserved".into(), &body[49..56])?;
            let orders = &body[REPLICATE_HEAD..];
            if orders.len() != count as usize * ORDER_BYTES {
                return Err(fail(
                    "count",
                    format!(
                        "expected {count} orders of {ORDER_BYTES} bytes, got {} bytes",
                        orders.len()
                    ),
                ));
            }
            Ok(Frame::Replicate(Replicate {
                head: ReplicateHead {
                    shard: u16_at(body, 0),
                    shards: u16_at(body, 2),
                    count,
                    newest_seq: u64_at(body, 8),
                    floor: Cursor::new(u64_at(body, 16), u64_at(body, 24)),
                    next: Cursor::new(u64_at(body, 32), u64_at(body, 40)),
                    complete,
                },
                orders: Orders { frame, orders },
            }))
        }
        Kind::Welcome => {
            exact(frame, k, body, WELCOME_BYTES)?;
            let version = u16_at(body, 0);
            if version != VERSION {
                return Err(fail(
                    "version",
                    format!("expected {VERSION}, got {version}"),
                ));
            }
            zero(frame, k, || "reserved".into(), &body[3..4])?;
            let firm = u32_at(body, 4);
            let access = match body[2] {
                0 => Access::Open,
                1 => Access::Core,
                2 => Access::Firm(FirmId(firm)),
                3 => Access::Reader,
                other => {
                    return Err(fail(
                        "access",
                        format!("expected 0 (open), 1 (core), 2 (firm) or 3 (reader), got {other}"),
                    ))
                }
            };
            if !matches!(access, Access::Firm(_)) {
                zero(frame, k, || "firm".into(), &body[4..8])?;
            }
            Ok(Frame::Welcome(Welcome {
                version,
                access,
                marks: (u64_at(body, 8), u64_at(body, 16)),
                max_batch_events: u32_at(body, 24),
            }))
        }
        Kind::Ack => {
            exact(frame, k, body, ACK_BYTES)?;
            zero(frame, k, || "reserved".into(), &body[12..16])?;
            Ok(Frame::Ack(Ack {
                batch: u64_at(body, 0),
                events: u32_at(body, 8),
                position: Cursor::new(u64_at(body, 16), u64_at(body, 24)),
            }))
        }
        Kind::Header => {
            exact(frame, k, body, HEADER_BYTES)?;
            let next = Cursor::from_bytes(&body[8..8 + CURSOR_BYTES])
                .map_err(|e| fail("next", e.to_string()))?;
            zero(frame, k, || "reserved".into(), &body[29..32])?;
            zero(frame, k, || "reserved".into(), &body[36..40])?;
            let oldest = u64_at(body, 40);
            Ok(Frame::Header(ReadHeader {
                request: u64_at(body, 0),
                next,
                count: u32_at(body, 32),
                oldest_created_at: (oldest != 0).then_some(oldest),
                server_wait_us: u64_at(body, 48),
                server_read_us: u64_at(body, 56),
            }))
        }
        Kind::Orders => {
            if !body.len().is_multiple_of(ORDER_BYTES) {
                return Err(fail(
                    "length",
                    format!(
                        "expected 1 + {ORDER_BYTES} × count bytes, got {} ({} orders and {} bytes over)",
                        body.len() + 1,
                        body.len() / ORDER_BYTES,
                        body.len() % ORDER_BYTES
                    ),
                ));
            }
            Ok(Frame::Orders(Orders {
                frame,
                orders: body,
            }))
        }
        Kind::Error => {
            at_least(frame, k, body, ERROR_HEAD)?;
            let code = ErrorCode::from_code(body[0])
                .ok_or_else(|| fail("code", format!("expected 1 to 9, got {}", body[0])))?;
            zero(frame, k, || "reserved".into(), &body[1..2])?;
            let vector_len = usize::from(u16_at(body, 2));
            let index = u32_at(body, 4);
            let field_len = usize::from(body[45]);
            let message_len = usize::from(u16_at(body, 46));
            let text_end = ERROR_HEAD + field_len + message_len;
            exact(frame, k, body, text_end + vector_len)?;
            let oldest = &body[24..24 + CURSOR_BYTES];
            let oldest = if vector_len > 0 {
                Some(
                    VectorCursor::from_bytes(&body[text_end..])
                        .map_err(|e| fail("oldest", e.to_string()))?,
                )
            } else if oldest.iter().all(|&b| b == 0) {
                None
            } else {
                Some(VectorCursor::from_bytes(oldest).map_err(|e| fail("oldest", e.to_string()))?)
            };
            let text = |field: &str, bytes: &[u8]| {
                std::str::from_utf8(bytes)
                    .map(str::to_string)
                    .map_err(|e| fail(field, format!("expected UTF-8, got {e}")))
            };
            Ok(Frame::Error(ServerError {
                code,
                frame: u64_at(body, 8),
                id: u64_at(body, 16),
                index: (index != u32::MAX).then_some(index),
                oldest,
                field: text("field", &body[ERROR_HEAD..ERROR_HEAD + field_len])?,
                message: text("message", &body[ERROR_HEAD + field_len..text_end])?,
            }))
        }
    }
}

impl Batch<'_> {
    /// Appends the batch's events to `out`, checking each one's codes and reserved
    /// bytes; on an error `out` may hold some of them (discard it: the batch is
    /// malformed).
    pub fn decode_into(&self, out: &mut Vec<Event>) -> Result<(), FrameError> {
        out.reserve(self.count as usize);
        for (i, b) in self.events.chunks_exact(EVENT_BYTES).enumerate() {
            let fail = |field: &str, problem: String| {
                FrameError::new(
                    self.frame,
                    Some(Kind::Batch.code()),
                    format!("events[{i}].{field}"),
                    problem,
                )
            };
            zero(
                self.frame,
                Kind::Batch,
                || format!("events[{i}].reserved"),
                &b[2..4],
            )?;
            let event = match b[0] {
                1 => Event::Insert(NewOrder {
                    seq: u64_at(b, 16),
                    rec: u64_at(b, 48),
                    id: OrderId(u64_at(b, 24)),
                    firm: FirmId(u32_at(b, 4)),
                    broker: BrokerId(u32_at(b, 8)),
                    instrument: InstrumentId(u32_at(b, 12)),
                    side: Side::from_code(b[1]).ok_or_else(|| {
                        fail(
                            "side",
                            format!("expected 1 (buy) or 2 (sell), got {}", b[1]),
                        )
                    })?,
                    price: u64_at(b, 32) as i64,
                    quantity: u64_at(b, 40),
                    created_at: u64_at(b, 56),
                }),
                2 => {
                    for (field, at) in [("firm", 4), ("broker", 8), ("instrument", 12)] {
                        let value = u32_at(b, at);
                        if value != 0 {
                            return Err(fail(
                                field,
                                format!("expected 0 (not a field of a change), got {value}"),
                            ));
                        }
                    }
                    Event::Change(OrderChange {
                        seq: u64_at(b, 16),
                        id: OrderId(u64_at(b, 24)),
                        price: u64_at(b, 32) as i64,
                        quantity: u64_at(b, 40),
                        filled: u64_at(b, 48),
                        status: Status::from_code(b[1]).ok_or_else(|| {
                            fail(
                                "status",
                                format!("expected a status code 1 to 7, got {}", b[1]),
                            )
                        })?,
                        updated_at: u64_at(b, 56),
                    })
                }
                other => {
                    return Err(fail(
                        "type",
                        format!("expected 1 (insert) or 2 (change), got {other}"),
                    ))
                }
            };
            out.push(event);
        }
        Ok(())
    }
}

impl Orders<'_> {
    /// How many orders it holds.
    pub fn len(&self) -> usize {
        self.orders.len() / ORDER_BYTES
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    /// Appends its orders to `out`, checking their codes.
    pub fn decode_into(&self, out: &mut Vec<Order>) -> Result<(), FrameError> {
        out.reserve(self.len());
        for (i, b) in self.orders.chunks_exact(ORDER_BYTES).enumerate() {
            let fail = |field: &str, problem: String| {
                FrameError::new(
                    self.frame,
                    Some(Kind::Orders.code()),
                    format!("orders[{i}].{field}"),
                    problem,
                )
            };
            zero(
                self.frame,
                Kind::Orders,
                || format!("orders[{i}].reserved"),
                &b[22..24],
            )?;
            out.push(Order {
                id: OrderId(u64_at(b, 0)),
                firm: FirmId(u32_at(b, 8)),
                broker: BrokerId(u32_at(b, 12)),
                instrument: InstrumentId(u32_at(b, 16)),
                side: Side::from_code(b[20]).ok_or_else(|| {
                    fail(
                        "side",
                        format!("expected 1 (buy) or 2 (sell), got {}", b[20]),
                    )
                })?,
                status: Status::from_code(b[21]).ok_or_else(|| {
                    fail(
                        "status",
                        format!("expected a status code 1 to 7, got {}", b[21]),
                    )
                })?,
                price: u64_at(b, 24) as i64,
                quantity: u64_at(b, 32),
                filled: u64_at(b, 40),
                created_at: u64_at(b, 48),
                updated_at: u64_at(b, 56),
                seq: u64_at(b, 64),
                rec: u64_at(b, 72),
            });
        }
        Ok(())
    }
}

/// Starts a frame of `kind`: a length to fill in and the kind byte. Returns where the
/// frame starts.
fn begin(out: &mut Vec<u8>, kind: Kind) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; LEN_BYTES]);
    out.push(kind.code());
    start
}

/// Fills in the length of the frame begun at `start`.
fn finish(out: &mut [u8], start: usize) {
    let len = (out.len() - start - LEN_BYTES) as u32;
    out[start..start + LEN_BYTES].copy_from_slice(&len.to_le_bytes());
}

/// Appends a HELLO carrying `token` (at most [`MAX_TOKEN_BYTES`]; longer is cut, and
/// refused by the server as unknown).
pub fn encode_hello(token: &[u8], out: &mut Vec<u8>) {
    encode_hello_shard(token, 0, out);
}

/// Appends a HELLO of a core writing to shard `shard` (see [`encode_hello`]).
pub fn encode_hello_shard(token: &[u8], shard: u16, out: &mut Vec<u8>) {
    let token = &token[..token.len().min(MAX_TOKEN_BYTES)];
    let start = begin(out, Kind::Hello);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&shard.to_le_bytes());
    out.extend_from_slice(&(token.len() as u16).to_le_bytes());
    out.extend_from_slice(token);
    finish(out, start);
}

/// Appends one event's 64 bytes.
pub fn encode_event(event: &Event, out: &mut Vec<u8>) {
    match event {
        Event::Insert(e) => {
            out.extend_from_slice(&[1, e.side.code(), 0, 0]);
            out.extend_from_slice(&e.firm.0.to_le_bytes());
            out.extend_from_slice(&e.broker.0.to_le_bytes());
            out.extend_from_slice(&e.instrument.0.to_le_bytes());
            out.extend_from_slice(&e.seq.to_le_bytes());
            out.extend_from_slice(&e.id.0.to_le_bytes());
            out.extend_from_slice(&e.price.to_le_bytes());
            out.extend_from_slice(&e.quantity.to_le_bytes());
            out.extend_from_slice(&e.rec.to_le_bytes());
            out.extend_from_slice(&e.created_at.to_le_bytes());
        }
        Event::Change(e) => {
            out.extend_from_slice(&[2, e.status.code(), 0, 0]);
            out.extend_from_slice(&[0; 12]);
            out.extend_from_slice(&e.seq.to_le_bytes());
            out.extend_from_slice(&e.id.0.to_le_bytes());
            out.extend_from_slice(&e.price.to_le_bytes());
            out.extend_from_slice(&e.quantity.to_le_bytes());
            out.extend_from_slice(&e.filled.to_le_bytes());
            out.extend_from_slice(&e.updated_at.to_le_bytes());
        }
    }
}

/// Appends a BATCH numbered `batch` (at most [`MAX_BATCH_EVENTS`] events: the
/// client library checks; more is refused by the server as malformed).
pub fn encode_batch(batch: u64, events: &[Event], out: &mut Vec<u8>) {
    out.reserve(LEN_BYTES + 1 + BATCH_HEAD + events.len() * EVENT_BYTES);
    let start = begin(out, Kind::Batch);
    out.extend_from_slice(&batch.to_le_bytes());
    out.extend_from_slice(&(events.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for event in events {
        encode_event(event, out);
    }
    finish(out, start);
}

/// Appends a READ numbered `request`.
pub fn encode_read(request: u64, read: &ReadRequest, out: &mut Vec<u8>) {
    let start = begin(out, Kind::Read);
    let (code, key) = filter_code(read.filter);
    out.extend_from_slice(&request.to_le_bytes());
    out.extend_from_slice(&read.cursor);
    out.push(code);
    out.extend_from_slice(&read.linger_us.to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&read.limit.to_le_bytes());
    out.extend_from_slice(&read.min_batch.to_le_bytes());
    out.extend_from_slice(&read.wait_ms.to_le_bytes());
    finish(out, start);
}

/// Appends a READV numbered `request`.
pub fn encode_read_vector(request: u64, read: &VectorRead, out: &mut Vec<u8>) {
    let start = begin(out, Kind::ReadV);
    let (code, key) = filter_code(read.filter);
    let cursor = read.cursor.as_bytes();
    out.extend_from_slice(&request.to_le_bytes());
    out.extend_from_slice(&[code, 0]);
    out.extend_from_slice(&(cursor.len() as u16).to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&read.limit.to_le_bytes());
    out.extend_from_slice(&read.min_batch.to_le_bytes());
    out.extend_from_slice(&read.wait_ms.to_le_bytes());
    out.extend_from_slice(&read.linger_us.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(cursor);
    finish(out, start);
}

/// Appends a FOLLOW.
pub fn encode_follow(follow: &Follow, out: &mut Vec<u8>) {
    let start = begin(out, Kind::Follow);
    out.extend_from_slice(&follow.shard.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&follow.max_orders.to_le_bytes());
    for n in [
        follow.after.seq,
        follow.after.rec,
        follow.known_floor.seq,
        follow.known_floor.rec,
    ] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&follow.heartbeat_ms.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    finish(out, start);
}

/// Appends a HEADERV.
pub fn encode_header_vector(header: &VectorHeader, out: &mut Vec<u8>) {
    let start = begin(out, Kind::HeaderV);
    let next = header.next.to_bytes();
    out.extend_from_slice(&header.request.to_le_bytes());
    out.extend_from_slice(&header.count.to_le_bytes());
    out.extend_from_slice(&(next.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&header.oldest_created_at.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&header.server_wait_us.to_le_bytes());
    out.extend_from_slice(&header.server_read_us.to_le_bytes());
    out.extend_from_slice(&next);
    finish(out, start);
}

/// Appends a REPLICATE of `orders` (`head.count` is taken from them).
pub fn encode_replicate(head: &ReplicateHead, orders: &[Order], out: &mut Vec<u8>) {
    out.reserve(LEN_BYTES + 1 + REPLICATE_HEAD + orders.len() * ORDER_BYTES);
    let start = begin(out, Kind::Replicate);
    out.extend_from_slice(&head.shard.to_le_bytes());
    out.extend_from_slice(&head.shards.to_le_bytes());
    out.extend_from_slice(&(orders.len() as u32).to_le_bytes());
    for n in [
        head.newest_seq,
        head.floor.seq,
        head.floor.rec,
        head.next.seq,
        head.next.rec,
    ] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.push(u8::from(head.complete));
    out.extend_from_slice(&[0; 7]);
    for order in orders {
        encode_order(order, out);
    }
    finish(out, start);
}

/// Appends a WELCOME.
pub fn encode_welcome(welcome: &Welcome, out: &mut Vec<u8>) {
    let start = begin(out, Kind::Welcome);
    let (code, firm) = match welcome.access {
        Access::Open => (0u8, 0u32),
        Access::Core => (1, 0),
        Access::Firm(f) => (2, f.0),
        Access::Reader => (3, 0),
    };
    out.extend_from_slice(&welcome.version.to_le_bytes());
    out.push(code);
    out.push(0);
    out.extend_from_slice(&firm.to_le_bytes());
    out.extend_from_slice(&welcome.marks.0.to_le_bytes());
    out.extend_from_slice(&welcome.marks.1.to_le_bytes());
    out.extend_from_slice(&welcome.max_batch_events.to_le_bytes());
    finish(out, start);
}

/// Appends an ACK.
pub fn encode_ack(ack: &Ack, out: &mut Vec<u8>) {
    let start = begin(out, Kind::Ack);
    out.extend_from_slice(&ack.batch.to_le_bytes());
    out.extend_from_slice(&ack.events.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&ack.position.seq.to_le_bytes());
    out.extend_from_slice(&ack.position.rec.to_le_bytes());
    finish(out, start);
}

/// Appends a HEADER.
pub fn encode_header(header: &ReadHeader, out: &mut Vec<u8>) {
    let start = begin(out, Kind::Header);
    out.extend_from_slice(&header.request.to_le_bytes());
    out.extend_from_slice(&header.next.to_bytes());
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&header.count.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&header.oldest_created_at.unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&header.server_wait_us.to_le_bytes());
    out.extend_from_slice(&header.server_read_us.to_le_bytes());
    finish(out, start);
}

/// Appends one order's 80 bytes.
pub fn encode_order(order: &Order, out: &mut Vec<u8>) {
    out.extend_from_slice(&order.id.0.to_le_bytes());
    out.extend_from_slice(&order.firm.0.to_le_bytes());
    out.extend_from_slice(&order.broker.0.to_le_bytes());
    out.extend_from_slice(&order.instrument.0.to_le_bytes());
    out.extend_from_slice(&[order.side.code(), order.status.code(), 0, 0]);
    out.extend_from_slice(&order.price.to_le_bytes());
    out.extend_from_slice(&order.quantity.to_le_bytes());
    out.extend_from_slice(&order.filled.to_le_bytes());
    out.extend_from_slice(&order.created_at.to_le_bytes());
    out.extend_from_slice(&order.updated_at.to_le_bytes());
    out.extend_from_slice(&order.seq.to_le_bytes());
    out.extend_from_slice(&order.rec.to_le_bytes());
}

/// Appends an ORDERS frame.
pub fn encode_orders(orders: &[Order], out: &mut Vec<u8>) {
    out.reserve(LEN_BYTES + 1 + orders.len() * ORDER_BYTES);
    let start = begin(out, Kind::Orders);
    for order in orders {
        encode_order(order, out);
    }
    finish(out, start);
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends an ERROR (a field over 255 bytes or a message over 65,535 is cut).
pub fn encode_error(error: &ServerError, out: &mut Vec<u8>) {
    let field = cut(&error.field, usize::from(u8::MAX));
    let message = cut(&error.message, usize::from(u16::MAX));
    let start = begin(out, Kind::Error);
    // A one-shard cursor fits the fixed field (what a READ's client expects); a
    // longer one follows the message, its length in the reserved bytes.
    let vector = error
        .oldest
        .filter(|cursor| cursor.shards() > 1)
        .map(|cursor| cursor.to_bytes());
    out.push(error.code.code());
    out.push(0);
    out.extend_from_slice(&(vector.map_or(0, |v| v.len()) as u16).to_le_bytes());
    out.extend_from_slice(&error.index.unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&error.frame.to_le_bytes());
    out.extend_from_slice(&error.id.to_le_bytes());
    match error.oldest {
        Some(cursor) if vector.is_none() => out.extend_from_slice(&cursor.position(0).to_bytes()),
        _ => out.extend_from_slice(&[0; CURSOR_BYTES]),
    }
    out.push(field.len() as u8);
    out.extend_from_slice(&(message.len() as u16).to_le_bytes());
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(message.as_bytes());
    if let Some(vector) = vector {
        out.extend_from_slice(&vector);
    }
    finish(out, start);
}

/// Splits the first whole frame off `bytes`: its kind byte, body and total size, or
/// `None` if `bytes` does not hold a whole frame yet. `max_len` is the largest length
/// accepted; `frame` names the frame in errors.
pub fn split_frame(
    frame: u64,
    bytes: &[u8],
    max_len: u32,
) -> Result<Option<(u8, &[u8], usize)>, FrameError> {
    if bytes.len() < LEN_BYTES {
        return Ok(None);
    }
    let len = check_len(frame, u32_at(bytes, 0), max_len)?;
    let total = LEN_BYTES + len;
    if bytes.len() < total {
        return Ok(None);
    }
    Ok(Some((
        bytes[LEN_BYTES],
        &bytes[LEN_BYTES + 1..total],
        total,
    )))
}

/// Checks a frame's declared length: 1 (the kind byte) to `max_len`.
pub(crate) fn check_len(frame: u64, len: u32, max_len: u32) -> Result<usize, FrameError> {
    if len == 0 {
        return Err(FrameError::new(
            frame,
            None,
            "length",
            format!("expected 1 to {max_len} bytes (a kind byte and its body), got 0"),
        ));
    }
    if len > max_len {
        return Err(FrameError::new(
            frame,
            None,
            "length",
            format!("expected at most {max_len} bytes, got {len}"),
        ));
    }
    Ok(len as usize)
}
