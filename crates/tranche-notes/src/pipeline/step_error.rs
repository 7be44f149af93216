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
use tranche_types::{BackendError, Outcome, Transience, SNOOZE_WHEN_FULL};

use super::source::NightError;
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
pub(crate) struct StepError {
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
    pub(crate) fn permanent(cause: impl Into<Cause>) -> Self {
        Self::new(Then::Discard, cause)
    }

    /// Worth another attempt after the task's backoff: a store or mail server hiccup.
    pub(crate) fn transient(cause: impl Into<Cause>) -> Self {
        Self::new(Then::Retry, cause)
    }

    /// Not now: a full store or outbox; tried again after `after` without using up an
    /// attempt.
    pub(crate) fn snooze(after: Duration, cause: impl Into<Cause>) -> Self {
        Self::new(Then::Snooze(after), cause)
    }

    /// As the error says of itself (`StorageError::transience` and the like).
    fn classified(transience: Transience, cause: impl Into<Cause>) -> Self {
        match transience {
            Transience::Permanent => Self::permanent(cause),
            Transience::Transient => Self::transient(cause),
            Transience::Full => Self::snooze(SNOOZE_WHEN_FULL, cause),
        }
    }

    /// The job was cancelled; `reason` is said as it is.
    pub(crate) fn cancelled(reason: impl Into<Cause>) -> Self {
        StepError {
            about_client: false,
            ..Self::new(Then::Cancel, reason)
        }
    }

    /// Says what the step was doing (`render`) before the cause.
    pub(crate) fn at(self, stage: &'static str) -> Self {
        StepError {
            stage: Some(stage),
            ..self
        }
    }

    /// The engine's decision about the job of `client`.
    pub(crate) fn into_outcome<T>(self, client: &str) -> Outcome<T> {
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
        // The cause's own causes too: a job's error is read on its own, with no
        // printer of chains in between.
        write!(f, "{}", tranche_types::one_line(self.cause.as_ref()))
    }
}

impl Error for StepError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// For `?` in a step: its own failures as permanent, and any error said with what the
/// step was doing.
pub(crate) trait StepResult<T, E> {
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
pub(crate) fn settle<T>(result: Result<T, StepError>, client: &str) -> Outcome<T> {
    match result {
        Ok(v) => Outcome::Complete(v),
        Err(e) => e.into_outcome(client),
    }
}

/// An artifact the step needs is gone: its step must run again first, which a retry of
/// the run does, not another attempt of this one.
#[derive(Debug, thiserror::Error)]
#[error("{key} is missing from the store")]
struct Missing {
    key: String,
    /// Said in the step's words above, so not a `source` a printer would repeat.
    #[cfg_attr(not(test), allow(dead_code))]
    restated: StorageError,
}

/// As the store says ([`StorageError::transience`]); a missing artifact in the step's
/// words.
impl From<StorageError> for StepError {
    fn from(e: StorageError) -> Self {
        let transience = e.transience();
        match e {
            StorageError::NotFound { ref key } => StepError::classified(
                transience,
                Missing {
                    key: key.clone(),
                    restated: e,
                },
            ),
            other => StepError::classified(transience, other),
        }
    }
}

/// A mail server's "not now", said in its own words.
#[derive(Debug, thiserror::Error)]
#[error("{reply}")]
struct Deferred {
    reply: String,
    /// The reply above is its words: not a `source` a printer would repeat.
    #[allow(dead_code)]
    restated: MailError,
}

/// As the mailer says ([`MailError::transience`]); a server's "not now" in its own
/// words.
impl From<MailError> for StepError {
    fn from(e: MailError) -> Self {
        let transience = e.transience();
        match e {
            MailError::Temporary(ref reply) => StepError::classified(
                transience,
                Deferred {
                    reply: reply.to_string(),
                    restated: e,
                },
            ),
            other => StepError::classified(transience, other),
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

/// As the engine says ([`BackendError::transience`]).
impl From<BackendError> for StepError {
    fn from(e: BackendError) -> Self {
        StepError::classified(e.transience(), e)
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

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn outcome(e: StepError) -> Outcome<()> {
        e.into_outcome("C042")
    }

    fn not_found() -> StorageError {
        StorageError::NotFound {
            key: "3-tmp-pdf/2026-11-20/C042.pdf".into(),
        }
    }

    #[test]
    fn the_client_and_the_stage_are_said_once_before_the_cause() {
        assert_eq!(
            outcome(StepError::permanent("not in the client master")),
            Outcome::discard("client C042: not in the client master")
        );
        assert_eq!(
            outcome(StepError::from(not_found()).at("sign")),
            Outcome::discard(
                "client C042: sign: 3-tmp-pdf/2026-11-20/C042.pdf is missing from the store"
            )
        );
        let io = StorageError::Io {
            op: "get",
            key: "k".into(),
            source: "connection reset".into(),
        };
        assert_eq!(
            outcome(StepError::from(io).at("render")),
            Outcome::retry("client C042: render: get k: connection reset")
        );
    }

    #[test]
    fn mail_replies_are_sorted_by_what_another_attempt_can_do() {
        let mail = |e: MailError| outcome(StepError::from(e).at("mail"));
        assert_eq!(
            mail(MailError::Temporary("421 try later".into())),
            Outcome::retry("client C042: mail: 421 try later")
        );
        assert_eq!(
            mail(MailError::Permanent("550 no such user".into())),
            Outcome::discard("client C042: mail: permanent mail failure: 550 no such user")
        );
        assert_eq!(
            mail(MailError::Full("outbox".into())),
            Outcome::Snooze(SNOOZE_WHEN_FULL)
        );
    }

    #[test]
    fn a_full_store_snoozes_and_keeps_its_cause() {
        let full = StorageError::Full {
            op: "put",
            key: "k".into(),
            location: "/store".into(),
            bytes: 10,
            source: std::io::Error::other("no space"),
        };
        let e = StepError::from(full);
        assert!(matches!(
            e.source().and_then(|s| s.downcast_ref::<StorageError>()),
            Some(StorageError::Full { .. })
        ));
        assert_eq!(outcome(e), Outcome::Snooze(SNOOZE_WHEN_FULL));
    }

    #[test]
    fn a_missing_artifact_keeps_the_store_error() {
        let e = StepError::from(not_found());
        let missing = e.source().and_then(|s| s.downcast_ref::<Missing>());
        assert!(matches!(
            missing.map(|m| &m.restated),
            Some(StorageError::NotFound { .. })
        ));
        assert!(
            missing.and_then(|m| m.source()).is_none(),
            "restated in the step's words, not a cause to print again"
        );
    }

    #[test]
    fn cancellations_and_nights_are_not_said_of_the_client() {
        assert_eq!(
            outcome(StepError::cancelled("cancelled before the mail was sent")),
            Outcome::cancel("cancelled before the mail was sent")
        );
        let date = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
        let unreadable = NightError::Unreadable {
            date,
            source: StorageError::Config("bad".into()),
        };
        assert_eq!(
            outcome(unreadable.into()),
            Outcome::retry("reading the night of 2026-11-20: bad")
        );
        let garbled = NightError::Garbled {
            date,
            source: serde_json::from_str::<u8>("x").unwrap_err(),
        };
        assert!(
            matches!(outcome(garbled.into()), Outcome::Discard(e) if e.starts_with("the broker details of 2026-11-20 in the store: "))
        );
    }
}
