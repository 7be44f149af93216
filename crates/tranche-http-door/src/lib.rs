//! Where Tranche's HTTP listeners meet the network: the accept loop and the limits that
//! keep slow, idle and greedy clients from holding a server's resources. `tranche
//! server` (`tranche-server`) and the order-state feed's listener
//! (`tranche-feed-http`, the door member firms use) both serve their axum [`Router`]
//! through [`serve`], so a limit is written, tested and documented once.
//!
//! `axum::serve` has none of these limits: a client sending its headers a byte at a
//! time, or thousands of connections that never send a request, held it for as long as
//! they liked (issue 32: a byte a second held the feed past 25 s, 10,500 idle
//! connections were all held 40 s and more). [`Limits`] sets four:
//!
//! - **Idle timeout** ([`Limits::idle_timeout`], default 10 s): a connection with no
//!   request in flight and no byte of the next one — just accepted, or kept alive after
//!   an answer — is closed after it.
//! - **Header timeout** ([`Limits::header_timeout`], default 10 s): once the first byte
//!   of a request has come, its headers must all be in within it, or the connection is
//!   closed. A deadline, not a gap between bytes: a client trickling its headers
//!   (slowloris) is cut off however steadily it trickles.
//! - **Body timeout** ([`Limits::body_timeout`], default 30 s): a request's whole body
//!   must arrive within it of its headers. Every request body is wrapped so that reading
//!   past the deadline fails with [`BodyTimedOut`] (found in any error chain by
//!   [`body_timed_out`]); the application answers it (both answer 408 `body_timeout`).
//!   A deadline for the whole body, again, not tower-http's gap between chunks.
//! - **Connection cap** ([`Limits::max_connections`], default 1,024): a semaphore
//!   taken before `accept`. At the cap, new connections wait in the kernel's listen
//!   backlog and are served as soon as one closes: a well-behaved client caught in a
//!   burst is answered late rather than refused, while the timeouts free the slots
//!   slow clients hold.
//!
//! **Only reading a request is timed, never answering it.** The idle and header clocks
//! stop when a request's headers are complete and start again (idle) when its answer
//! has been handed over in full, so a long poll in flight is not idle, however long it
//! waits: the feed's `GET /v1/feed/orders?wait_ms=` (up to 30 s), the server's
//! `/v1/workers/poll` and `/v1/events?wait=` (up to 60 s) outlast the 10 s defaults.
//! Nor is writing an answer timed: a client that stops reading one holds its slot until
//! TCP gives up (not covered yet).
//!
//! **Why not hyper's `header_read_timeout`.** hyper starts that clock when it begins
//! waiting for a request, so it is one deadline for idling *and* sending the headers:
//! an idle timeout longer than the header timeout could not be had. Here each
//! connection has a small watch (`src/activity.rs`): its socket reports the first byte
//! read while idle, the service reports when a request begins and when its answer's
//! body is dropped (hyper drops it once written), and a watchdog beside the connection
//! closes it when the deadline of its current phase passes. A connection busy with a
//! request has no deadline.
//!
//! Shutdown is graceful as with `axum::serve`: stop accepting, let every connection
//! finish the request in flight, then close.

#![deny(missing_docs)]

mod activity;
mod body;

pub use body::{body_timed_out, BodyTimedOut};

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::activity::{Activity, Watched};
use crate::body::{TimedBody, Tracked};

/// [`Limits::header_timeout`]'s default, in seconds.
pub const DEFAULT_HEADER_TIMEOUT_SECS: u64 = 10;
/// [`Limits::idle_timeout`]'s default, in seconds.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 10;
/// [`Limits::body_timeout`]'s default, in seconds.
pub const DEFAULT_BODY_TIMEOUT_SECS: u64 = 30;
/// [`Limits::max_connections`]'s default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// What a listener tolerates of its clients (see the crate docs for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Longest a client may take to send a request's headers, from their first byte;
    /// the connection is closed after it.
    pub header_timeout: Duration,
    /// Longest a connection may stay open with no request in flight and no byte of the
    /// next one (after it is accepted, or after an answer); closed after it.
    pub idle_timeout: Duration,
    /// Longest a client may take to send a request's body once its headers are in;
    /// reading the body fails with [`BodyTimedOut`] after it. Also the longest a
    /// client may leave an answer unread (no byte of it taken): the connection is
    /// closed after it.
    pub body_timeout: Duration,
    /// Most connections open at once; further ones wait in the listen backlog until one
    /// closes.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT_SECS),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECS),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A limit out of range: zero timeouts would close every connection, a zero cap would
