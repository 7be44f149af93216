//! What one contract note shows: the `process` step's artifact, handed to `render`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Datelike, NaiveDate, NaiveTime};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::charges::{compute, NoteCharges};
use crate::input::{Broker, ComplianceOfficer};
use crate::model::{Client, Exchange, Segment, Side, Trade};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteData {
    pub note_number: String,
    /// A corrected note names the note it replaces (which was mailed with wrong data).
    #[serde(default)]
    pub replaces: Option<String>,
    pub trade_date: NaiveDate,
    pub settlements: Vec<Settlement>,
    pub broker: BrokerBlock,
    pub client: ClientBlock,
    /// One line per security and side.
    pub lines: Vec<NoteLine>,
    pub charges: NoteCharges,
    /// "CGST+SGST" within the broker's state, "IGST" otherwise.
    pub gst_kind: String,
    /// Receivable by the client when positive, payable when negative.
    pub net_amount: Decimal,
    /// Every trade, in time order: the annexure.
    pub annexure: Vec<AnnexureRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settlement {
    pub exchange: Exchange,
    pub segment: Segment,
    pub number: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerBlock {
    pub name: String,
    pub sebi_registration: String,
    pub member_codes: BTreeMap<String, String>,
    pub address: String,
    pub gstin: String,
    pub compliance_officer: ComplianceOfficer,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientBlock {
    pub code: String,
    pub name: String,
    pub pan: String,
    pub address: String,
    pub place_of_supply: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoteLine {
    pub exchange: Exchange,
    pub segment: Segment,
    pub instrument: String,
    pub isin: Option<String>,
    pub side: Side,
    pub quantity: u64,
    /// Weighted average price.
    pub wap: Decimal,
    pub brokerage_per_unit: Decimal,
    pub wap_after_brokerage: Decimal,
    /// Receivable (positive) or payable (negative), brokerage included.
    pub net_total: Decimal,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AnnexureRow {
    pub order_id: String,
    pub order_time: NaiveTime,
    pub trade_id: String,
    pub trade_time: NaiveTime,
    pub exchange: Exchange,
    pub instrument: String,
    pub side: Side,
    pub quantity: u64,
    pub price: Decimal,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("no charge rates in force on {0} in broker.toml (each [[rates]] table applies from its `from` date)")]
    NoRates(NaiveDate),
    #[error("client {0} has no trades on this day")]
    NoTrades(String),
}

fn round(v: Decimal, dp: u32) -> Decimal {
    v.round_dp_with_strategy(dp, RoundingStrategy::MidpointAwayFromZero)
}

/// The number of the day's `sequence`th note, e.g. `CN/20261120/0000003`.
pub fn note_number(broker: &Broker, date: NaiveDate, sequence: u32) -> String {
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
