//! A note's charges, in decimal rupees. Every component is rounded half-up to the paisa
//! per note and segment; STT to the rupee. Brokerage is charged per executed order.

use std::collections::BTreeMap;

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::model::{Category, Exchange, Segment, Side, Trade};
use crate::rates::RateTable;

/// The charges of one segment of a note, or of the whole note, in rupees.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Charges {
    /// Per executed order, summed.
    pub brokerage: Decimal,
    /// The exchange's transaction charges.
    pub exchange: Decimal,
    /// Securities transaction tax, rounded to the rupee.
    pub stt: Decimal,
    /// SEBI turnover fees.
    pub sebi: Decimal,
    /// Stamp duty, on buys only.
    pub stamp: Decimal,
    /// Central GST: half the GST for a client in the broker's state, else zero.
    pub cgst: Decimal,
    /// State GST: the other half for a client in the broker's state, else zero.
    pub sgst: Decimal,
    /// Integrated GST: all of it for a client in another state, else zero.
    pub igst: Decimal,
}

impl Charges {
    /// Every component added up.
    pub(crate) fn total(&self) -> Decimal {
        self.brokerage
            + self.exchange
            + self.stt
            + self.sebi
            + self.stamp
            + self.cgst
            + self.sgst
            + self.igst
    }

    fn add(&mut self, o: &Charges) {
        self.brokerage += o.brokerage;
        self.exchange += o.exchange;
        self.stt += o.stt;
        self.sebi += o.sebi;
        self.stamp += o.stamp;
        self.cgst += o.cgst;
        self.sgst += o.sgst;
        self.igst += o.igst;
    }
}

/// One segment's block of the note's charges: turnover, charges and net.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentSummary {
    /// Cash equity or F&O.
    pub segment: Segment,
    /// Turnover of the client's buys (premium for options), in rupees.
    pub buy_value: Decimal,
    /// Turnover of the client's sells (premium for options), in rupees.
    pub sell_value: Decimal,
    /// Sells minus buys: positive is receivable by the client.
    pub pay_in_out: Decimal,
    /// The segment's charges, each rounded on its own.
    pub charges: Charges,
    /// `pay_in_out` less all charges.
    pub net: Decimal,
}

/// A note's charges: per segment traded, and in total.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteCharges {
    /// Equity first, then F&O; only the segments the client traded in.
    pub segments: Vec<SegmentSummary>,
    /// The segments' charges added up.
    pub total: Charges,
    /// Receivable by the client when positive, payable when negative.
    pub net_amount: Decimal,
    /// Brokerage of each executed order, for the per-security lines.
    pub brokerage_by_order: BTreeMap<String, Decimal>,
}

fn paise(v: Decimal) -> Decimal {
    v.round_dp_with_strategy(2, RoundingStrategy::MidpointAwayFromZero)
}

fn rupees(v: Decimal) -> Decimal {
    v.round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero)
}

fn pct(value: Decimal, rate: Decimal) -> Decimal {
    value * rate / Decimal::ONE_HUNDRED
}

fn exchange_rate(r: &RateTable, exchange: Exchange, c: Category) -> Decimal {
    match (exchange, c) {
        (Exchange::Nse, Category::Delivery | Category::Intraday) => r.exchange_nse_cash_pct,
        (Exchange::Nse, Category::Futures) => r.exchange_nse_futures_pct,
        (Exchange::Nse, Category::Options) => r.exchange_nse_options_pct,
        (Exchange::Bse, Category::Delivery | Category::Intraday) => r.exchange_bse_cash_pct,
        (Exchange::Bse, Category::Futures) => r.exchange_bse_futures_pct,
        (Exchange::Bse, Category::Options) => r.exchange_bse_options_pct,
    }
}

fn order_brokerage(r: &RateTable, c: Category, turnover: Decimal) -> Decimal {
    match c {
        Category::Delivery => pct(turnover, r.brokerage_delivery_pct),
        Category::Intraday | Category::Futures => {
            pct(turnover, r.brokerage_pct).min(r.brokerage_cap)
        }
        Category::Options => r.brokerage_options_per_order,
    }
}

