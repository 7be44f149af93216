use std::fmt::Display;
use std::time::Duration;

/// What a handler decides about its job: a closed set, so every path through a handler
/// maps to exactly one state transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// Done; `T` is the result handed to the next step of a chain or to a group callback.
    Complete(T),
    /// Failed this attempt; run again after `after` (or the task's backoff when `None`)
    /// unless the attempts are exhausted, then the job fails with this error.
    Retry {
        /// Why the attempt failed, kept in the job's errors.
        error: String,
        /// How long to wait before the next attempt; `None` takes the task's backoff.
        after: Option<Duration>,
    },
    /// Not now: run again after the duration without using up an attempt.
    Snooze(Duration),
    /// Stop this job (and what depends on it) for good, not as a failure.
    Cancel(String),
    /// Failed for good; no further attempts.
    Discard(String),
}

impl<T> Outcome<T> {
    /// Retry after the task's backoff, with `error` as the attempt's error.
    pub fn retry(error: impl Display) -> Self {
        Outcome::Retry {
            error: error.to_string(),
            after: None,
        }
    }

    /// Retry after `after` rather than the task's backoff (e.g. a server said when).
    pub fn retry_after(error: impl Display, after: Duration) -> Self {
        Outcome::Retry {
            error: error.to_string(),
            after: Some(after),
        }
    }

    /// Fail the job for good with `error`, whatever attempts are left.
    pub fn discard(error: impl Display) -> Self {
        Outcome::Discard(error.to_string())
    }

    /// Cancel the job (and the chain steps after it) with `reason`.
    pub fn cancel(reason: impl Display) -> Self {
        Outcome::Cancel(reason.to_string())
    }

    /// The same decision about a result of another type: `f` turns a completed result;
    /// the other outcomes carry no result and stay as they are.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        match self {
            Outcome::Complete(v) => Outcome::Complete(f(v)),
            Outcome::Retry { error, after } => Outcome::Retry { error, after },
            Outcome::Snooze(after) => Outcome::Snooze(after),
            Outcome::Cancel(reason) => Outcome::Cancel(reason),
            Outcome::Discard(error) => Outcome::Discard(error),
        }
    }
}

/// `Ok(v)` completes; `Err(e)` is retried with the task's backoff, the common case for
/// transient errors propagated with `?`.
impl<T, E: Display> From<Result<T, E>> for Outcome<T> {
    fn from(r: Result<T, E>) -> Self {
        match r {
            Ok(v) => Outcome::Complete(v),
            Err(e) => Outcome::retry(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_turns_a_result_and_keeps_every_other_decision() {
        let text = |n: u8| n.to_string();
        assert_eq!(
            Outcome::Complete(2).map(text),
            Outcome::Complete("2".into())
        );
        let after = Duration::from_secs(3);
        assert_eq!(
            Outcome::retry_after("busy", after).map(text),
            Outcome::retry_after("busy", after)
        );
        assert_eq!(Outcome::Snooze(after).map(text), Outcome::Snooze(after));
        assert_eq!(
            Outcome::cancel("stopped").map(text),
            Outcome::cancel("stopped")
        );
        assert_eq!(
            Outcome::discard("broken").map(text),
            Outcome::discard("broken")
        );
    }
}
