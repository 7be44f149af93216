//! Accepting and serving connections, with the limits `axum::serve` cannot set: a
//! header-read timeout (hyper's own, which needs a timer) and a cap on open
//! connections. Without them a client sending its headers a byte at a time, or a
//! thousand idle sockets, hold the server's resources forever.
//!
//! The cap is a semaphore taken before `accept`: at the cap, new connections wait in
//! the kernel's listen backlog and are served as soon as one closes. Waiting rather
//! than refusing keeps well-behaved clients working through a burst (their connect
//! succeeds and their request is answered late), while the header timeout frees the
//! slots slow clients hold.
//!
//! Shutdown is graceful as with `axum::serve`: stop accepting, let every connection
//! finish the request in flight, then close.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Per-connection limits, from the server's configuration.
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
}

pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
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
        let service = TowerToHyperService::new(router.clone());
        let conn = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                // Timeouts and clients going away are routine: not worth a warning.
                tracing::debug!(error = %e, "connection ended with an error");
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