/// serve none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: expected {expected}, got {got}")]
pub struct LimitsError {
    /// The limit, named as in [`Limits`].
    pub field: &'static str,
    /// What would be accepted.
    pub expected: &'static str,
    /// The value given.
    pub got: String,
}

impl Limits {
    /// Refuse zero timeouts and a zero cap. [`serve`] calls it too; call it first to
    /// report a bad configuration before opening anything.
    pub fn validate(&self) -> Result<(), LimitsError> {
        for (field, timeout) in [
            ("header_timeout", self.header_timeout),
            ("idle_timeout", self.idle_timeout),
            ("body_timeout", self.body_timeout),
        ] {
            if timeout.is_zero() {
                return Err(LimitsError {
                    field,
                    expected: "more than 0",
                    got: format!("{timeout:?}"),
                });
            }
        }
        if self.max_connections == 0 {
            return Err(LimitsError {
                field: "max_connections",
                expected: "at least 1",
                got: "0".into(),
            });
        }
        Ok(())
    }
}

/// Serve `router` on `listener` within `limits` until `shutdown` is cancelled, then
/// finish the requests in flight and return. Failed accepts are logged and retried
/// (out of file descriptors, a second later), never returned: the only error is
/// `limits` refused by [`Limits::validate`], before anything is served.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> Result<(), LimitsError> {
    limits.validate()?;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = http1::Builder::new();
    // The header and idle clocks are the watchdog's (see the crate docs): hyper's own
    // would run through idle time too.
    http.header_read_timeout(None);
    let graceful = GracefulShutdown::new();
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
            () = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    wait_out_accept_error(e).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let activity = Arc::new(Activity::new());
        let service = {
            let activity = activity.clone();
            let router = router.clone();
            hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                // Called as soon as the headers are parsed: the request is in flight
                // until hyper drops its answer's body.
                let in_flight = activity.request_began();
                let mut router = router.clone();
                let request = request
                    .map(|body| axum::body::Body::new(TimedBody::new(body, limits.body_timeout)));
                async move {
                    let response = tower_service::Service::call(&mut router, request).await?;
                    Ok::<_, Infallible>(response.map(|body| Tracked::new(body, in_flight)))
                }
            })
        };
        let io = TokioIo::new(Watched::new(stream, activity.clone(), limits.body_timeout));
        let conn = graceful.watch(http.serve_connection(io, service));
        tokio::spawn(async move {
            tokio::select! {
                ended = conn => if let Err(e) = ended {
                    // Clients going away are routine: not worth a warning.
                    tracing::debug!(error = %e, "connection ended with an error");
                },
                phase = activity.expired(&limits) => {
                    tracing::debug!(phase, "closing a connection past its {phase} timeout");
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// A connection reset before it was accepted is the client's business; anything else
/// (out of file descriptors) is logged and waited out instead of spinning.
async fn wait_out_accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_and_the_cap_must_be_positive() {
        assert_eq!(Limits::default().validate(), Ok(()));
        let zero = |f: fn(&mut Limits)| {
            let mut limits = Limits::default();
            f(&mut limits);
            limits.validate().unwrap_err().field
        };
        assert_eq!(
            zero(|l| l.header_timeout = Duration::ZERO),
            "header_timeout"
        );
        assert_eq!(zero(|l| l.idle_timeout = Duration::ZERO), "idle_timeout");
        assert_eq!(zero(|l| l.body_timeout = Duration::ZERO), "body_timeout");
        assert_eq!(zero(|l| l.max_connections = 0), "max_connections");
    }
}
