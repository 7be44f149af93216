//! A realistic synthetic day: clients across Indian states, equity delivery and
//! intraday, futures and options on NSE and BSE, most clients with 1–40 trades and a
//! few heavy traders with thousands. Deterministic for a given seed.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;

use chrono::{NaiveDate, NaiveTime};
use rust_decimal::Decimal;

/// What day to generate.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Ordinary clients: most with about 1–40 trades, one in about 200 with 500–3,000.
    pub clients: usize,
    /// The trade date; also names the F&O contracts' expiry.
    pub date: NaiveDate,
    /// The same seed and options write the same files.
    pub seed: u64,
    /// Add one client with exactly this many trades (60,000 gives a ~2,000-page note).
    pub heavy_trades: Option<usize>,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Generated {
    /// Rows of `clients.csv`, the heavy trader included.
    pub clients: usize,
    /// Rows of `trades.csv`.
    pub trades: usize,
}

const FIRST: [&str; 24] = [
    "Aarav",
    "Vivaan",
    "Aditya",
    "Vihaan",
    "Arjun",
    "Sai",
    "Reyansh",
    "Krishna",
    "Ishaan",
    "Shaurya",
    "Ananya",
    "Diya",
    "Saanvi",
    "Aadhya",
    "Pari",
    "Myra",
    "Lakshmi",
    "Meenakshi",
    "Priya",
    "Kavya",
    "Rohan",
    "Siddharth",
    "Nandini",
    "Gurpreet",
];
const LAST: [&str; 20] = [
    "Sharma",
    "Verma",
    "Iyer",
    "Nair",
    "Reddy",
    "Patel",
    "Shah",
    "Mehta",
    "Gupta",
    "Agarwal",
    "Banerjee",
    "Chatterjee",
    "Mukherjee",
    "Rao",
    "Pillai",
    "Menon",
    "Singh",
    "Kaur",
    "Deshpande",
    "Kulkarni",
];
const STATES: [(&str, &str); 10] = [
    ("Maharashtra", "Mumbai"),
    ("Karnataka", "Bengaluru"),
    ("Tamil Nadu", "Chennai"),
    ("Delhi", "New Delhi"),
    ("Gujarat", "Ahmedabad"),
    ("West Bengal", "Kolkata"),
    ("Telangana", "Hyderabad"),
    ("Kerala", "Kochi"),
    ("Punjab", "Ludhiana"),
    ("Uttar Pradesh", "Lucknow"),
];
/// Symbol, ISIN, a typical price.
const EQUITIES: [(&str, &str, u32); 10] = [
    ("RELIANCE", "INE002A01018", 2900),
    ("TCS", "INE467B01029", 4100),
    ("INFY", "INE009A01021", 1800),
    ("HDFCBANK", "INE040A01034", 1650),
    ("ICICIBANK", "INE090A01021", 1250),
    ("SBIN", "INE062A01020", 820),
    ("ITC", "INE154A01025", 470),
    ("LT", "INE018A01030", 3600),
    ("BHARTIARTL", "INE397D01024", 1550),
    ("AXISBANK", "INE238A01034", 1150),
];
/// Underlying, lot size, a typical level.
const INDICES: [(&str, u64, u32); 2] = [("NIFTY", 75, 24000), ("BANKNIFTY", 30, 52000)];

/// One order to write as one to three fills.
struct Order<'a> {
    exchange: &'a str,
    instrument: &'a str,
    isin: &'a str,
    /// EQ, FUT, CE or PE; the segment follows from it.
    kind: &'a str,
    product: &'a str,
    side: &'a str,
    qty: u64,
    /// The typical price (premium for options) fills are spread around.
    base: u32,
}

impl<'a> Order<'a> {
    fn equity(
        exchange: &'a str,
        instrument: &'a str,
        isin: &'a str,
        product: &'a str,
        side: &'a str,
        qty: u64,
        base: u32,
    ) -> Self {
        Order {
            exchange,
            instrument,
            isin,
            kind: "EQ",
            product,
            side,
            qty,
            base,
        }
    }

    fn derivative(
        exchange: &'a str,
        contract: &'a str,
        kind: &'a str,
        side: &'a str,
        qty: u64,
        base: u32,
    ) -> Self {
        Order {
            exchange,
            instrument: contract,
            isin: "",
            kind,
            product: "NRML",
            side,
            qty,
            base,
        }
    }
}

