//! The book model: a trading core's stream of events, deterministic from a seed.
//!
//! Each shard's [`Book`] numbers its own events (`seq` grows by one per event, `rec` by
//! one per insert, both from 1) and its own orders (ids carry the shard in their top
//! bits, so shards never collide). What happens next depends only on the seed, the
//! shard and how many events came before: never on the time or on how events were
//! batched. That is what lets a checker replay a run from its seed and its event count
//! ([`crate::Expected::replay`]) instead of shipping the final state.

use serde::{Deserialize, Serialize};
use tranche_feed::{
    BrokerId, Event, FirmId, InstrumentId, NewOrder, Order, OrderChange, OrderId, Side, Status,
};

/// The shape of the book every shard of a run generates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BookConfig {
    /// Member firms, ids `1..=firms`; each filtered client follows one.
    pub firms: u32,
    /// Broker accounts per firm, ids `firm * 1000 + 1..=brokers_per_firm` (at most 999).
    pub brokers_per_firm: u32,
    /// Instruments, ids `1..=instruments`.
    pub instruments: u32,
    /// How many of them are hot: ids `1..=hot_instruments`.
    pub hot_instruments: u32,
    /// Share of new orders on a hot instrument outside bursts.
    pub hot_share: f64,
    /// A burst begins every this many events of a shard (0: no bursts), on one hot
    /// instrument after the other.
    pub burst_every: u64,
    /// A burst lasts this many events.
    pub burst_length: u64,
    /// During a burst, this share of new orders is on the burst's instrument, and this
    /// share of changes goes to the newest open orders (mostly the burst's).
    pub burst_share: f64,
    /// Share of new orders that are immediate-or-cancel: filled or cancelled by the
    /// shard's very next event.
    pub ioc_share: f64,
    /// About how many open orders a shard keeps: below it, new orders come more often
    /// than changes; above it, less often.
    pub resting_orders: u32,
}

impl Default for BookConfig {
    fn default() -> BookConfig {
        BookConfig {
            firms: 20,
            brokers_per_firm: 5,
            instruments: 500,
            hot_instruments: 5,
            hot_share: 0.3,
            burst_every: 50_000,
            burst_length: 5_000,
            burst_share: 0.8,
            ioc_share: 0.1,
            resting_orders: 5_000,
        }
    }
}

/// A [`BookConfig`] that cannot generate a book.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("book: {field}: {problem}")]
pub struct ConfigError {
    /// The field at fault.
    pub field: &'static str,
    /// Expected what, got what.
    pub problem: String,
}

impl BookConfig {
    /// Checks every field, the first problem found as an error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let fail = |field, problem: String| Err(ConfigError { field, problem });
        if self.firms == 0 {
            return fail("firms", "expected at least 1, got 0".into());
        }
        if !(1..=999).contains(&self.brokers_per_firm) {
            return fail(
                "brokers_per_firm",
                format!("expected 1 to 999, got {}", self.brokers_per_firm),
            );
        }
        if self.instruments == 0 {
            return fail("instruments", "expected at least 1, got 0".into());
        }
        if self.hot_instruments > self.instruments {
            return fail(
                "hot_instruments",
                format!(
                    "expected at most the {} instruments, got {}",
                    self.instruments, self.hot_instruments
                ),
            );
        }
        for (field, share) in [
            ("hot_share", self.hot_share),
            ("burst_share", self.burst_share),
            ("ioc_share", self.ioc_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return fail(field, format!("expected a share from 0 to 1, got {share}"));
            }
        }
        if self.burst_every > 0 && self.burst_length > self.burst_every {
            return fail(
                "burst_length",
                format!(
                    "expected at most burst_every ({}), got {}",
                    self.burst_every, self.burst_length
                ),
            );
        }
        if self.resting_orders == 0 {
            return fail("resting_orders", "expected at least 1, got 0".into());
        }
        Ok(())
    }
}

/// What an event does to its order (the event itself does not say, e.g. whether an
/// insert is immediate-or-cancel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// A new order that rests in the book.
    Insert,
    /// A new immediate-or-cancel order: the shard's next event ends it ([`Kind::IocEnd`]).
    InsertIoc,
    /// The owner changed its price (and maybe its quantity).
    Amend,
    /// Part of it filled.
    Fill,
    /// The rest of it filled: the order is done.
    FinalFill,
    /// The owner cancelled it (a partial fill may remain).
    Cancel,
    /// Its time in force ran out.
    Expire,
    /// An immediate-or-cancel order filled in full or cancelled (maybe partly filled),
    /// one event after it was inserted.
    IocEnd,
}

