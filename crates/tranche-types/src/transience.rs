//! What another attempt can do about a failure: the one step-error policy of every
//! pipeline. Each leaf error says which of the three it is, beside its own definition
//! (`StorageError::transience`, `MailError::transience`, `LedgerError::transience`,
//! `DeliveryError::transience`, [`BackendError::transience`]); [`Transience::outcome`]
//! turns that into the engine's decision once. Pipelines add only their own domain
//! errors (a night nobody published, a note that cannot render).
//!
//! Decided where the pipelines used to disagree (docs/architecture.md, "Step errors"):
//! a key missing from the store is permanent (both stores read what was written, so it
//! stays missing until the step that writes it runs again, which a retry of the run
//! does); a store or backend that is misconfigured, or a request the backend refuses as
//! invalid, is permanent (the same call is refused again, and retrying only hides the
//! cause); a full disk waits [`SNOOZE_WHEN_FULL`] without spending an attempt.

use std::fmt::Display;
use std::time::Duration;

use crate::{BackendError, Outcome};

/// What another attempt can do about a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transience {
    /// Nothing: a bug, bad input, a refusal, a misconfiguration. The job fails.
    Permanent,
    /// Maybe, after the backoff: a lost connection, a restarting server.
    Transient,
    /// Not until someone frees space: the job waits without spending an attempt.
    Full,
}

/// How long a job whose write did not fit waits before it is offered again: a full
/// disk is freed by a person or a clean-up, so seconds lost after it is freed cost
/// nothing, while every re-offer of a waiting job costs a reserve and a completion.
pub const SNOOZE_WHEN_FULL: Duration = Duration::from_secs(5);

impl Transience {
    /// The engine's decision about a job that failed so, `reason` saying why.
    pub fn outcome<T>(self, reason: impl Display) -> Outcome<T> {
        match self {
            Transience::Permanent => Outcome::discard(reason),
            Transience::Transient => Outcome::retry(reason),
            Transience::Full => Outcome::Snooze(SNOOZE_WHEN_FULL),
        }
    }
}

impl BackendError {
    /// What another attempt can do: a full store waits for space; a request refused as
    /// invalid is refused again; the rest (a lost connection, a store error, a conflict,
    /// a backend shutting down) may pass.
    pub fn transience(&self) -> Transience {
        match self {
            BackendError::Full { .. } => Transience::Full,
            BackendError::Invalid { .. } => Transience::Permanent,
            _ => Transience::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_becomes_one_decision() {
        assert_eq!(
            Transience::Permanent.outcome::<()>("bad"),
            Outcome::discard("bad")
        );
        assert_eq!(
            Transience::Transient.outcome::<()>("lost"),
            Outcome::retry("lost")
        );
        assert_eq!(
            Transience::Full.outcome::<()>("full"),
            Outcome::Snooze(SNOOZE_WHEN_FULL)
        );
    }

    #[test]
    fn a_refused_request_is_permanent_and_a_full_store_waits() {
        let invalid = BackendError::Invalid {
            field: "kind",
            expected: "a name".into(),
            got: String::new(),
        };
        assert_eq!(invalid.transience(), Transience::Permanent);
        let full = BackendError::Full {
            op: "enqueue",
            path: "/data/tranche.db".into(),
            source: "disk full".into(),
        };
        assert_eq!(full.transience(), Transience::Full);
        assert_eq!(
            BackendError::unavailable("complete", "reset", false).transience(),
            Transience::Transient
        );
    }
}
