//! What the store holds and what a trading core sends it: orders, events, filters.

use crate::cursor::Cursor;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// An order's id, unique within a store (assigned by the trading core).
    OrderId(u64)
);
id_type!(
    /// A member firm of the exchange.
    FirmId(u32)
);
id_type!(
    /// A broker account (within a firm) that placed the order.
    BrokerId(u32)
);
id_type!(
    /// A traded instrument.
    InstrumentId(u32)
);

/// Buy or sell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// A bid.
    Buy,
    /// An offer.
    Sell,
}

impl Side {
    /// The side's one-byte code on disk and on the wire (1 buy, 2 sell).
    pub fn code(self) -> u8 {
        match self {
            Side::Buy => 1,
            Side::Sell => 2,
        }
    }

    /// The side with this code, if any.
    pub fn from_code(code: u8) -> Option<Side> {
        match code {
            1 => Some(Side::Buy),
            2 => Some(Side::Sell),
            _ => None,
        }
    }
}

/// Where an order stands. `Filled`, `Cancelled`, `Rejected` and `Expired` are terminal:
/// no event may change an order after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Accepted, nothing filled, never amended (only an insert sets it).
    New,
    /// Price or quantity changed by the owner, nothing filled.
    Amended,
    /// Some but not all of the quantity filled.
    PartiallyFilled,
    /// The whole quantity filled (terminal).
    Filled,
    /// Cancelled by the owner or the exchange (terminal; a partial fill may remain).
    Cancelled,
    /// Refused by the core after acceptance (terminal).
    Rejected,
    /// Its time in force ran out (terminal).
    Expired,
}

impl Status {
    /// The status's one-byte code on disk and on the wire.
    pub fn code(self) -> u8 {
        match self {
            Status::New => 1,
            Status::Amended => 2,
            Status::PartiallyFilled => 3,
            Status::Filled => 4,
            Status::Cancelled => 5,
            Status::Rejected => 6,
            Status::Expired => 7,
        }
    }

    /// The status with this code, if any.
    pub fn from_code(code: u8) -> Option<Status> {
        Some(match code {
            1 => Status::New,
            2 => Status::Amended,
            3 => Status::PartiallyFilled,
            4 => Status::Filled,
            5 => Status::Cancelled,
            6 => Status::Rejected,
            7 => Status::Expired,
            _ => return None,
        })
    }

    /// Whether no event may change the order any more.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Filled | Status::Cancelled | Status::Rejected | Status::Expired
        )
    }
}

/// The current state of one order, as the store keeps and delivers it.
///
/// Prices are integer ticks of the instrument (negative prices exist: spreads,
/// some futures); times are nanoseconds since the Unix epoch, stamped by the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Order {
    /// The order's id.
    pub id: OrderId,
    /// The firm it belongs to (never changes).
    pub firm: FirmId,
    /// The broker account that placed it (never changes).
    pub broker: BrokerId,
    /// What it trades (never changes).
    pub instrument: InstrumentId,
    /// Buy or sell (never changes).
    pub side: Side,
    /// Limit price in ticks.
    pub price: i64,
    /// Total quantity (≥ 1).
    pub quantity: u64,
    /// Quantity filled so far (≤ `quantity`, never decreases).
    pub filled: u64,
    /// Where it stands.
    pub status: Status,
    /// When the core accepted it (never changes).
    pub created_at: u64,
    /// When the core last changed it (= `created_at` for a new order).
    pub updated_at: u64,
    /// The core's sequence number of its latest change.
    pub seq: u64,
    /// The core's record number, given when it was inserted (never changes).
    pub rec: u64,
}

impl Order {
    /// Where the order stands in the feed: its latest `(seq, rec)`. A reader whose
    /// cursor is at or past this position has seen this version.
    pub fn position(&self) -> Cursor {
        Cursor {
            seq: self.seq,
            rec: self.rec,
        }
    }
}

/// A new order accepted by the core: it starts as [`Status::New`] with nothing filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOrder {
    /// The core's sequence number of this event (grows with every event).
    pub seq: u64,
    /// The core's record number (grows with every insert).
    pub rec: u64,
    /// The new order's id (must not be in the store yet).
    pub id: OrderId,
    /// Its firm.
    pub firm: FirmId,
    /// Its broker account.
    pub broker: BrokerId,
    /// Its instrument.
    pub instrument: InstrumentId,
    /// Buy or sell.
    pub side: Side,
    /// Limit price in ticks.
    pub price: i64,
    /// Quantity (≥ 1).
    pub quantity: u64,
    /// When the core accepted it (nanoseconds, ≥ 1).
    pub created_at: u64,
}

/// A change to a known order: an amendment, a fill, a cancellation…; it carries the
/// order's mutable fields as they now are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderChange {
    /// The core's sequence number of this event (grows with every event).
    pub seq: u64,
    /// The order changed (must be in the store, or inserted earlier in the batch).
    pub id: OrderId,
    /// Limit price in ticks now.
    pub price: i64,
    /// Total quantity now (≥ 1, ≥ `filled`).
    pub quantity: u64,
    /// Quantity filled so far (never decreases).
    pub filled: u64,
    /// The new status (never `New`).
    pub status: Status,
    /// When the core made the change (never before the previous change).
    pub updated_at: u64,
}

/// One event from a trading core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new order.
    Insert(NewOrder),
    /// A change to an order already known.
    Change(OrderChange),
}

impl Event {
    /// The event's sequence number.
    pub fn seq(&self) -> u64 {
        match self {
            Event::Insert(e) => e.seq,
            Event::Change(e) => e.seq,
        }
    }

    /// The order the event is about.
    pub fn order_id(&self) -> OrderId {
        match self {
            Event::Insert(e) => e.id,
            Event::Change(e) => e.id,
        }
    }
}

/// Which orders a reader wants: all of them, or those of one firm, broker account or
/// instrument. Each filter value has its own index and its own wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Filter {
    /// Every order.
    All,
    /// The orders of one firm.
    Firm(FirmId),
    /// The orders of one broker account.
    Broker(BrokerId),
    /// The orders on one instrument.
    Instrument(InstrumentId),
}

impl Filter {
    /// Whether `order` passes the filter.
    pub fn matches(&self, order: &Order) -> bool {
        match *self {
            Filter::All => true,
            Filter::Firm(f) => order.firm == f,
            Filter::Broker(b) => order.broker == b,
            Filter::Instrument(i) => order.instrument == i,
        }
    }
}