impl Kind {
    /// Every kind, in [`Kind::index`] order.
    pub const ALL: [Kind; 8] = [
        Kind::Insert,
        Kind::InsertIoc,
        Kind::Amend,
        Kind::Fill,
        Kind::FinalFill,
        Kind::Cancel,
        Kind::Expire,
        Kind::IocEnd,
    ];

    /// Its place in [`Kind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in reports (`insert`, `insert_ioc`, `amend`…).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Insert => "insert",
            Kind::InsertIoc => "insert_ioc",
            Kind::Amend => "amend",
            Kind::Fill => "fill",
            Kind::FinalFill => "final_fill",
            Kind::Cancel => "cancel",
            Kind::Expire => "expire",
            Kind::IocEnd => "ioc_end",
        }
    }
}

/// One generated event with what it does and the order's version it produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The event to send.
    pub event: Event,
    /// What it does.
    pub kind: Kind,
    /// The order as the store will hold it after this event.
    pub order: Order,
}

/// How a resting order's life ends once its amendments and partial fills are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Fill,
    Cancel,
    Expire,
    /// Left open: no more events.
    Rest,
}

#[derive(Clone, Copy, Debug)]
struct Live {
    order: Order,
    /// Amendments and partial fills still to come.
    left: u8,
    end: End,
}

/// The orders ids of shard `shard` carry it in their top 24 bits: `shard << 40 | n`.
pub const SHARD_SHIFT: u32 = 40;

/// The id of shard `shard`'s `n`th order (from 1).
pub fn order_id(shard: u32, n: u64) -> OrderId {
    OrderId((u64::from(shard) << SHARD_SHIFT) | n)
}

/// The shard whose core made order `id` (its id's top bits, as [`order_id`] numbers
/// them): how a checker reading merged shards tells a row's shard.
pub fn shard_of(id: OrderId) -> usize {
    (id.0 >> SHARD_SHIFT) as usize
}

/// One shard's book: call [`Book::next`] for each event.
pub struct Book {
    config: BookConfig,
    shard: u32,
    rng: fastrand::Rng,
    seq: u64,
    rec: u64,
    last_stamp: u64,
    live: Vec<Live>,
    /// The immediate-or-cancel order the next event ends.
    ioc: Option<Order>,
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Book")
            .field("shard", &self.shard)
            .field("seq", &self.seq)
            .field("rec", &self.rec)
            .field("open", &self.live.len())
            .finish()
    }
}

/// How many of the newest open orders a burst's changes go to.
const BURST_WINDOW: usize = 64;

