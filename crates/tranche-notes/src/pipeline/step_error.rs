//! Why a step stopped short of its result, sorted by what trying again can do: nothing
//! (the client's chain ends with the reason), something (retried with backoff), or
//! something once space is freed (snoozed, without using up an attempt). Turned into
//! the engine's [`Outcome`] in one place, [`StepError::into_outcome`], which names the
//! client; what the step was doing (`render: `) is said by the step, with
//! [`StepError::at`].

use std::error::Error;
use std::fmt;
use std::time::Duration;

use tranche_mail::MailError;
use tranche_storage::StorageError;
use tranche_types::{BackendError, Outcome};

use super::source::NightError;
use super::space::SNOOZE_WHEN_FULL;
use crate::render::helper::HelperError;

type Cause = Box<dyn Error + Send + Sync + 'static>;

/// What the engine does with the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Discard,
    Retry,
    Snooze(Duration),
    /// The job was stopped from outside: not a failure of the client's note.
    Cancel,
}

#[derive(Debug)]
pub struct StepError {
    then: Then,
    /// What the step was doing, said before the cause.
    stage: Option<&'static str>,
    /// Whether the reason is about the client's note (most are) or about the night or
    /// the job, which the client's code would only misattribute.
    about_client: bool,
    cause: Cause,
}

impl StepError {
    fn new(then: Then, cause: impl Into<Cause>) -> Self {
        StepError {
            then,
            stage: None,
            about_client: true,
            cause: cause.into(),
        }
    }

    /// Trying again cannot help: an input, template or signing problem, a refused mail.
    pub fn permanent(cause: impl Into<Cause>) -> Self {
        Self::new(Then::Discard, cause)
    }

    /// Worth another attempt after the task's backoff: a store or mail server hiccup.
    pub fn transient(cause: impl Into<Cause>) -> Self {
        Self::new(Then::Retry, cause)
    }

    /// Not now: a full store or outbox; tried again after `after` without using up an
    /// attempt.
    pub fn snooze(after: Duration, cause: impl Into<Cause>) -> Self {
        Self::new(Then::Snooze(after), cause)
    }

    /// The job was cancelled; `reason` is said as it is.
    pub fn cancelled(reason: impl Into<Cause>) -> Self {
        StepError {
            about_client: false,
            ..Self::new(Then::Cancel, reason)
        }
    }

    /// Says what the step was doing (`render`) before the cause.
    pub fn at(self, stage: &'static str) -> Self {
        StepError {
            stage: Some(stage),
            ..self
        }
    }

    /// The engine's decision about the job of `client`.
    pub fn into_outcome<T>(self, client: &str) -> Outcome<T> {
        let reason = if self.about_client {
            format!("client {client}: {self}")
        } else {
            self.to_string()
        };
        match self.then {
            Then::Discard => Outcome::discard(reason),
            Then::Retry => Outcome::retry(reason),
            Then::Snooze(after) => Outcome::Snooze(after),
            Then::Cancel => Outcome::cancel(reason),
        }
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(stage) = self.stage {
            write!(f, "{stage}: ")?;
        }
        write!(f, "{}", self.cause)
    }
}

impl Error for StepError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// For `?` in a step: its own failures as permanent, and any error said with what the
/// step was doing.
pub trait StepResult<T, E> {
    /// Trying again cannot help, whatever the error.
    fn permanent(self) -> Result<T, StepError>
    where
        E: Into<Cause>;

    /// The error, sorted by its `From` impl, said after `stage`.
    fn at(self, stage: &'static str) -> Result<T, StepError>
    where
        E: Into<StepError>;
}

impl<T, E> StepResult<T, E> for Result<T, E> {
    fn permanent(self) -> Result<T, StepError>
    where
        E: Into<Cause>,
    {
        self.map_err(StepError::permanent)
    }

    fn at(self, stage: &'static str) -> Result<T, StepError>
    where
        E: Into<StepError>,
    {
        self.map_err(|e| e.into().at(stage))
    }
}

/// A step's result as the engine's decision about the job of `client`.
pub fn settle<T>(result: Result<T, StepError>, client: &str) -> Outcome<T> {
    match result {
        Ok(v) => Outcome::Complete(v),
        Err(e) => e.into_outcome(client),
    }
}

/// An artifact the step needs is gone: its step must run again first, which a retry of
/// the run does, not another attempt of this one.
#[derive(Debug, thiserror::Error)]
#[error("{key} is missing from the store")]
pub struct Missing {
    key: String,
    #[source]
    source: StorageError,
}

/// A store failure is worth retrying; a missing artifact is not; a full store is
/// waited for.
impl From<StorageError> for StepError {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::NotFound { ref key } => StepError::permanent(Missing {
                key: key.clone(),
                source: e,
            }),
            StorageError::Full { .. } => StepError::snooze(SNOOZE_WHEN_FULL, e),
            other => StepError::transient(other),
        }
    }
}

/// A mail server's "not now", said in its own words.
#[derive(Debug, thiserror::Error)]
#[error("{reply}")]
pub struct Deferred {
    reply: String,
    #[source]
    source: MailError,
}

/// A 4xx reply or a lost connection is retried; a full outbox is waited for (nothing
/// was sent); a refusal or a malformed mail ends the chain.
impl From<MailError> for StepError {
    fn from(e: MailError) -> Self {
        match e {
            MailError::Temporary(ref reply) => StepError::transient(Deferred {
                reply: reply.clone(),
                source: e,
            }),
            MailError::Full(_) => StepError::snooze(SNOOZE_WHEN_FULL, e),
            other => StepError::permanent(other),
        }
    }
}

/// A note that cannot be rendered stays so; a lost helper process is replaced.
impl From<HelperError> for StepError {
    fn from(e: HelperError) -> Self {
        match e {
            HelperError::Render(_) => StepError::permanent(e),
            HelperError::Lost(_) => StepError::transient(e),
        }
    }
}

impl From<BackendError> for StepError {
    fn from(e: BackendError) -> Self {
        StepError::transient(e)
    }
}

/// A night that cannot be loaded fails the job, said without the client: every
/// client of the night fails alike.
impl From<NightError> for StepError {
    fn from(e: NightError) -> Self {
        let then = if e.is_transient() {
            Then::Retry
        } else {
            Then::Discard
        };
        StepError {
            about_client: false,
            ..StepError::new(then, e)
        }
    }
}
