//! Why a pipeline step stopped short, sorted by what trying again can do, and turned
//! into the engine's [`Outcome`] in one place.

use std::error::Error;
use std::fmt;

use tranche_ach_delivery::DeliveryError;
use tranche_ach_ledger::LedgerError;
use tranche_storage::StorageError;
use tranche_types::{one_line, BackendError, Outcome, Transience};

type Cause = Box<dyn Error + Send + Sync + 'static>;

/// A step's failure: what another attempt can do, what the step was doing, and why.
#[derive(Debug)]
pub struct StepError {
    transience: Transience,
    /// A full destination the operator was told of already (once, not at every
    /// snooze): said at debug level only.
    told: bool,
    doing: &'static str,
    cause: Cause,
}

impl StepError {
    fn new(transience: Transience, doing: &'static str, cause: impl Into<Cause>) -> Self {
        StepError {
            transience,
            told: false,
            doing,
            cause: cause.into(),
        }
    }

    /// Trying again cannot help (a bug, a file the validator refuses, a bank that
    /// refused our key).
    pub fn permanent(doing: &'static str, cause: impl Into<Cause>) -> Self {
        Self::new(Transience::Permanent, doing, cause)
    }

    /// Worth another attempt after the task's backoff (a database or server hiccup).
    pub fn transient(doing: &'static str, cause: impl Into<Cause>) -> Self {
        Self::new(Transience::Transient, doing, cause)
    }

    /// The engine's decision about the job, with a one-line error naming the step.
    pub fn into_outcome<T>(self) -> Outcome<T> {
        let message = format!("{}: {}", self.doing, one_line(&*self.cause));
        match (self.transience, self.told) {
            (Transience::Full, false) => tracing::warn!(error = %message, "waiting for space"),
            (Transience::Full, true) => tracing::debug!(error = %message, "waiting for space"),
            _ => {}
        }
        self.transience.outcome(message)
    }

    /// From a ledger error, as the ledger says ([`LedgerError::transience`]).
    pub fn ledger(doing: &'static str, e: LedgerError) -> Self {
        Self::new(e.transience(), doing, e)
    }

    /// From a store error, as the store says ([`StorageError::transience`]).
    pub fn store(doing: &'static str, e: StorageError) -> Self {
        Self::new(e.transience(), doing, e)
    }

    /// From an engine error, as the engine says ([`BackendError::transience`]).
    pub fn backend(doing: &'static str, e: BackendError) -> Self {
        Self::new(e.transience(), doing, e)
    }

    /// From a delivery error, as the delivery says ([`DeliveryError::transience`]); a
    /// full destination was told to the operator by the upload already.
    pub fn delivery(doing: &'static str, e: DeliveryError) -> Self {
        let told = matches!(e, DeliveryError::Full { .. });
        StepError {
            told,
            ..Self::new(e.transience(), doing, e)
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.doing, one_line(&*self.cause))
    }
}

/// A step's result: its value, or why it stopped.
pub type StepResult<T> = Result<T, StepError>;

/// A step's result as the engine's outcome.
pub fn outcome<T>(r: StepResult<T>) -> Outcome<T> {
    match r {
        Ok(v) => Outcome::Complete(v),
        Err(e) => e.into_outcome(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tranche_types::SNOOZE_WHEN_FULL;

    #[test]
    fn each_error_is_sorted_as_it_says_of_itself_and_named_by_the_step() {
        let missing = StorageError::NotFound {
            key: "chunk/7".into(),
        };
        assert_eq!(
            StepError::store("read chunk", missing).into_outcome::<()>(),
            Outcome::discard("read chunk: chunk/7 not found in the store")
        );
        let invalid = BackendError::Invalid {
            field: "kind",
            expected: "a name".into(),
            got: "\"\"".into(),
        };
        assert!(matches!(
            StepError::backend("enqueue writers", invalid).into_outcome::<()>(),
            Outcome::Discard(e) if e.starts_with("enqueue writers: invalid kind")
        ));
        let lost = BackendError::unavailable("complete", "connection reset", false);
        assert_eq!(
            StepError::backend("finish", lost).into_outcome::<()>(),
            Outcome::retry("finish: complete: connection reset")
        );
        let full = StorageError::Full {
            op: "write",
            key: "k".into(),
            location: "/store".into(),
            bytes: 1,
            source: std::io::Error::other("no space"),
        };
        assert_eq!(
            StepError::store("write file", full).into_outcome::<()>(),
            Outcome::Snooze(SNOOZE_WHEN_FULL)
        );
    }
}