impl Book {
    /// Shard `shard`'s book of a run seeded `seed`. The config must be valid
    /// ([`BookConfig::validate`]).
    pub fn new(config: BookConfig, seed: u64, shard: u32) -> Book {
        debug_assert_eq!(config.validate(), Ok(()));
        let mixed = seed ^ (u64::from(shard) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Book {
            config,
            shard,
            rng: fastrand::Rng::with_seed(mixed),
            seq: 0,
            rec: 0,
            last_stamp: 1,
            live: Vec::new(),
            ioc: None,
        }
    }

    /// The shard.
    pub fn shard(&self) -> u32 {
        self.shard
    }

    /// The `seq` of the last event generated (0 before the first): also how many.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The `rec` of the last insert (0 before the first).
    pub fn rec(&self) -> u64 {
        self.rec
    }

    /// Open orders that more events will change.
    pub fn open(&self) -> usize {
        self.live.len() + usize::from(self.ioc.is_some())
    }

    /// Whether the last event inserted an immediate-or-cancel order, which the next
    /// one ends: a core stops only when this is false, so every IOC order lives for
    /// exactly one event.
    pub fn ioc_pending(&self) -> bool {
        self.ioc.is_some()
    }

    /// The next event, stamped `stamp` (ns since the epoch; the shard's stamps never go
    /// back, so a stamp earlier than the last one is raised to it).
    pub fn next(&mut self, stamp: u64) -> Step {
        let stamp = stamp.max(self.last_stamp);
        self.last_stamp = stamp;
        self.seq += 1;
        if let Some(order) = self.ioc.take() {
            return self.end_ioc(order, stamp);
        }
        let burst = self.burst_instrument();
        let open = self.live.len();
        let insert_share = if open < self.config.resting_orders as usize {
            0.6
        } else {
            0.25
        };
        if open == 0 || self.rng.f64() < insert_share {
            return self.insert(burst, stamp);
        }
        let index = if burst.is_some() && self.rng.f64() < self.config.burst_share {
            open - 1 - self.rng.usize(..open.min(BURST_WINDOW))
        } else {
            self.rng.usize(..open)
        };
        self.advance(index, stamp)
    }

    /// The instrument of the burst under way at the next event, if one is.
    fn burst_instrument(&self) -> Option<InstrumentId> {
        let every = self.config.burst_every;
        if every == 0 {
            return None;
        }
        let index = self.seq - 1;
        if index % every >= self.config.burst_length {
            return None;
        }
        let pool = match self.config.hot_instruments {
            0 => self.config.instruments,
            hot => hot,
        };
        Some(InstrumentId(1 + ((index / every) % u64::from(pool)) as u32))
    }

    fn insert(&mut self, burst: Option<InstrumentId>, stamp: u64) -> Step {
        let c = &self.config;
        let instrument = match burst {
            Some(id) if self.rng.f64() < c.burst_share => id,
            _ if c.hot_instruments > 0 && self.rng.f64() < c.hot_share => {
                InstrumentId(1 + self.rng.u32(..c.hot_instruments))
            }
            _ if c.instruments > c.hot_instruments => InstrumentId(
                c.hot_instruments + 1 + self.rng.u32(..c.instruments - c.hot_instruments),
            ),
            _ => InstrumentId(1 + self.rng.u32(..c.instruments)),
        };
        let firm = 1 + self.rng.u32(..c.firms);
        let broker = firm * 1000 + 1 + self.rng.u32(..c.brokers_per_firm);
        let mid = 1_000 + i64::from(instrument.0).wrapping_mul(7_919) % 99_000;
        let price = mid + self.rng.i64(-20..=20);
        let quantity = 100 * self.rng.u64(1..=50);
        let side = if self.rng.bool() {
            Side::Buy
        } else {
            Side::Sell
        };
        let ioc = self.rng.f64() < c.ioc_share;
        self.rec += 1;
        let new = NewOrder {
            seq: self.seq,
            rec: self.rec,
            id: order_id(self.shard, self.rec),
            firm: FirmId(firm),
            broker: BrokerId(broker),
            instrument,
            side,
            price,
            quantity,
            created_at: stamp,
        };
        let order = Order {
            id: new.id,
            firm: new.firm,
            broker: new.broker,
            instrument,
            side,
            price,
            quantity,
            filled: 0,
            status: Status::New,
            created_at: stamp,
            updated_at: stamp,
            seq: self.seq,
            rec: self.rec,
        };
        let kind = if ioc {
            self.ioc = Some(order);
            Kind::InsertIoc
        } else {
            // Most orders are amended or partly filled one to three times.
            let left = match self.rng.u32(..100) {
                0..10 => 0,
                10..45 => 1,
                45..75 => 2,
                _ => 3,
            };
            let end = match self.rng.u32(..100) {
                0..40 => End::Fill,
                40..75 => End::Cancel,
                75..80 => End::Expire,
                _ => End::Rest,
            };
            if left > 0 || end != End::Rest {
                self.live.push(Live { order, left, end });
            }
            Kind::Insert
        };
        Step {
            event: Event::Insert(new),
            kind,
            order,
        }
    }

    fn end_ioc(&mut self, mut order: Order, stamp: u64) -> Step {
        match self.rng.u32(..10) {
            0..3 => {
                order.filled = order.quantity;
                order.status = Status::Filled;
            }
            3..7 => {
                order.filled = self.rng.u64(1..order.quantity);
                order.status = Status::Cancelled;
            }
            _ => order.status = Status::Cancelled,
        }
        self.changed(order, stamp, Kind::IocEnd)
    }

    fn advance(&mut self, index: usize, stamp: u64) -> Step {
        let live = self.live[index];
        let mut order = live.order;
        let remaining = order.quantity - order.filled;
        let kind = if live.left > 0 {
            // A partial fill needs at least 2 left to fill; otherwise an amendment.
            if remaining >= 2 && self.rng.u32(..100) < 65 {
                order.filled += self.rng.u64(1..remaining);
                Kind::Fill
            } else {
                order.price += self.rng.i64(1..=5) * if self.rng.bool() { 1 } else { -1 };
                if self.rng.u32(..100) < 30 {
                    order.quantity = self.rng.u64(order.filled + 1..=order.quantity * 2);
                }
                Kind::Amend
            }
        } else {
            match live.end {
                End::Fill => {
                    order.filled = order.quantity;
                    Kind::FinalFill
                }
                End::Cancel => Kind::Cancel,
                End::Expire => Kind::Expire,
                End::Rest => unreachable!("a resting order leaves the live set at its last change"),
            }
        };
        order.status = match kind {
            Kind::FinalFill => Status::Filled,
            Kind::Cancel => Status::Cancelled,
            Kind::Expire => Status::Expired,
            _ if order.filled == 0 => Status::Amended,
            _ => Status::PartiallyFilled,
        };
        // A resting order leaves the live set with its last change.
        let done = live.left == 0 || (live.left == 1 && live.end == End::Rest);
        let step = self.changed(order, stamp, kind);
        if done {
            self.live.swap_remove(index);
        } else {
            let entry = &mut self.live[index];
            entry.left -= 1;
            entry.order = step.order;
        }
        step
    }

    /// The change event taking `order` (its new mutable fields set) to the current seq.
    fn changed(&self, mut order: Order, stamp: u64, kind: Kind) -> Step {
        order.seq = self.seq;
        order.updated_at = stamp;
        Step {
            event: Event::Change(OrderChange {
                seq: self.seq,
                id: order.id,
                price: order.price,
                quantity: order.quantity,
                filled: order.filled,
                status: order.status,
                updated_at: stamp,
            }),
            kind,
            order,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn run(book: &mut Book, events: u64) -> Vec<Step> {
        (1..=events).map(|i| book.next(1_000 + i)).collect()
    }

    #[test]
    fn the_event_mix_is_within_bounds() {
        let config = BookConfig::default();
        let mut book = Book::new(config.clone(), 7, 0);
        let steps = run(&mut book, 200_000);
        let mut kinds: HashMap<Kind, u64> = HashMap::new();
        // Per order: amendments and partial fills, and whether it was IOC.
        let mut touches: HashMap<OrderId, (u32, bool, u64)> = HashMap::new();
        for step in &steps {
            *kinds.entry(step.kind).or_default() += 1;
            let entry = touches.entry(step.order.id).or_insert((
                0,
                step.kind == Kind::InsertIoc,
                step.order.seq,
            ));
            if matches!(step.kind, Kind::Amend | Kind::Fill) {
                entry.0 += 1;
            }
        }
        let n = |k: Kind| kinds.get(&k).copied().unwrap_or(0) as f64;
        let inserts = n(Kind::Insert) + n(Kind::InsertIoc);
        let share = inserts / steps.len() as f64;
        assert!((0.25..0.5).contains(&share), "inserts {share}");
        let ioc = n(Kind::InsertIoc) / inserts;
        assert!((0.08..0.12).contains(&ioc), "IOC share {ioc}");
        assert_eq!(n(Kind::InsertIoc), n(Kind::IocEnd));
        // Most orders are amended or filled one to three times, none more.
        let settled: Vec<u32> = touches
            .values()
            .filter(|(_, ioc, seq)| !ioc && *seq < 100_000)
            .map(|(t, _, _)| *t)
            .collect();
        assert!(settled.iter().all(|&t| t <= 3));
        let one_to_three =
            settled.iter().filter(|&&t| (1..=3).contains(&t)).count() as f64 / settled.len() as f64;
        assert!(
            (0.8..0.95).contains(&one_to_three),
            "1-3 touches {one_to_three}"
        );
        let ends = n(Kind::FinalFill) + n(Kind::Cancel) + n(Kind::Expire);
        let cancels = n(Kind::Cancel) / ends;
        assert!((0.35..0.55).contains(&cancels), "cancels {cancels}");
        assert!(n(Kind::Expire) > 0.0 && n(Kind::Amend) > 0.0 && n(Kind::Fill) > 0.0);
        // Hot instruments take a large share of new orders…
        let hot = steps
            .iter()
            .filter(|s| matches!(s.kind, Kind::Insert | Kind::InsertIoc))
            .filter(|s| s.order.instrument.0 <= config.hot_instruments)
            .count() as f64
            / inserts;
        assert!((0.3..0.45).contains(&hot), "hot instruments {hot}");
        // …and during a burst most events are on the burst's instrument.
        let (mut on, mut all) = (0, 0);
        for step in &steps {
            let index = step.order.seq - 1;
            if index % config.burst_every < config.burst_length {
                let burst = 1 + (index / config.burst_every) % u64::from(config.hot_instruments);
                all += 1;
                on += u64::from(u64::from(step.order.instrument.0) == burst);
            }
        }
        let burst = on as f64 / all as f64;
        assert!(burst > 0.5, "burst share {burst}");
        // The book stays about its resting size.
        assert!(book.open() < 2 * config.resting_orders as usize, "{book:?}");
    }

    #[test]
    fn an_ioc_order_lives_for_exactly_one_event() {
        let mut book = Book::new(BookConfig::default(), 3, 1);
        let steps = run(&mut book, 50_000);
        let mut iocs = 0;
        let mut ended: HashMap<OrderId, u64> = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            if step.kind == Kind::InsertIoc {
                iocs += 1;
                let next = &steps[i + 1];
                assert_eq!(next.kind, Kind::IocEnd, "after seq {}", step.order.seq);
                assert_eq!(next.order.id, step.order.id);
                assert_eq!(next.order.seq, step.order.seq + 1);
                assert!(next.order.status.is_terminal(), "{next:?}");
                ended.insert(step.order.id, next.order.seq);
            }
            if let Some(&end) = ended.get(&step.order.id) {
                assert!(
                    step.order.seq <= end,
                    "IOC order touched after its end: {step:?}"
                );
            }
        }
        assert!(iocs > 1_000, "{iocs}");
        // The last event ended any IOC order, or the core must make one more.
        assert_eq!(
            book.ioc_pending(),
            steps.last().unwrap().kind == Kind::InsertIoc
        );
    }

    #[test]
    fn each_shard_numbers_its_own_events_and_orders() {
        let mut ids = std::collections::HashSet::new();
        for shard in 0..3 {
            let mut book = Book::new(BookConfig::default(), 11, shard);
            let (mut seq, mut rec, mut stamp) = (0, 0, 0);
            for i in 0..10_000u64 {
                // Stamps that go back are raised to the last one.
                let step = book.next(if i % 7 == 0 { 5 } else { 1_000 + i });
                assert_eq!(step.event.seq(), seq + 1);
                seq += 1;
                if let Event::Insert(new) = step.event {
                    assert_eq!(new.rec, rec + 1);
                    rec += 1;
                    assert_eq!(new.id, order_id(shard, rec));
                    assert!(ids.insert(new.id), "id {} reused", new.id);
                }
                assert_eq!(step.order.id.0 >> SHARD_SHIFT, u64::from(shard));
                assert_eq!(shard_of(step.order.id), shard as usize);
                assert!(step.order.updated_at >= stamp);
                stamp = step.order.updated_at;
            }
            assert_eq!((book.seq(), book.rec()), (seq, rec));
        }
    }

    #[test]
    fn a_seed_and_a_shard_make_one_book() {
        let a = run(&mut Book::new(BookConfig::default(), 5, 0), 5_000);
        let b = run(&mut Book::new(BookConfig::default(), 5, 0), 5_000);
        let c = run(&mut Book::new(BookConfig::default(), 5, 1), 5_000);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn bad_configs_name_their_field() {
        let bad = |edit: fn(&mut BookConfig)| {
            let mut c = BookConfig::default();
            edit(&mut c);
            c.validate().unwrap_err().field
        };
        assert_eq!(BookConfig::default().validate(), Ok(()));
        assert_eq!(bad(|c| c.firms = 0), "firms");
        assert_eq!(bad(|c| c.brokers_per_firm = 1_000), "brokers_per_firm");
        assert_eq!(bad(|c| c.hot_instruments = 501), "hot_instruments");
        assert_eq!(bad(|c| c.ioc_share = 1.5), "ioc_share");
        assert_eq!(bad(|c| c.burst_length = 60_000), "burst_length");
        assert_eq!(bad(|c| c.resting_orders = 0), "resting_orders");
    }
}
