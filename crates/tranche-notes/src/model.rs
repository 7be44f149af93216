//! What a broker's day is made of: trades and clients, as read from the input files.

use chrono::NaiveTime;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The exchange a trade was executed on; its charges and member code depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Exchange {
    /// National Stock Exchange (`NSE` in the files).
    #[serde(rename = "NSE")]
    Nse,
    /// BSE, formerly the Bombay Stock Exchange (`BSE` in the files).
    #[serde(rename = "BSE")]
    Bse,
}

/// The market segment: a note summarises and charges each segment on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Segment {
    /// Cash equity.
    #[serde(rename = "EQ")]
    Equity,
    /// Futures and options.
    #[serde(rename = "FO")]
    Derivatives,
}

/// What was traded: a share, or a futures or options contract on an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InstrumentType {
    /// A share (`EQ`), in segment EQ only.
    #[serde(rename = "EQ")]
    Equity,
    /// A futures contract (`FUT`).
    #[serde(rename = "FUT")]
    Future,
    /// A call option (`CE`); its price is the premium.
    #[serde(rename = "CE")]
    Call,
    /// A put option (`PE`); its price is the premium.
    #[serde(rename = "PE")]
    Put,
}

/// The broker's product code: with the instrument type it decides the [`Category`].
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

/// Buy or sell, from the client's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Side {
    /// `B`: the client pays; stamp duty applies.
    #[serde(rename = "B")]
    Buy,
    /// `S`: the client receives; STT applies (delivery is charged on both sides).
    #[serde(rename = "S")]
    Sell,
}

/// How a trade is charged: each has its own brokerage, STT, exchange and stamp rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Equity bought or sold for delivery (CNC).
    Delivery,
    /// Equity squared off within the day (MIS).
    Intraday,
    /// Futures contracts, whatever the product.
    Futures,
    /// Call and put options, whatever the product; charged on the premium.
    Options,
}

/// One executed trade: a row of `trades.csv`, checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trade {
    /// The exchange's trade number; unique in the file.
    pub trade_id: String,
    /// The order this trade filled (an order may fill in several trades); brokerage is
    /// charged per order.
    pub order_id: String,
    /// When the order was placed; shown in the annexure.
    pub order_time: NaiveTime,
    /// When it was executed; the annexure lists trades in this order.
    pub trade_time: NaiveTime,
    /// The client whose note the trade goes on.
    pub client_code: String,
    /// Where it was executed.
    pub exchange: Exchange,
    /// Cash equity or F&O.
    pub segment: Segment,
    /// Symbol or contract name as the exchange gives it, e.g. `RELIANCE` or `NIFTY 20NOV2026 FUT`.
    pub instrument: String,
    /// Equity only.
    pub isin: Option<String>,
    /// Share, future, call or put.
    pub instrument_type: InstrumentType,
    /// The broker's product code (CNC, MIS, NRML).
    pub product: Product,
    /// Buy or sell.
    pub side: Side,
    /// Units (shares or contract units, not lots); at least 1.
    pub quantity: u64,
    /// Rupees per unit (the premium for options); positive.
    pub price: Decimal,
    /// Line in trades.csv, for errors and the annexure's traceability.
    pub line: u64,
}

impl Trade {
    /// How the trade is charged, from its instrument type and product.
    pub fn category(&self) -> Category {
        match (self.instrument_type, self.product) {
            (InstrumentType::Equity, Product::Delivery) => Category::Delivery,
            (InstrumentType::Equity, _) => Category::Intraday,
            (InstrumentType::Future, _) => Category::Futures,
            (InstrumentType::Call | InstrumentType::Put, _) => Category::Options,
        }
    }

    /// Quantity × price: the turnover (for options, the premium).
    pub(crate) fn value(&self) -> Decimal {
        Decimal::from(self.quantity) * self.price
    }
}

/// One client of the client master (`clients.csv`), checked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Client {
    /// The broker's unique client code (UCC); names the client's files and jobs.
    pub client_code: String,
    /// As printed on the note and in the mail's greeting.
    pub name: String,
    /// Permanent Account Number, upper case (e.g. ABCPE1234F); by default the PDF's
    /// password. Personal data: never put in an error or a log.
    pub pan: String,
    /// Where the note is mailed. Personal data, like the PAN.
    pub email: String,
    /// Postal address, printed on the note.
    pub address: String,
    /// Indian state: the GST place of supply (same as the broker's: CGST+SGST, else IGST).
    pub state: String,
    /// Line in clients.csv, for errors.
    pub line: u64,
}
