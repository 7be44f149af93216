use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::str::FromStr;

use chrono::NaiveTime;
use rust_decimal::Decimal;

use super::csv_rows::{CsvRows, Row};
use super::{InputError, RowError};
use crate::model::{Exchange, InstrumentType, Product, Segment, Side, Trade};

/// The columns `trades.csv` must have (in any order; others are ignored); the
/// generator writes them in this order.
pub const COLUMNS: [&str; 14] = [
    "trade_id",
    "order_id",
    "order_time",
    "trade_time",
    "client_code",
    "exchange",
    "segment",
    "instrument",
    "isin",
    "instrument_type",
    "product",
    "side",
    "quantity",
    "price",
];

/// Bounds far above any real trade that keep every sum on a note (quantities in a
/// `u64`, amounts in a `Decimal`) from overflowing, however many trades a client has.
pub(crate) const MAX_QUANTITY: u64 = 1_000_000_000_000;
/// Rupees: ₹1,000 lakh crore.
pub(crate) const MAX_TRADE_VALUE: u64 = 1_000_000_000_000_000;

/// The day's trades by client, and the rows that could not be used: every row read is
/// in exactly one of the two.
#[derive(Debug, Default)]
pub struct Trades {
    /// The trades that could be used, by client code, in file order.
    pub by_client: BTreeMap<String, Vec<Trade>>,
    /// The rows that could not, each naming its client when the row says.
    pub errors: Vec<RowError>,
    /// Rows in the file (non-blank lines after the header).
    pub rows_read: u64,
}

impl Trades {
    /// The trades that could be used, over all clients.
    pub fn count(&self) -> usize {
        self.by_client.values().map(Vec::len).sum()
    }
}

/// Read and check the day's trades. Fails only when the file as a whole cannot be
/// used; a bad row goes to [`Trades::errors`].
pub fn read_trades(path: &Path) -> Result<Trades, InputError> {
    let mut rows = CsvRows::open(path, &COLUMNS)?;
    let mut by_client: BTreeMap<String, Vec<Trade>> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<String, u64> = HashMap::new();
    rows.each_row(&mut errors, |row| {
        let trade = parse(row)?;
        if let Some(first) = seen.get(&trade.trade_id) {
            return Err(row.error(
                "trade_id",
                format!(
                    "expected a unique trade id, got {:?} again (first on line {first})",
                    trade.trade_id
                ),
                Some(&trade.client_code),
            ));
        }
        seen.insert(trade.trade_id.clone(), trade.line);
        by_client
            .entry(trade.client_code.clone())
            .or_default()
            .push(trade);
        Ok(())
    })?;
    Ok(Trades {
        by_client,
        errors,
        rows_read: rows.rows_read,
    })
}

fn parse(row: &Row<'_>) -> Result<Trade, RowError> {
    let client = row.required("client_code", None)?;
    let c = Some(client);
    let choice = |field: &str, options: &[&str]| -> Result<usize, RowError> {
        let v = row.required(field, c)?;
        options
            .iter()
            .position(|o| o.eq_ignore_ascii_case(v))
            .ok_or_else(|| {
                row.error(
                    field,
                    format!("expected one of {}, got {v:?}", options.join("|")),
                    c,
                )
            })
    };
    let time = |field: &str| -> Result<NaiveTime, RowError> {
        let v = row.required(field, c)?;
        NaiveTime::parse_from_str(v, "%H:%M:%S%.f")
            .or_else(|_| NaiveTime::parse_from_str(v, "%H:%M:%S"))
            .map_err(|_| row.error(field, format!("expected a time HH:MM:SS, got {v:?}"), c))
    };
    let exchange = [Exchange::Nse, Exchange::Bse][choice("exchange", &["NSE", "BSE"])?];
    let segment = [Segment::Equity, Segment::Derivatives][choice("segment", &["EQ", "FO"])?];
    let instrument_type = [
        InstrumentType::Equity,
        InstrumentType::Future,
        InstrumentType::Call,
        InstrumentType::Put,
    ][choice("instrument_type", &["EQ", "FUT", "CE", "PE"])?];
    let product = [Product::Delivery, Product::Intraday, Product::Normal]
        [choice("product", &["CNC", "MIS", "NRML"])?];
    let side = [Side::Buy, Side::Sell][choice("side", &["B", "S"])?];
    match (segment, instrument_type, product) {
        (Segment::Equity, InstrumentType::Equity, Product::Delivery | Product::Intraday) => {}
        (
            Segment::Derivatives,
            InstrumentType::Future | InstrumentType::Call | InstrumentType::Put,
            Product::Normal | Product::Intraday,
        ) => {}
        (Segment::Equity, InstrumentType::Equity, _) => {
            return Err(row.error(
                "product",
                format!("expected CNC or MIS for equity, got {}", row.get("product")),
                c,
            ))
        }
        (Segment::Derivatives, InstrumentType::Equity, _) | (Segment::Equity, _, _) => {
            return Err(row.error(
                "instrument_type",
                format!(
                    "expected EQ in segment EQ and FUT|CE|PE in segment FO, got {} in {}",
                    row.get("instrument_type"),
                    row.get("segment")
                ),
                c,
            ))
        }
        (Segment::Derivatives, _, _) => {
            return Err(row.error(
                "product",
                format!("expected NRML or MIS for F&O, got {}", row.get("product")),
                c,
            ))
        }
    }
    let isin = match row.get("isin") {
        "" if segment == Segment::Equity => {
            return Err(row.error(
                "isin",
                "expected an ISIN for an equity trade, got nothing",
                c,
            ))
        }
        "" => None,
        v if v.len() == 12
            && v.is_char_boundary(2)
            && v[..2].chars().all(|ch| ch.is_ascii_uppercase())
            && v.chars().all(|ch| ch.is_ascii_alphanumeric()) =>
        {
            Some(v.to_string())
        }
        v => {
            return Err(row.error(
                "isin",
                format!("expected a 12-character ISIN like INE002A01018, got {v:?}"),
                c,
            ))
        }
    };
    let quantity = row.required("quantity", c)?;
    let quantity = quantity
        .parse::<u64>()
        .ok()
        .filter(|q| *q > 0)
        .ok_or_else(|| {
            row.error(
                "quantity",
                format!("expected a positive whole number, got {quantity:?}"),
                c,
            )
        })?;
    if quantity > MAX_QUANTITY {
        return Err(row.error(
            "quantity",
            format!("expected at most {MAX_QUANTITY}, got {quantity}"),
            c,
        ));
    }
    let price = row.required("price", c)?;
    let price = Decimal::from_str(price)
        .ok()
        .filter(|p| *p > Decimal::ZERO)
        .ok_or_else(|| {
            row.error(
                "price",
                format!("expected a positive decimal price, got {price:?}"),
                c,
            )
        })?;
    let within_bounds = Decimal::from(quantity)
        .checked_mul(price)
        .is_some_and(|v| v <= Decimal::from(MAX_TRADE_VALUE));
    if !within_bounds {
        return Err(row.error(
            "price",
            format!("expected quantity × price up to ₹{MAX_TRADE_VALUE}, got {quantity} × {price}"),
            c,
        ));
    }
    Ok(Trade {
        trade_id: row.required("trade_id", c)?.to_string(),
        order_id: row.required("order_id", c)?.to_string(),
        order_time: time("order_time")?,
        trade_time: time("trade_time")?,
        client_code: client.to_string(),
        exchange,
        segment,
        instrument: row.required("instrument", c)?.to_string(),
        isin,
        instrument_type,
        product,
        side,
        quantity,
        price,
        line: row.line,
    })
}
