//! What one contract note shows: the `process` step's artifact, handed to `render`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, NaiveDate, NaiveTime};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::charges::{compute, NoteCharges};
use crate::input::{Broker, ComplianceOfficer};
use crate::model::{Client, Exchange, Segment, Side, Trade};

/// Everything one contract note shows, computed and rounded: what the template reads as
/// `/note.json`. Made by [`build`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteData {
    /// Unique per broker and day, e.g. `CN/20261120/0000003` (see `broker.toml`'s
    /// `note_prefix`).
    pub note_number: String,
    /// A corrected note names the note it replaces (which was mailed with wrong data).
    #[serde(default)]
    pub replaces: Option<String>,
    /// The day the trades were executed; also the PDF's date.
    pub trade_date: NaiveDate,
    /// One per exchange and segment traded.
    pub settlements: Vec<Settlement>,
    /// The broker's block at the top of the note.
    pub broker: BrokerBlock,
    /// The client's block at the top of the note.
    pub client: ClientBlock,
    /// One line per security and side.
    pub lines: Vec<NoteLine>,
    /// Per segment and in total.
    pub charges: NoteCharges,
    /// "CGST+SGST" within the broker's state, "IGST" otherwise.
    pub gst_kind: String,
    /// Receivable by the client when positive, payable when negative.
    pub net_amount: Decimal,
    /// Every trade, in time order: the annexure.
    pub annexure: Vec<AnnexureRow>,
}

/// A settlement the note's trades fall in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    /// Where the trades were executed.
    pub exchange: Exchange,
    /// Cash equity or F&O.
    pub segment: Segment,
    /// Year and day of the year, e.g. `2026324`: stands in for the exchange calendar.
    pub number: String,
}

/// The broker as the note names it (from `broker.toml`): a note must carry its
/// registrations and whom to complain to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerBlock {
    /// Registered name.
    pub name: String,
    /// SEBI registration number, e.g. `INZ000123456`.
    pub sebi_registration: String,
    /// Trading member code per exchange, e.g. NSE = "12345".
    pub member_codes: BTreeMap<String, String>,
    /// Registered office.
    pub address: String,
    /// GST identification number; the note is also a tax invoice.
    pub gstin: String,
    /// Printed for investor grievances.
    pub compliance_officer: ComplianceOfficer,
}

/// The client as the note names it (from the client master).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientBlock {
    /// The client code (UCC).
    pub code: String,
    /// As in the client master.
    pub name: String,
    /// Upper case; also what the default password rule makes the PDF's password from.
    pub pan: String,
    /// Postal address.
    pub address: String,
    /// The client's state, which decides CGST+SGST or IGST.
    pub place_of_supply: String,
}

/// One line of the note: a security bought or sold on one exchange, its trades added up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteLine {
    /// Where the trades were executed.
    pub exchange: Exchange,
    /// Cash equity or F&O.
    pub segment: Segment,
    /// Symbol or contract.
    pub instrument: String,
    /// Equity only.
    pub isin: Option<String>,
    /// Bought or sold.
    pub side: Side,
    /// Units, over all the line's trades.
    pub quantity: u64,
    /// Weighted average price.
    pub wap: Decimal,
    /// The brokerage of the line's orders per unit, to 4 decimals.
    pub brokerage_per_unit: Decimal,
    /// WAP plus brokerage per unit for a buy, minus it for a sell, to 4 decimals.
    pub wap_after_brokerage: Decimal,
    /// Receivable (positive) or payable (negative), brokerage included.
    pub net_total: Decimal,
}

/// One trade in the note's annexure, as the exchange reported it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnnexureRow {
    /// The order the trade filled.
    pub order_id: String,
    /// When the order was placed.
    pub order_time: NaiveTime,
    /// The exchange's trade number.
    pub trade_id: String,
    /// When the trade was executed.
    pub trade_time: NaiveTime,
    /// Where the trade was executed.
    pub exchange: Exchange,
    /// Symbol or contract.
    pub instrument: String,
    /// Bought or sold.
    pub side: Side,
    /// Units.
    pub quantity: u64,
    /// Rupees per unit (premium for options).
    pub price: Decimal,
}

/// Why a client's note cannot be built; the client's chain fails with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// No rate table of the broker applies on the trade date.
    #[error("no charge rates in force on {0} in broker.toml (each [[rates]] table applies from its `from` date)")]
    NoRates(NaiveDate),
    /// The client has no trades on the day: there is nothing to put on a note.
    #[error("client {0} has no trades on this day")]
    NoTrades(String),
}

