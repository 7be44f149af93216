//! The JSON shapes of the feed's requests and answers.
//!
//! Ids, prices, quantities and times are JSON integers: times are nanoseconds since the
//! Unix epoch (around 1.7e18, beyond the 2^53 a JavaScript `number` holds exactly, so
//! such clients must parse them as big integers).

use serde::{Deserialize, Serialize};
use tranche_feed::{
    BrokerId, Event, FirmId, InstrumentId, NewOrder, Order, OrderChange, OrderId, Side, Status,
};
use utoipa::ToSchema;

/// `POST /v1/feed/events`: one batch, applied all-or-nothing.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventBatch {
    /// The events, in the core's order.
    pub events: Vec<WireEvent>,
}

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// A new order: `seq, rec, id, firm, broker, instrument, side, price, quantity,
    /// created_at`.
    Insert,
    /// A change to a known order: `seq, id, price, quantity, filled, status,
    /// updated_at`.
    Change,
}

/// One event as sent: `type` says which fields it must have (see [`EventType`]). The
/// fields are all optional here so that a missing or misplaced one is reported by
/// name with the event's index, like the store's own checks.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct WireEvent {
    #[serde(rename = "type")]
    pub kind: Option<EventType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rec: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firm: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instrument: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side: Option<WireSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filled: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<WireStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
}

/// A field an event must have and lacks, or has and must not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn need<T>(value: Option<T>, field: &'static str) -> Result<T, FieldError> {
    value.ok_or_else(|| FieldError {
        field,
        problem: "missing".into(),
    })
}

fn none<T>(value: Option<T>, field: &'static str, kind: &str) -> Result<(), FieldError> {
    match value {
        None => Ok(()),
        Some(_) => Err(FieldError {
            field,
            problem: format!("not a field of an {kind} event"),
        }),
    }
}

impl WireEvent {
    /// The store's event, or the field that is missing or misplaced.
    pub fn to_event(&self) -> Result<Event, FieldError> {
        match need(self.kind, "type")? {
            EventType::Insert => {
                none(self.filled, "filled", "insert")?;
                none(self.status, "status", "insert")?;
                none(self.updated_at, "updated_at", "insert")?;
                Ok(Event::Insert(NewOrder {
                    seq: need(self.seq, "seq")?,
                    rec: need(self.rec, "rec")?,
                    id: OrderId(need(self.id, "id")?),
                    firm: FirmId(need(self.firm, "firm")?),
                    broker: BrokerId(need(self.broker, "broker")?),
                    instrument: InstrumentId(need(self.instrument, "instrument")?),
                    side: need(self.side, "side")?.into(),
                    price: need(self.price, "price")?,
                    quantity: need(self.quantity, "quantity")?,
                    created_at: need(self.created_at, "created_at")?,
                }))
            }
            EventType::Change => {
                none(self.rec, "rec", "change")?;
                none(self.firm, "firm", "change")?;
                none(self.broker, "broker", "change")?;
                none(self.instrument, "instrument", "change")?;
                none(self.side, "side", "change")?;
                none(self.created_at, "created_at", "change")?;
                Ok(Event::Change(OrderChange {
                    seq: need(self.seq, "seq")?,
                    id: OrderId(need(self.id, "id")?),
                    price: need(self.price, "price")?,
                    quantity: need(self.quantity, "quantity")?,
                    filled: need(self.filled, "filled")?,
                    status: need(self.status, "status")?.into(),
                    updated_at: need(self.updated_at, "updated_at")?,
                }))
            }
        }
    }
}

/// Buy or sell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum WireSide {
    Buy,
    Sell,
}

impl From<WireSide> for Side {
    fn from(side: WireSide) -> Side {
        match side {
            WireSide::Buy => Side::Buy,
            WireSide::Sell => Side::Sell,
        }
    }
}

impl From<Side> for WireSide {
    fn from(side: Side) -> WireSide {
        match side {
            Side::Buy => WireSide::Buy,
            Side::Sell => WireSide::Sell,
        }
    }
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum WireStatus {
    New,
    Amended,
    PartiallyFilled,
    Filled,
    Cancelled,
    Rejected,
    Expired,
}

impl From<WireStatus> for Status {
    fn from(status: WireStatus) -> Status {
        match status {
            WireStatus::New => Status::New,
            WireStatus::Amended => Status::Amended,
            WireStatus::PartiallyFilled => Status::PartiallyFilled,
            WireStatus::Filled => Status::Filled,
            WireStatus::Cancelled => Status::Cancelled,
            WireStatus::Rejected => Status::Rejected,
            WireStatus::Expired => Status::Expired,
        }
    }
}

impl From<Status> for WireStatus {
    fn from(status: Status) -> WireStatus {
        match status {
            Status::New => WireStatus::New,
            Status::Amended => WireStatus::Amended,
            Status::PartiallyFilled => WireStatus::PartiallyFilled,
            Status::Filled => WireStatus::Filled,
            Status::Cancelled => WireStatus::Cancelled,
            Status::Rejected => WireStatus::Rejected,
            Status::Expired => WireStatus::Expired,
        }
    }
}

/// An order at its latest version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[allow(missing_docs)]
pub struct WireOrder {
    pub id: u64,
    pub firm: u32,
    pub broker: u32,
    pub instrument: u32,
    pub side: WireSide,
    pub price: i64,
    pub quantity: u64,
    pub filled: u64,
    pub status: WireStatus,
    pub created_at: u64,
    pub updated_at: u64,
    pub seq: u64,
    pub rec: u64,
}

impl From<&Order> for WireOrder {
    fn from(o: &Order) -> WireOrder {
        WireOrder {
            id: o.id.0,
            firm: o.firm.0,
            broker: o.broker.0,
            instrument: o.instrument.0,
            side: o.side.into(),
            price: o.price,
            quantity: o.quantity,
            filled: o.filled,
            status: o.status.into(),
            created_at: o.created_at,
            updated_at: o.updated_at,
            seq: o.seq,
            rec: o.rec,
        }
    }
}

/// The answer to an applied batch.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct Applied {
    /// Events applied (the whole batch).
    pub applied: usize,
    /// The position of the batch's last event (the newest position for an empty
    /// batch), as a cursor.
    pub position: String,
}

