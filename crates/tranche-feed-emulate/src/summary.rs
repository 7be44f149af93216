//! One summary of a run: what the cores wrote and what the clients received.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::clients::ClientsReport;
use crate::latency::LatencySummary;
use crate::paced::CoreReport;

/// The figures of a run (cores and clients together), as `tranche bench feed` prints
/// them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Shards (cores) written.
    #[serde(default)]
    pub shards: usize,
    /// Events asked per second.
    pub asked_rate: f64,
    /// Events acknowledged per second.
    pub writes_per_sec: f64,
    /// Events acknowledged.
    pub events: u64,
    /// Whether the cores kept to the rate asked (at least 95 %).
    pub kept_up: bool,
    /// Clients.
    pub clients: usize,
    /// Rows the clients received per second.
    pub delivered_rows_per_sec: f64,
    /// Rows received.
    pub rows: u64,
    /// Delivery latency: an order version's stamp to its arrival at a client.
    pub latency: LatencySummary,
    /// The same, of the filtered clients (one firm each) alone.
    #[serde(default)]
    pub filtered_latency: LatencySummary,
    /// The same, of the unfiltered clients alone (on a replica when they read one).
    #[serde(default)]
    pub unfiltered_latency: LatencySummary,
    /// Polls answered (each client's pages).
    #[serde(default)]
    pub polls: u64,
    /// Share of polls answered with no rows.
    pub empty_share: f64,
    /// Whether the views were compared with the final state.
    pub checked: bool,
    /// Whether every client reached the end of its filter.
    pub caught_up: bool,
    /// Orders or versions a client lacked at the end.
    pub omissions: u64,
    /// Rows received out of order.
    pub reorderings: u64,
    /// Rows with contents the final state does not have.
    pub mismatches: u64,
    /// Rows outside their client's filter.
    pub misfiltered: u64,
}

impl Summary {
    /// The summary of a core report and a clients report (merge several processes'
    /// reports first).
    pub fn new(core: &CoreReport, clients: &ClientsReport) -> Summary {
        Summary {
            shards: core.shards,
            asked_rate: core.asked_rate,
            writes_per_sec: core.achieved_rate,
            events: core.total_events(),
            kept_up: core.kept_up,
            clients: clients.clients,
            delivered_rows_per_sec: clients.rows_per_sec(),
            rows: clients.rows,
            latency: clients.latency.summary(),
            filtered_latency: clients.filtered_latency.summary(),
            unfiltered_latency: clients.unfiltered_latency.summary(),
            polls: clients.polls,
            empty_share: clients.empty_share(),
            checked: clients.checked,
            caught_up: clients.caught_up,
            omissions: clients.omissions,
            reorderings: clients.reorderings,
            mismatches: clients.mismatches,
            misfiltered: clients.misfiltered,
        }
    }

    /// Whether the run was checked and nothing was lost, reordered or wrong.
    pub fn correct(&self) -> bool {
        self.checked
            && self.caught_up
            && self.omissions == 0
            && self.reorderings == 0
            && self.mismatches == 0
            && self.misfiltered == 0
    }

    /// What keeps the run from meeting `criteria`, in words; empty when it meets
    /// them: checked and correct ([`Summary::correct`]), the rate asked kept, rows
    /// delivered, and latency and empty answers within bounds.
    pub fn misses(&self, criteria: &Criteria) -> Vec<String> {
        let mut misses = Vec::new();
        if !self.checked {
            misses.push("not checked (no final state)".to_owned());
        } else if !self.caught_up {
            misses.push("not every client caught up".to_owned());
        }
        for (count, what) in [
            (self.omissions, "omissions"),
            (self.reorderings, "reorderings"),
            (self.mismatches, "mismatches"),
            (self.misfiltered, "misfiltered rows"),
        ] {
            if count > 0 {
                misses.push(format!("{count} {what}"));
            }
        }
        if !self.kept_up {
            misses.push(format!(
                "wrote {:.0}/s of the {:.0}/s asked",
                self.writes_per_sec, self.asked_rate
            ));
        }
        if self.rows == 0 {
            misses.push("no rows delivered".to_owned());
        }
        let l = &self.latency;
        if l.avg_us > criteria.max_avg_us {
            misses.push(format!(
                "latency avg {:.0} us > {:.0} us",
                l.avg_us, criteria.max_avg_us
            ));
        }
        if l.p99_us > criteria.max_p99_us {
            misses.push(format!(
                "latency p99 {} us > {} us",
                l.p99_us, criteria.max_p99_us
            ));
        }
        if self.empty_share > criteria.max_empty_share {
            misses.push(format!(
                "{:.1} % empty answers > {:.1} %",
                self.empty_share * 100.0,
                criteria.max_empty_share * 100.0
            ));
        }
        misses
    }
}

/// What a run must meet to count at a write rate ([`Summary::misses`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    /// The most average delivery latency, µs.
    pub max_avg_us: f64,
    /// The most p99 delivery latency, µs.
    pub max_p99_us: u64,
    /// The largest share of empty answers (0 to 1).
    pub max_empty_share: f64,
}

impl Criteria {
    /// Issue 17's: average ≤ 1 ms, p99 ≤ 5 ms, ≤ 5 % empty answers (and, as always,
    /// no omission, no reordering).
    pub const ISSUE: Criteria = Criteria {
        max_avg_us: 1_000.0,
        max_p99_us: 5_000,
        max_empty_share: 0.05,
    };
}

impl Default for Criteria {
    fn default() -> Criteria {
        Criteria::ISSUE
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency;
        writeln!(
            f,
            "writes      {:>12.0} events/s (asked {:.0}/s{}), {} events to {} shard(s)",
            self.writes_per_sec,
            self.asked_rate,
            if self.kept_up { "" } else { ", FELL BEHIND" },
            self.events,
            self.shards
        )?;
        writeln!(
            f,
            "delivered   {:>12.0} rows/s to {} clients, {} rows in {} polls ({:.1} a poll), {:.1} % of polls empty",
            self.delivered_rows_per_sec,
            self.clients,
            self.rows,
            self.polls,
            self.rows as f64 / self.polls.max(1) as f64,
            self.empty_share * 100.0
        )?;
        writeln!(
            f,
            "latency     avg {:.0} us, p50 {} us, p99 {} us, max {} us (stamp to arrival)",
            l.avg_us, l.p50_us, l.p99_us, l.max_us
        )?;
        let (firms, all) = (&self.filtered_latency, &self.unfiltered_latency);
        if firms.count > 0 && all.count > 0 {
            writeln!(
                f,
                "by client   firms' avg {:.0} us, p99 {} us, max {} us; unfiltered avg {:.0} us, p99 {} us, max {} us",
                firms.avg_us, firms.p99_us, firms.max_us, all.avg_us, all.p99_us, all.max_us
            )?;
        }
        if self.checked {
            write!(
                f,
                "checked     {} omissions, {} reorderings, {} mismatches, {} misfiltered{}",
                self.omissions,
                self.reorderings,
                self.mismatches,
                self.misfiltered,
                if self.caught_up {
                    ""
                } else {
                    " (NOT every client caught up)"
                }
            )
        } else {
            write!(
                f,
                "checked     NOT CHECKED (no final state); {} reorderings, {} misfiltered",
                self.reorderings, self.misfiltered
            )
        }
    }
}
