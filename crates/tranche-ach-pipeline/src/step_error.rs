//! Why a pipeline step stopped short, sorted by what trying again can do, and turned
//! into the engine's [`Outcome`] in one place.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use tranche_ach_delivery::DeliveryError;
use tranche_ach_ledger::LedgerError;
use tranche_storage::StorageError;
use tranche_types::{one_line, BackendError, Outcome};

type Cause = Box<dyn Error + Send + Sync + 'static>;

/// How long a step waits when the store is full before trying again (without using up
/// an attempt): freeing space is someone's job, and retrying sooner does not help.
const SNOOZE_WHEN_FULL: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Discard,
    Retry,
    Snooze(Duration),
    /// As `Snooze`, when the operator was told already (once, not at every snooze).
    SnoozeQuietly(Duration),
}

/// A step's failure: what to do with the job, what the step was doing, and why.
#[derive(Debug)]
pub struct StepError {
    then: Then,
    doing: &'static str,
    cause: Cause,
}

impl StepError {
    /// Trying again cannot help (a bug, a file the validator refuses, a bank that
    /// refused our key).
    pub fn permanent(doing: &'static str, cause: impl Into<Cause>) -> Self {
        StepError {
            then: Then::Discard,
            doing,
            cause: cause.into(),
        }
    }

    /// Worth another attempt after the task's backoff (a database or server hiccup).
    pub fn transient(doing: &'static str, cause: impl Into<Cause>) -> Self {
        StepError {
            then: Then::Retry,
            doing,
            cause: cause.into(),
        }
    }

    /// The engine's decision about the job, with a one-line error naming the step.
    pub fn into_outcome<T>(self) -> Outcome<T> {
        let message = format!("{}: {}", self.doing, one_line(&*self.cause));
        match self.then {
            Then::Discard => Outcome::Discard(message),
            Then::Retry => Outcome::retry(message),
            Then::Snooze(d) => {
                tracing::warn!(error = %message, "waiting for space");
                Outcome::Snooze(d)
            }
            Then::SnoozeQuietly(d) => {
                tracing::debug!(error = %message, "waiting for space");
                Outcome::Snooze(d)
            }
        }
    }

    /// From a ledger error: every ledger failure may pass (a restart, a lost
    /// connection, a serialisation failure retried too often) except a schema too new.
    pub fn ledger(doing: &'static str, e: LedgerError) -> Self {
        match e {
            LedgerError::Newer { .. } | LedgerError::Config(_) => Self::permanent(doing, e),
            _ => Self::transient(doing, e),
        }
    }

    /// From a store error: a full store waits for space, a bad key is a bug, the rest
    /// may pass.
    pub fn store(doing: &'static str, e: StorageError) -> Self {
        match e {
            StorageError::Full { .. } => StepError {
                then: Then::Snooze(SNOOZE_WHEN_FULL),
                doing,
                cause: e.into(),
            },
            StorageError::Config(_) | StorageError::S3Setup { .. } => Self::permanent(doing, e),
            _ => Self::transient(doing, e),
        }
    }

    /// From an engine error: transient (the broker restarts), except a refused request.
    pub fn backend(doing: &'static str, e: BackendError) -> Self {
        match e {
            BackendError::Invalid { .. } => Self::permanent(doing, e),
            _ => Self::transient(doing, e),
        }
    }

    /// From a delivery error, as the delivery says; a full destination waits for
    /// space without spending an attempt (the upload told the operator).
    pub fn delivery(doing: &'static str, e: DeliveryError) -> Self {
        if matches!(e, DeliveryError::Full { .. }) {
            StepError {
                then: Then::SnoozeQuietly(crate::space::SNOOZE_WHEN_FULL),
                doing,
                cause: e.into(),
            }
        } else if e.is_transient() {
            Self::transient(doing, e)
        } else {
            Self::permanent(doing, e)
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
