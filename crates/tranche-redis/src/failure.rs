//! What a failed Redis call means to its caller: the server could not be reached or
//! cannot serve yet ([`BackendError::Unavailable`], worth trying again), or the call
//! itself failed ([`BackendError::Store`]).

use std::time::Duration;

use redis::{ErrorKind, RedisError};
use tranche_types::BackendError;

/// No connection to the server at `url` (its password never shown).
#[derive(Debug, thiserror::Error)]
#[error("{url}: {source}")]
pub(crate) struct ConnectFailed {
    pub url: String,
    #[source]
    pub source: RedisError,
}

/// The wake-up subscription to the server at `url` was not confirmed in time.
#[derive(Debug, thiserror::Error)]
#[error("{url}: no subscription within {} s", within.as_secs())]
pub(crate) struct NoSubscription {
    pub url: String,
    pub within: Duration,
}

/// Maps a failed call of `op` to a [`BackendError`].
pub(crate) fn store(op: &'static str) -> impl Fn(RedisError) -> BackendError {
    move |e| classify(op, e)
}

/// A failed call keeps its [`RedisError`] as its cause, an outage too.
fn classify(op: &'static str, e: RedisError) -> BackendError {
    // Refused before anything was sent, or refused by a server that cannot serve yet
    // (a restarted one loading its data): the call certainly did not run.
    let not_applied = e.is_connection_refusal()
        || matches!(
            e.kind(),
            ErrorKind::BusyLoadingError
                | ErrorKind::TryAgain
                | ErrorKind::MasterDown
                | ErrorKind::ClusterDown
        );
    if not_applied {
        return BackendError::unavailable(op, e, false);
    }
    // A dropped connection or a reply that did not come in time: the script may have
    // run before the connection went.
    if e.is_io_error() {
        return BackendError::unavailable(op, e, true);
    }
    BackendError::store(op, e)
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;

    fn maybe_applied(e: RedisError) -> Option<bool> {
        match classify("op", e) {
            BackendError::Unavailable { maybe_applied, .. } => Some(maybe_applied),
            _ => None,
        }
    }

    #[test]
    fn outages_are_told_apart_from_failed_calls() {
        let io = |kind| RedisError::from(io::Error::from(kind));
        assert_eq!(
            maybe_applied(io(io::ErrorKind::ConnectionRefused)),
            Some(false)
        );
        assert_eq!(
            maybe_applied(RedisError::from((ErrorKind::BusyLoadingError, "LOADING"))),
            Some(false)
        );
        assert_eq!(maybe_applied(io(io::ErrorKind::BrokenPipe)), Some(true));
        assert_eq!(
            maybe_applied(io(io::ErrorKind::ConnectionReset)),
            Some(true)
        );
        assert_eq!(maybe_applied(io(io::ErrorKind::TimedOut)), Some(true));
        assert_eq!(
            maybe_applied(RedisError::from((
                ErrorKind::ResponseError,
                "ERR in script"
            ))),
            None
        );
    }
}
