//! Charge rates: configuration with dated versions, because regulators change them.
//! All rates are percentages of the relevant value unless the name says otherwise.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// One version of the charge rates: a `[[rates]]` table of `broker.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateTable {
    /// In force from this trade date on (until a later table's `from`).
    pub from: NaiveDate,
    /// Equity delivery: this share of the order's turnover.
    pub brokerage_delivery_pct: Decimal,
    /// Intraday equity and futures: this share of the order's turnover…
    pub brokerage_pct: Decimal,
    /// …capped at this many rupees per executed order.
    pub brokerage_cap: Decimal,
    /// Options: rupees per executed order.
    pub brokerage_options_per_order: Decimal,
    /// Delivery: on buys and sells.
    pub stt_delivery_pct: Decimal,
    /// Intraday equity: on the turnover of sells.
    pub stt_intraday_sell_pct: Decimal,
    /// Futures: on the turnover of sells.
    pub stt_futures_sell_pct: Decimal,
    /// On the premium of sells.
    pub stt_options_sell_pct: Decimal,
    /// NSE transaction charges on cash equity turnover (delivery and intraday).
    pub exchange_nse_cash_pct: Decimal,
    /// NSE transaction charges on futures turnover.
    pub exchange_nse_futures_pct: Decimal,
    /// NSE transaction charges on options premium.
    pub exchange_nse_options_pct: Decimal,
    /// BSE transaction charges on cash equity turnover (delivery and intraday).
    pub exchange_bse_cash_pct: Decimal,
    /// BSE transaction charges on futures turnover.
    pub exchange_bse_futures_pct: Decimal,
    /// BSE transaction charges on options premium.
    pub exchange_bse_options_pct: Decimal,
    /// Rupees per crore (10 million rupees) of turnover.
    pub sebi_per_crore: Decimal,
    /// Stamp duty, on buys only.
    pub stamp_delivery_pct: Decimal,
    /// Stamp duty on intraday equity buys.
    pub stamp_intraday_pct: Decimal,
    /// Stamp duty on futures buys.
    pub stamp_futures_pct: Decimal,
    /// Stamp duty on options buys, on the premium.
    pub stamp_options_pct: Decimal,
    /// On brokerage + exchange charges + SEBI fees; split CGST/SGST within the broker's
    /// state, IGST otherwise.
    pub gst_pct: Decimal,
}

fn d(s: &str) -> Decimal {
    s.parse().expect("built-in rate is a decimal")
}

/// The built-in tables: the rates the issue lists, with the F&O STT change of
/// 2026-04-01.
pub(crate) fn default_rates() -> Vec<RateTable> {
    let before = RateTable {
        from: NaiveDate::from_ymd_opt(2000, 1, 1).expect("valid date"),
        brokerage_delivery_pct: d("0"),
        brokerage_pct: d("0.03"),
        brokerage_cap: d("20"),
        brokerage_options_per_order: d("20"),
        stt_delivery_pct: d("0.1"),
        stt_intraday_sell_pct: d("0.025"),
        stt_futures_sell_pct: d("0.02"),
        stt_options_sell_pct: d("0.1"),
        exchange_nse_cash_pct: d("0.00297"),
        exchange_nse_futures_pct: d("0.00173"),
        exchange_nse_options_pct: d("0.03503"),
        exchange_bse_cash_pct: d("0.00375"),
        exchange_bse_futures_pct: d("0"),
        exchange_bse_options_pct: d("0.0325"),
        sebi_per_crore: d("10"),
        stamp_delivery_pct: d("0.015"),
        stamp_intraday_pct: d("0.003"),
        stamp_futures_pct: d("0.002"),
        stamp_options_pct: d("0.003"),
        gst_pct: d("18"),
    };
    let after = RateTable {
        from: NaiveDate::from_ymd_opt(2026, 4, 1).expect("valid date"),
        stt_futures_sell_pct: d("0.05"),
        stt_options_sell_pct: d("0.15"),
        ..before.clone()
    };
    vec![before, after]
}

/// The table in force on `date`: the latest whose `from` is not after it.
pub(crate) fn rates_on(tables: &[RateTable], date: NaiveDate) -> Option<&RateTable> {
    tables
        .iter()
        .filter(|t| t.from <= date)
        .max_by_key(|t| t.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fo_stt_changes_on_2026_04_01() {
        let t = default_rates();
        let on = |s: &str| {
            rates_on(&t, s.parse().unwrap())
                .unwrap()
                .stt_options_sell_pct
        };
        assert_eq!(on("2026-03-31"), d("0.1"));
        assert_eq!(on("2026-04-01"), d("0.15"));
        assert!(rates_on(&t, "1999-12-31".parse().unwrap()).is_none());
    }
}