/// One answer of `GET /v1/feed/orders`: the header fields first, then the orders, so
/// a client streaming the body knows the batch before it parses it.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct OrdersPage {
    /// Where to read on from (the cursor given when `orders` is empty).
    pub next_cursor: String,
    /// `orders.len()`.
    pub count: usize,
    /// The earliest `created_at` of the orders (ns), `null` when there are none: how
    /// stale the oldest order of the page is.
    pub oldest_created_at: Option<u64>,
    /// Microseconds spent waiting for `min_batch` orders.
    pub server_wait_us: u64,
    /// Microseconds spent reading the orders out of the store.
    pub server_read_us: u64,
    /// The orders after the cursor, in feed order, each once at its latest version.
    pub orders: Vec<WireOrder>,
}

/// `GET /v1/feed/status`: the server's shards, and on a replica its lag. A member
/// firm's token gets its own view only: `firm`, its cursor as `newest_cursor`, and no
/// `shards` or `replica` (the feed's counters are not one member's business).
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct StatusBody {
    /// `primary` (takes events) or `replica` (follows a primary; unfiltered reads).
    pub role: String,
    /// The cursor after everything held now (every shard's newest position): a
    /// client that wants only what changes from now on starts here. For a firm's
    /// token, the cursor after that firm's newest order in each shard instead: read
    /// with the firm's filter it gives the same, and names no other firm's position.
    pub newest_cursor: String,
    /// Each shard's marks, shard 0 first; empty for a firm's token.
    pub shards: Vec<ShardStatus>,
    /// On a replica: how far behind its primary it is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replica: Option<ReplicaStatus>,
    /// For a firm's token: the firm's own counters.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub firm: Option<FirmStatus>,
}

/// A member firm's own view of the feed.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct FirmStatus {
    /// The firm the token reads.
    pub firm: u32,
    /// The firm's orders held, over every shard.
    pub orders: usize,
}

/// One shard's marks.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ShardStatus {
    /// The shard.
    pub shard: usize,
    /// The highest `seq` applied (a core of this shard resumes after it).
    pub seq: u64,
    /// The highest `rec` applied.
    pub rec: u64,
    /// Orders held.
    pub orders: usize,
}

/// A replica's lag behind its primary.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ReplicaStatus {
    /// The primary's address.
    pub primary: String,
    /// Whether every shard follows the primary now.
    pub connected: bool,
    /// The primary's events not applied here, over all shards.
    pub seqs_behind: u64,
    /// The largest lag of any shard, in seconds.
    pub seconds_behind: f64,
    /// Per shard.
    pub shards: Vec<ReplicaShardStatus>,
}

/// One shard of a replica behind its primary.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ReplicaShardStatus {
    /// The shard.
    pub shard: usize,
    /// The newest `seq` the primary last said it had.
    pub primary_seq: u64,
    /// The newest `seq` applied here.
    pub applied_seq: u64,
    /// `primary_seq - applied_seq`.
    pub seqs_behind: u64,
    /// How long the oldest change not applied here has been known (0 when caught
    /// up); while disconnected, the time since the primary was last heard.
    pub seconds_behind: f64,
    /// Whether it follows the primary now.
    pub connected: bool,
    /// Times it started over from the primary's beginning.
    pub resyncs: u64,
}

/// An error answer: `{"error": {...}}`.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, for programs: `bad_batch`, `bad_request`, `bad_cursor`,
    /// `cursor_too_old`, `cursor_ahead`, `store_failed`, `shutting_down`,
    /// `unfiltered_only` (a filtered read of a replica), `replica_read_only` (events
    /// posted to a replica).
    pub code: String,
    /// For people.
    pub message: String,
    /// A bad batch: the index of the event at fault (0-based).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<usize>,
    /// A bad batch or request: the field at fault.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub field: Option<String>,
    /// `cursor_too_old`: the oldest cursor served (resume from it, accepting the gap,
    /// or re-read everything without a cursor).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub oldest: Option<String>,
}