/// Writes a generated day's trades file, numbering its orders and trades.
struct DayWriter {
    rng: fastrand::Rng,
    out: BufWriter<std::fs::File>,
    trade_no: u64,
    order_no: u64,
    expiry: String,
}

impl DayWriter {
    fn time(&mut self) -> NaiveTime {
        // Market hours 09:15–15:30.
        let secs = 9 * 3600 + 15 * 60 + self.rng.u32(0..(6 * 3600 + 15 * 60));
        NaiveTime::from_num_seconds_from_midnight_opt(secs, 0).expect("valid time")
    }

    fn price(&mut self, base: u32) -> Decimal {
        // ±3 % around the base, in 5-paisa ticks.
        let spread = Decimal::from(self.rng.i64(-300..=300)) / Decimal::from(10_000);
        let p = Decimal::from(base) * (Decimal::ONE + spread);
        (p * Decimal::from(20)).round() / Decimal::from(20)
    }

    fn order(&mut self, client: &str, o: Order<'_>) -> std::io::Result<usize> {
        let Order {
            exchange,
            instrument,
            isin,
            kind,
            product,
            side,
            qty,
            base,
        } = o;
        let segment = if kind == "EQ" { "EQ" } else { "FO" };
        self.order_no += 1;
        let order_time = self.time();
        let fills = 1 + self.rng.usize(0..3).min(qty as usize - 1);
        let mut left = qty;
        for i in 0..fills {
            let q = if i + 1 == fills {
                left
            } else {
                (left / 2).max(1)
            };
            left -= q;
            self.trade_no += 1;
            let trade_time = (order_time + chrono::Duration::seconds(i as i64 + 1))
                .min(NaiveTime::from_hms_opt(15, 30, 0).expect("valid"));
            let price = self.price(base);
            writeln!(
                self.out,
                "T{:010},O{:010},{},{},{client},{exchange},{segment},{instrument},{isin},{kind},{product},{side},{q},{price}",
                self.trade_no,
                self.order_no,
                order_time.format("%H:%M:%S"),
                trade_time.format("%H:%M:%S"),
            )?;
        }
        Ok(fills)
    }

    /// Orders for one client until at least `trades` trades are written.
    fn client_day(&mut self, client: &str, trades: usize) -> std::io::Result<usize> {
        let mut written = 0;
        while written < trades {
            let exchange = if self.rng.u8(0..4) == 0 { "BSE" } else { "NSE" };
            let order = match self.rng.u8(0..10) {
                0..=3 => {
                    let (sym, isin, base) = EQUITIES[self.rng.usize(0..EQUITIES.len())];
                    let side = if self.rng.bool() { "B" } else { "S" };
                    let qty = self.rng.u64(1..=200);
                    Order::equity(exchange, sym, isin, "CNC", side, qty, base)
                }
                4..=6 => {
                    // Intraday: a buy, then the square-off sell below.
                    let (sym, isin, base) = EQUITIES[self.rng.usize(0..EQUITIES.len())];
                    let qty = self.rng.u64(1..=500);
                    let buy = Order::equity(exchange, sym, isin, "MIS", "B", qty, base);
                    written += self.order(client, buy)?;
                    Order::equity(exchange, sym, isin, "MIS", "S", qty, base)
                }
                7 => {
                    let (und, lot, base) = INDICES[self.rng.usize(0..INDICES.len())];
                    let contract = format!("{und} {} FUT", self.expiry);
                    let side = if self.rng.bool() { "B" } else { "S" };
                    let lots = self.rng.u64(1..=4);
                    written += self.order(
                        client,
                        Order::derivative(exchange, &contract, "FUT", side, lots * lot, base),
                    )?;
                    continue;
                }
                _ => {
                    let (und, lot, base) = INDICES[self.rng.usize(0..INDICES.len())];
                    let strike = base / 100 * 100 + self.rng.u32(0..10) * 100;
                    let kind = if self.rng.bool() { "CE" } else { "PE" };
                    let contract = format!("{und} {} {strike} {kind}", self.expiry);
                    let side = if self.rng.bool() { "B" } else { "S" };
                    let lots = self.rng.u64(1..=10);
                    let premium = 20 + self.rng.u32(0..300);
                    written += self.order(
                        client,
                        Order::derivative(exchange, &contract, kind, side, lots * lot, premium),
                    )?;
                    continue;
                }
            };
            written += self.order(client, order)?;
        }
        Ok(written)
    }
}

