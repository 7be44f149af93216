//! What a broker's day is made of: trades and clients, as read from the input files.

use chrono::NaiveTime;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Exchange {
    #[serde(rename = "NSE")]
    Nse,
    #[serde(rename = "BSE")]
    Bse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Segment {
    /// Cash equity.
    #[serde(rename = "EQ")]
    Equity,
    /// Futures and options.
    #[serde(rename = "FO")]
    Derivatives,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InstrumentType {
    #[serde(rename = "EQ")]
    Equity,
    #[serde(rename = "FUT")]
    Future,
    #[serde(rename = "CE")]
    Call,
    #[serde(rename = "PE")]
    Put,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Product {
    /// Cash and carry: equity delivery.
    #[serde(rename = "CNC")]
    Delivery,
    /// Margin intraday square-off.
    #[serde(rename = "MIS")]
    Intraday,
    /// Normal F&O carry-forward.
    #[serde(rename = "NRML")]
    Normal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Side {
    #[serde(rename = "B")]
    Buy,
    #[serde(rename = "S")]
    Sell,
}

/// How a trade is charged: each has its own brokerage, STT, exchange and stamp rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Delivery,
    Intraday,
    Futures,
    Options,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trade {
    pub trade_id: String,
    pub order_id: String,
    pub order_time: NaiveTime,
    pub trade_time: NaiveTime,
    pub client_code: String,
    pub exchange: Exchange,
    pub segment: Segment,
    pub instrument: String,
    /// Equity only.
    pub isin: Option<String>,
    pub instrument_type: InstrumentType,
    pub product: Product,
    pub side: Side,
    pub quantity: u64,
    pub price: Decimal,
    /// Line in trades.csv, for errors and the annexure's traceability.
    pub line: u64,
}

impl Trade {
    pub fn category(&self) -> Category {
        match (self.instrument_type, self.product) {
            (InstrumentType::Equity, Product::Delivery) => Category::Delivery,
            (InstrumentType::Equity, _) => Category::Intraday,
            (InstrumentType::Future, _) => Category::Futures,
            (InstrumentType::Call | InstrumentType::Put, _) => Category::Options,
        }
    }

    /// Quantity × price: the turnover (for options, the premium).
    pub fn value(&self) -> Decimal {
        Decimal::from(self.quantity) * self.price
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Client {
    pub client_code: String,
    pub name: String,
    pub pan: String,
    pub email: String,
    pub address: String,
    pub state: String,
    pub line: u64,
}
