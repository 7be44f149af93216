//! A full destination (an outbox's disk) pauses its bank's uploads instead of failing
//! them.
//!
//! Retrying a write to a full disk a few seconds later fails the same way: an upload
//! used about 7 of its 20 attempts in a minute, so an outage of a few minutes would have
//! failed it for good, and nothing said why. So an upload that does not fit
//! ([`DeliveryError::Full`](tranche_ach_delivery::DeliveryError::Full)) is given back
//! without spending an attempt ([`SNOOZE_WHEN_FULL`](tranche_types::SNOOZE_WHEN_FULL)), the operator is told once per
//! destination (the path, the file that did not fit and its size, the space free
//! there), and once per destination again when a delivery there succeeds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use tranche_storage::human_bytes;

/// A destination where the last delivery did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FullDestination {
    /// The bank whose uploads wait.
    pub bank: String,
    /// The destination (`outbox:/path`): where space must be freed.
    pub location: String,
    /// The size of the file that did not fit.
    pub bytes: u64,
    /// Deliveries there that did not fit since the first (each given back without
    /// spending an attempt).
    pub tries: u64,
    /// Seconds since the first delivery that did not fit.
    pub for_secs: u64,
}

#[derive(Default)]
pub(crate) struct Destinations {
    full: Mutex<HashMap<String, (FullDestination, Instant)>>,
}

impl Destinations {
    /// A delivery of `name` (`bytes` long) for `bank` did not fit at `location`.
    pub(crate) fn full(
        &self,
        bank: &str,
        location: &str,
        name: &str,
        bytes: u64,
        free: Option<u64>,
    ) {
        let mut full = self
            .full
            .lock()
            .expect("the destinations lock is never poisoned");
        if let Some((d, _)) = full.get_mut(location) {
            d.tries += 1;
            return;
        }
        let free = free.map_or_else(|| "unknown".to_string(), human_bytes);
        tracing::warn!(
            "{location} is full: {name} ({}) does not fit, {free} free; bank {bank}'s uploads wait, without spending attempts, and go on by themselves once space is freed there",
            human_bytes(bytes)
        );
        full.insert(
            location.to_string(),
            (
                FullDestination {
                    bank: bank.to_string(),
                    location: location.to_string(),
                    bytes,
                    tries: 1,
                    for_secs: 0,
                },
                Instant::now(),
            ),
        );
    }

    /// A delivery to `location` succeeded.
    pub(crate) fn room(&self, location: &str) {
        let mut full = self
            .full
            .lock()
            .expect("the destinations lock is never poisoned");
        if let Some((d, since)) = full.remove(location) {
            tracing::warn!(
                "{location} has room again after {} s: bank {}'s uploads go on",
                since.elapsed().as_secs(),
                d.bank
            );
        }
    }

    /// The destinations full now.
    pub(crate) fn now_full(&self) -> Vec<FullDestination> {
        let full = self
            .full
            .lock()
            .expect("the destinations lock is never poisoned");
        let mut out: Vec<FullDestination> = full
            .values()
            .map(|(d, since)| FullDestination {
                for_secs: since.elapsed().as_secs(),
                ..d.clone()
            })
            .collect();
        out.sort_by(|a, b| a.location.cmp(&b.location));
        out
    }
}