fn pan(rng: &mut fastrand::Rng) -> String {
    let mut s = String::with_capacity(10);
    for i in 0..10 {
        let c = if (5..9).contains(&i) {
            rng.char('0'..='9')
        } else {
            rng.char('A'..='Z')
        };
        s.push(c);
    }
    // The fourth letter says what holds the PAN: P for a person.
    s.replace_range(3..4, "P");
    s
}

/// Write `trades.csv`, `clients.csv` and `broker.toml` into `dir` (created if need be),
/// replacing any there.
pub fn generate(dir: &Path, o: &GenerateOptions) -> std::io::Result<Generated> {
    std::fs::create_dir_all(dir)?;
    let mut rng = fastrand::Rng::with_seed(o.seed);
    std::fs::write(dir.join("broker.toml"), BROKER_TOML)?;

    let mut clients = BufWriter::new(std::fs::File::create(dir.join("clients.csv"))?);
    writeln!(clients, "client_code,name,pan,email,address,state")?;
    let total = o.clients + usize::from(o.heavy_trades.is_some());
    let mut codes = Vec::with_capacity(total);
    for i in 0..total {
        let code = format!("C{:07}", i + 1);
        let name = format!(
            "{} {}",
            FIRST[rng.usize(0..FIRST.len())],
            LAST[rng.usize(0..LAST.len())]
        );
        let (state, city) = STATES[rng.usize(0..STATES.len())];
        let mut address = String::new();
        let _ = write!(
            address,
            "\"{} {} Road, {city}\"",
            1 + rng.u32(0..400),
            LAST[rng.usize(0..LAST.len())]
        );
        writeln!(
            clients,
            "{code},{name},{},{}@example.in,{address},{state}",
            pan(&mut rng),
            code.to_lowercase()
        )?;
        codes.push(code);
    }
    clients.flush()?;

    let expiry = o.date.format("%d%b%Y").to_string().to_uppercase();
    let mut writer = DayWriter {
        rng,
        out: BufWriter::new(std::fs::File::create(dir.join("trades.csv"))?),
        trade_no: 0,
        order_no: 0,
        expiry,
    };
    writeln!(writer.out, "{}", crate::input::TRADE_COLUMNS.join(","))?;
    let mut trades = 0;
    for (i, code) in codes.iter().enumerate() {
        let n = if o.heavy_trades.is_some() && i + 1 == total {
            o.heavy_trades.unwrap_or(0)
        } else if writer.rng.u32(0..200) == 0 {
            500 + writer.rng.usize(0..2500)
        } else {
            1 + writer.rng.usize(0..40)
        };
        trades += writer.client_day(code, n)?;
    }
    writer.out.flush()?;
    Ok(Generated {
        clients: total,
        trades,
    })
}

const BROKER_TOML: &str = r#"# The broker's details, printed on every contract note.
name = "Example Securities Private Limited"
sebi_registration = "INZ000123456"
address = "12th Floor, Example Towers, Bandra Kurla Complex, Mumbai 400051"
gstin = "27AAACE1234F1Z5"
gst_state = "Maharashtra"
note_prefix = "CN"
# The sender of the e-mails (default: the compliance officer's address).
mail_from = "Example Securities Contract Notes <contract-notes@example-securities.in>"

[member_codes]
NSE = "90123"
BSE = "6543"

[compliance_officer]
name = "Meera Kulkarni"
email = "compliance@example-securities.in"
phone = "+91 22 4000 1234"

# Charge rates, in percent unless named otherwise. Without [[rates]] tables the
# built-in ones apply (F&O STT 0.02% / 0.1% before 2026-04-01, 0.05% / 0.15% after).
# A table applies from its `from` date until the next one, e.g.:
#
# [[rates]]
# from = "2026-04-01"
# brokerage_delivery_pct = "0"
# brokerage_pct = "0.03"
# brokerage_cap = "20"
# brokerage_options_per_order = "20"
# stt_delivery_pct = "0.1"
# stt_intraday_sell_pct = "0.025"
# stt_futures_sell_pct = "0.05"
# stt_options_sell_pct = "0.15"
# exchange_nse_cash_pct = "0.00297"
# exchange_nse_futures_pct = "0.00173"
# exchange_nse_options_pct = "0.03503"
# exchange_bse_cash_pct = "0.00375"
# exchange_bse_futures_pct = "0"
# exchange_bse_options_pct = "0.0325"
# sebi_per_crore = "10"
# stamp_delivery_pct = "0.015"
# stamp_intraday_pct = "0.003"
# stamp_futures_pct = "0.002"
# stamp_options_pct = "0.003"
# gst_pct = "18"
"#;