fn round(v: Decimal, dp: u32) -> Decimal {
    v.round_dp_with_strategy(dp, RoundingStrategy::MidpointAwayFromZero)
}

/// The number of the day's `sequence`th note, e.g. `CN/20261120/0000003`.
pub(crate) fn note_number(broker: &Broker, date: NaiveDate, sequence: u32) -> String {
    format!(
        "{}/{}/{:07}",
        broker.note_prefix,
        date.format("%Y%m%d"),
        sequence
    )
}

/// The note for one client's trades of `date`. `sequence` numbers the notes of the day.
pub fn build(
    broker: &Broker,
    client: &Client,
    trades: &[Trade],
    date: NaiveDate,
    sequence: u32,
) -> Result<NoteData, NoteError> {
    if trades.is_empty() {
        return Err(NoteError::NoTrades(client.client_code.clone()));
    }
    let rates = broker.rates_on(date).ok_or(NoteError::NoRates(date))?;
    let same_state = broker.same_state(&client.state);
    let charges = compute(trades, rates, same_state);

    let mut groups: BTreeMap<(Exchange, Segment, &str, Side), Vec<&Trade>> = BTreeMap::new();
    for t in trades {
        groups
            .entry((t.exchange, t.segment, &t.instrument, t.side))
            .or_default()
            .push(t);
    }
    let lines = groups
        .into_iter()
        .map(|((exchange, segment, instrument, side), ts)| {
            let quantity: u64 = ts.iter().map(|t| t.quantity).sum();
            let value: Decimal = ts.iter().map(|t| t.value()).sum();
            let qty = Decimal::from(quantity);
            let orders: BTreeSet<&str> = ts.iter().map(|t| t.order_id.as_str()).collect();
            let brokerage: Decimal = orders
                .iter()
                .filter_map(|o| charges.brokerage_by_order.get(*o))
                .sum();
            let wap = value / qty;
            let per_unit = brokerage / qty;
            let (after, net_total) = match side {
                Side::Buy => (wap + per_unit, -(value + brokerage)),
                Side::Sell => (wap - per_unit, value - brokerage),
            };
            NoteLine {
                exchange,
                segment,
                instrument: instrument.to_string(),
                isin: ts[0].isin.clone(),
                side,
                quantity,
                wap: round(wap, 4),
                brokerage_per_unit: round(per_unit, 4),
                wap_after_brokerage: round(after, 4),
                net_total: round(net_total, 2),
            }
        })
        .collect();

    let mut annexure: Vec<AnnexureRow> = trades
        .iter()
        .map(|t| AnnexureRow {
            order_id: t.order_id.clone(),
            order_time: t.order_time,
            trade_id: t.trade_id.clone(),
            trade_time: t.trade_time,
            exchange: t.exchange,
            instrument: t.instrument.clone(),
            side: t.side,
            quantity: t.quantity,
            price: t.price,
        })
        .collect();
    annexure.sort_by(|a, b| (a.trade_time, &a.trade_id).cmp(&(b.trade_time, &b.trade_id)));

    let venues: BTreeSet<(Exchange, Segment)> =
        trades.iter().map(|t| (t.exchange, t.segment)).collect();
    let settlements = venues
        .into_iter()
        .map(|(exchange, segment)| Settlement {
            exchange,
            segment,
            // Exchanges number settlements by year and trading day; the day of the
            // year stands in for the exchange calendar here.
            number: format!("{}{:03}", date.year(), date.ordinal()),
        })
        .collect();

    Ok(NoteData {
        note_number: note_number(broker, date, sequence),
        replaces: None,
        trade_date: date,
        settlements,
        broker: BrokerBlock {
            name: broker.name.clone(),
            sebi_registration: broker.sebi_registration.clone(),
            member_codes: broker.member_codes.clone(),
            address: broker.address.clone(),
            gstin: broker.gstin.clone(),
            compliance_officer: broker.compliance_officer.clone(),
        },
        client: ClientBlock {
            code: client.client_code.clone(),
            name: client.name.clone(),
            pan: client.pan.clone(),
            address: client.address.clone(),
            place_of_supply: client.state.clone(),
        },
        lines,
        gst_kind: if same_state { "CGST+SGST" } else { "IGST" }.to_string(),
        net_amount: charges.net_amount,
        charges,
        annexure,
    })
}
