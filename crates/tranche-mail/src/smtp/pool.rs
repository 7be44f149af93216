//! A bounded pool of lettre SMTP connections.
//!
//! Not lettre's own pool, for two reasons found in its source (0.11): its `max_size`
//! bounds only the idle connections, so 200 concurrent sends open 200 connections;
//! and a send cancelled by a timeout hands its connection back to the pool in the
//! middle of a transaction, where the next message would be read as part of the
//! previous one's data. Here at most `size` connections exist, a connection is owned
//! by exactly one send, and one whose send was cancelled is dropped (closed), never
//! reused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::Mechanism;
use lettre::transport::smtp::client::AsyncSmtpConnection;
use lettre::transport::smtp::extension::ClientId;
use lettre::transport::smtp::response::Response;
use lettre::transport::smtp::Error;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::config::{Endpoint, Security};

/// Why a transaction failed: lettre's error, or ours for the TCP connect that we do
/// ourselves (lettre's error type cannot be built outside lettre).
#[derive(Debug)]
pub(crate) enum Failed {
    Smtp(Error),
    Connect(std::io::Error),
}

impl From<Error> for Failed {
    fn from(e: Error) -> Failed {
        Failed::Smtp(e)
    }
}

pub(crate) struct Pool {
    endpoint: Endpoint,
    hello: ClientId,
    slots: Semaphore,
    idle: Mutex<Vec<AsyncSmtpConnection>>,
    opened: AtomicU64,
}

impl Pool {
    pub fn new(endpoint: Endpoint, size: u32) -> Pool {
        Pool {
            endpoint,
            hello: ClientId::default(),
            slots: Semaphore::new(size as usize),
            idle: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
        }
    }

    /// Connections opened so far (reuse shows as far fewer than messages sent).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// One SMTP transaction on a pooled or new connection. Dropping the future drops
    /// (closes) the connection it holds.
    pub async fn send(&self, envelope: &Envelope, message: &[u8]) -> Result<Response, Failed> {
        let _slot = self
            .slots
            .acquire()
            .await
            .expect("the pool's semaphore is never closed");
        let mut conn = self.checkout().await?;
        let result = conn.send(envelope, message).await;
        // lettre marks a connection broken after any failed command; those are closed.
        if !conn.has_broken() {
            self.idle.lock().expect("idle list").push(conn);
        }
        Ok(result?)
    }

    /// Say QUIT on every idle connection.
    pub async fn close(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().expect("idle list"));
        for mut conn in idle {
            let _ = conn.quit().await;
        }
    }

    async fn checkout(&self) -> Result<AsyncSmtpConnection, Failed> {
        loop {
            let parked = self.idle.lock().expect("idle list").pop();
            match parked {
                // A NOOP round trip catches a connection the server closed while it
                // was idle, before a message is committed to it.
                Some(mut conn) => {
                    if conn.test_connected().await {
                        return Ok(conn);
                    }
                }
                None => return self.connect().await,
            }
        }
    }

    async fn connect(&self) -> Result<AsyncSmtpConnection, Failed> {
        let e = &self.endpoint;
        let wrapper = match &e.security {
            Security::Implicit(tls) => Some(tls.clone()),
            _ => None,
        };
        let mut conn = match wrapper {
            // lettre offers no way to set TCP_NODELAY on a socket it opens for
            // implicit TLS.
            Some(tls) => {
                AsyncSmtpConnection::connect_tokio1(
                    (e.host.as_str(), e.port),
                    Some(e.timeout),
                    &self.hello,
                    Some(tls),
                    None,
                )
                .await?
            }
            None => {
                let tcp = self.tcp().await?;
                AsyncSmtpConnection::connect_with_transport(Box::new(tcp), &self.hello).await?
            }
        };
        match &e.security {
            Security::StartTls(tls) => conn.starttls(tls.clone(), &self.hello).await?,
            Security::Opportunistic(tls) if conn.can_starttls() => {
                conn.starttls(tls.clone(), &self.hello).await?
            }
            _ => {}
        }
        if let Some(credentials) = &e.credentials {
            conn.auth(&[Mechanism::Plain, Mechanism::Login], credentials)
                .await?;
        }
        self.opened.fetch_add(1, Ordering::Relaxed);
        Ok(conn)
    }

    /// A TCP connection with Nagle's algorithm off. lettre writes the message and
    /// then the 5-byte end-of-data mark; with Nagle on, the mark waits for the
    /// server's delayed ACK of the message, ~10 ms per message on loopback.
    async fn tcp(&self) -> Result<TcpStream, Failed> {
        let e = &self.endpoint;
        let tcp = tokio::time::timeout(e.timeout, TcpStream::connect((e.host.as_str(), e.port)))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connection timed out"))
            .and_then(|r| r)
            .map_err(Failed::Connect)?;
        tcp.set_nodelay(true).map_err(Failed::Connect)?;
        Ok(tcp)
    }
}