/// Charges for one client's trades of the day. `same_state`: the client's state is the
/// broker's GST state (CGST + SGST), else IGST.
pub(crate) fn compute(trades: &[Trade], r: &RateTable, same_state: bool) -> NoteCharges {
    let mut orders: BTreeMap<(&str, Category), (Segment, Decimal)> = BTreeMap::new();
    for t in trades {
        let e = orders
            .entry((&t.order_id, t.category()))
            .or_insert((t.segment, Decimal::ZERO));
        e.1 += t.value();
    }
    let mut brokerage_by_order = BTreeMap::new();
    let mut brokerage: BTreeMap<Segment, Decimal> = BTreeMap::new();
    for ((order, category), (segment, turnover)) in &orders {
        let b = order_brokerage(r, *category, *turnover);
        *brokerage_by_order
            .entry(order.to_string())
            .or_insert(Decimal::ZERO) += b;
        *brokerage.entry(*segment).or_insert(Decimal::ZERO) += b;
    }

    let mut segments = Vec::new();
    let mut total = Charges::default();
    let mut net_amount = Decimal::ZERO;
    for segment in [Segment::Equity, Segment::Derivatives] {
        let in_seg: Vec<&Trade> = trades.iter().filter(|t| t.segment == segment).collect();
        if in_seg.is_empty() {
            continue;
        }
        let (mut buy, mut sell, mut exch, mut stt, mut stamp) = (
            Decimal::ZERO,
            Decimal::ZERO,
            Decimal::ZERO,
            Decimal::ZERO,
            Decimal::ZERO,
        );
        for t in &in_seg {
            let v = t.value();
            let c = t.category();
            exch += pct(v, exchange_rate(r, t.exchange, c));
            match t.side {
                Side::Buy => {
                    buy += v;
                    stamp += pct(
                        v,
                        match c {
                            Category::Delivery => r.stamp_delivery_pct,
                            Category::Intraday => r.stamp_intraday_pct,
                            Category::Futures => r.stamp_futures_pct,
                            Category::Options => r.stamp_options_pct,
                        },
                    );
                    if c == Category::Delivery {
                        stt += pct(v, r.stt_delivery_pct);
                    }
                }
                Side::Sell => {
                    sell += v;
                    stt += pct(
                        v,
                        match c {
                            Category::Delivery => r.stt_delivery_pct,
                            Category::Intraday => r.stt_intraday_sell_pct,
                            Category::Futures => r.stt_futures_sell_pct,
                            Category::Options => r.stt_options_sell_pct,
                        },
                    );
                }
            }
        }
        let brokerage = paise(brokerage.get(&segment).copied().unwrap_or_default());
        let exchange = paise(exch);
        let sebi = paise((buy + sell) * r.sebi_per_crore / Decimal::from(10_000_000));
        let taxable = brokerage + exchange + sebi;
        let (cgst, sgst, igst) = if same_state {
            let half = paise(pct(taxable, r.gst_pct / Decimal::TWO));
            (half, half, Decimal::ZERO)
        } else {
            (Decimal::ZERO, Decimal::ZERO, paise(pct(taxable, r.gst_pct)))
        };
        let charges = Charges {
            brokerage,
            exchange,
            stt: rupees(stt),
            sebi,
            stamp: paise(stamp),
            cgst,
            sgst,
            igst,
        };
        let pay_in_out = sell - buy;
        let net = paise(pay_in_out - charges.total());
        total.add(&charges);
        net_amount += net;
        segments.push(SegmentSummary {
            segment,
            buy_value: buy,
            sell_value: sell,
            pay_in_out,
            charges,
            net,
        });
    }
    NoteCharges {
        segments,
        total,
        net_amount,
        brokerage_by_order,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{InstrumentType, Product};
    use crate::rates::{default_rates, rates_on};
    use rust_decimal_macros::dec;

    fn trade(
        order: &str,
        ex: Exchange,
        it: InstrumentType,
        product: Product,
        side: Side,
        qty: u64,
        price: Decimal,
    ) -> Trade {
        let segment = if it == InstrumentType::Equity {
            Segment::Equity
        } else {
            Segment::Derivatives
        };
        Trade {
            trade_id: format!("T-{order}-{qty}"),
            order_id: order.to_string(),
            order_time: "09:15:00".parse().unwrap(),
            trade_time: "09:15:01".parse().unwrap(),
            client_code: "C1".into(),
            exchange: ex,
            segment,
            instrument: "X".into(),
            isin: None,
            instrument_type: it,
            product,
            side,
            quantity: qty,
            price,
            line: 2,
        }
    }

    fn day() -> Vec<Trade> {
        use InstrumentType::*;
        vec![
            trade(
                "O1",
                Exchange::Nse,
                Equity,
                Product::Delivery,
                Side::Buy,
                10,
                dec!(2500),
            ),
            trade(
                "O2",
                Exchange::Nse,
                Equity,
                Product::Intraday,
                Side::Buy,
                100,
                dec!(1500),
            ),
            trade(
                "O3",
                Exchange::Nse,
                Equity,
                Product::Intraday,
                Side::Sell,
                100,
                dec!(1510),
            ),
            trade(
                "O4",
                Exchange::Nse,
                Call,
                Product::Normal,
                Side::Sell,
                50,
                dec!(100),
            ),
        ]
    }

    /// Worked by hand from the rates in force on 2026-05-01 (see the table).
    #[test]
    fn a_day_charged_by_hand() {
        let t = default_rates();
        let r = rates_on(&t, "2026-05-01".parse().unwrap()).unwrap();
        let n = compute(&day(), r, true);
        let eq = &n.segments[0];
        assert_eq!(eq.segment, Segment::Equity);
        // O1 delivery ₹0; O2 and O3 min(0.03% × 150,000 / 151,000, ₹20) = ₹20 each.
        assert_eq!(eq.charges.brokerage, dec!(40));
        // 0.00297% of 326,000 = 9.6822.
        assert_eq!(eq.charges.exchange, dec!(9.68));
        // 0.1% × 25,000 + 0.025% × 151,000 = 62.75, rounded to the rupee.
        assert_eq!(eq.charges.stt, dec!(63));
        // ₹10 per crore of 326,000 = 0.326.
        assert_eq!(eq.charges.sebi, dec!(0.33));
        // Buys only: 0.015% × 25,000 + 0.003% × 150,000.
        assert_eq!(eq.charges.stamp, dec!(8.25));
        // 9% each of 40 + 9.68 + 0.33 = 50.01.
        assert_eq!(
            (eq.charges.cgst, eq.charges.sgst, eq.charges.igst),
            (dec!(4.50), dec!(4.50), dec!(0))
        );
        assert_eq!(eq.charges.total(), dec!(130.26));
        assert_eq!(eq.net, dec!(-24130.26));

        let fo = &n.segments[1];
        assert_eq!(fo.charges.brokerage, dec!(20));
        assert_eq!(fo.charges.exchange, dec!(1.75), "0.03503% of 5,000 premium");
        assert_eq!(fo.charges.stt, dec!(8), "0.15% of 5,000 = 7.5, half up");
        assert_eq!(fo.charges.sebi, dec!(0.01), "0.005 rounds half up");
        assert_eq!(fo.charges.stamp, dec!(0), "no buys");
        assert_eq!(
            (fo.charges.cgst, fo.charges.sgst),
            (dec!(1.96), dec!(1.96)),
            "9% of 21.76"
        );
        assert_eq!(fo.net, dec!(4966.32));

        assert_eq!(n.net_amount, dec!(-19163.94), "payable by the client");
        assert_eq!(n.total.total(), dec!(163.94));
        assert_eq!(n.brokerage_by_order["O2"], dec!(20));
    }

    #[test]
    fn other_state_pays_igst_and_old_rates_apply_before_april_2026() {
        let t = default_rates();
        let r = rates_on(&t, "2026-05-01".parse().unwrap()).unwrap();
        let n = compute(&day(), r, false);
        assert_eq!(n.segments[0].charges.igst, dec!(9.00), "18% of 50.01");
        assert_eq!(n.segments[0].charges.cgst, dec!(0));
        let old = rates_on(&t, "2026-03-31".parse().unwrap()).unwrap();
        let n = compute(&day(), old, true);
        assert_eq!(
            n.segments[1].charges.stt,
            dec!(5),
            "0.1% of 5,000 before the change"
        );
    }

    #[test]
    fn brokerage_is_per_order_not_per_trade() {
        use InstrumentType::*;
        let t = default_rates();
        let r = rates_on(&t, "2026-05-01".parse().unwrap()).unwrap();
        // One intraday order filled in three trades: 0.03% × 30,000 = ₹9, once.
        let fills: Vec<Trade> = (0..3)
            .map(|_| {
                trade(
                    "O9",
                    Exchange::Bse,
                    Equity,
                    Product::Intraday,
                    Side::Buy,
                    10,
                    dec!(1000),
                )
            })
            .collect();
        let n = compute(&fills, r, true);
        assert_eq!(n.segments[0].charges.brokerage, dec!(9));
        assert_eq!(
            n.segments[0].charges.exchange,
            dec!(1.13),
            "BSE cash 0.00375% of 30,000 = 1.125"
        );
        // Futures: capped at ₹20.
        let fut = vec![trade(
            "F1",
            Exchange::Nse,
            Future,
            Product::Normal,
            Side::Sell,
            75,
            dec!(24000),
        )];
        let n = compute(&fut, r, true);
        assert_eq!(n.segments[0].charges.brokerage, dec!(20));
        assert_eq!(n.segments[0].charges.stt, dec!(900), "0.05% of 1,800,000");
    }
}
