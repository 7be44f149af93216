//! What a fault-injecting wrapper of a seam scripts and counts (after asynq's test
//! broker): per call kind, the faults its next calls meet, and how many calls came.
//! The backend's `Faulty` and the ACH ledger's `FaultyLedger` both keep one.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

/// Faults scripted per call kind `Op`, and the calls counted.
pub struct FaultScript<Op, Fault> {
    plan: Mutex<HashMap<Op, VecDeque<Fault>>>,
    calls: Mutex<HashMap<Op, u64>>,
    called: Notify,
}

impl<Op: Copy + Eq + Hash + Debug, Fault> Default for FaultScript<Op, Fault> {
    fn default() -> Self {
        FaultScript {
            plan: Mutex::default(),
            calls: Mutex::default(),
            called: Notify::new(),
        }
    }
}

impl<Op: Copy + Eq + Hash + Debug, Fault> FaultScript<Op, Fault> {
    /// The next calls of `op` meet these faults, in order; later ones go through.
    pub fn inject(&self, op: Op, faults: impl IntoIterator<Item = Fault>) {
        self.plan
            .lock()
            .expect("plan lock")
            .entry(op)
            .or_default()
            .extend(faults);
    }

    /// Calls of `op` so far, failed ones included.
    pub fn calls(&self, op: Op) -> u64 {
        self.calls
            .lock()
            .expect("calls lock")
            .get(&op)
            .copied()
            .unwrap_or(0)
    }

    /// Faults scripted for `op` and not met yet.
    pub fn pending(&self, op: Op) -> usize {
        self.plan
            .lock()
            .expect("plan lock")
            .get(&op)
            .map_or(0, VecDeque::len)
    }

    /// A call of `op` comes: counted (and announced), and its scripted fault, if any.
    pub fn next(&self, op: Op) -> Option<Fault> {
        *self
            .calls
            .lock()
            .expect("calls lock")
            .entry(op)
            .or_default() += 1;
        self.called.notify_waiters();
        self.plan
            .lock()
            .expect("plan lock")
            .get_mut(&op)
            .and_then(VecDeque::pop_front)
    }

    /// Wait until `op` has been called at least `n` times; panics after `within`.
    pub async fn wait_calls(&self, op: Op, n: u64, within: Duration) {
        let waited = tokio::time::timeout(within, async {
            loop {
                let called = self.called.notified();
                tokio::pin!(called);
                called.as_mut().enable();
                if self.calls(op) >= n {
                    return;
                }
                called.await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{op:?} was called {} times within {within:?}, expected at least {n}",
            self.calls(op)
        );
    }
}
