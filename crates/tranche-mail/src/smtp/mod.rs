mod config;
mod pool;

pub use config::SmtpConfig;

use std::error::Error as _;
use std::time::Duration;

use async_trait::async_trait;
use lettre::transport::smtp::response::Response;

use crate::{message, redact, Mail, MailError, Mailer, Reason, Sent};
use config::Endpoint;
use pool::{Failed, Pool};

/// Mail over SMTP through a pool of at most `pool_size` connections.
///
/// Within one `send`: a 4xx reply, a failed connection or a timeout is retried up to
/// `max_attempts` times with doubling backoff, then reported as
/// [`MailError::Temporary`]; a 5xx reply is [`MailError::Permanent`] with the server's
/// reply text (addresses blanked). A timeout or lost connection after the message was
/// transmitted may mean the server has it: the retry then delivers it twice, with the
/// same `Message-ID`.
pub struct SmtpMailer {
    pool: Pool,
    server: String,
    timeout: Duration,
    max_attempts: u32,
    backoff: Duration,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("server", &self.server)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// Validates `config` (URL, TLS settings, credentials); connects lazily on the
    /// first send.
    pub fn new(config: SmtpConfig) -> Result<Self, MailError> {
        let endpoint: Endpoint = config::endpoint(&config)?;
        Ok(SmtpMailer {
            server: endpoint.server(),
            pool: Pool::new(endpoint, config.pool_size),
            timeout: config.timeout,
            max_attempts: config.max_attempts,
            backoff: Duration::from_millis(500),
        })
    }

    /// The wait before the second attempt (default 500 ms); it doubles for each
    /// further one.
    pub fn with_retry_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }

    /// Connections opened so far; with reuse, far fewer than the messages sent.
    pub fn connections_opened(&self) -> u64 {
        self.pool.opened()
    }
}

enum Failure {
    Retry(Reason),
    Permanent(Reason),
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: &Mail) -> Result<Sent, MailError> {
        let (envelope, bytes) = message::compose(mail)?;
        let mut attempt = 1;
        loop {
            let failure =
                match tokio::time::timeout(self.timeout, self.pool.send(&envelope, &bytes)).await {
                    Ok(Ok(response)) => {
                        return Ok(Sent {
                            message_id: mail.message_id.clone(),
                            reply: redact::addresses(&reply_text(&response)),
                        })
                    }
                    Ok(Err(Failed::Smtp(e))) => classify(&e, &self.server),
                    Ok(Err(Failed::Connect(e))) => Failure::Retry(Reason::because(
                        format!("SMTP server {}: cannot connect", self.server),
                        e,
                    )),
                    Err(_) => Failure::Retry(
                        format!(
                            "no reply from the SMTP server {} within {:?}",
                            self.server, self.timeout
                        )
                        .into(),
                    ),
                };
            match failure {
                Failure::Permanent(reason) => return Err(MailError::Permanent(reason)),
                Failure::Retry(reason) if attempt >= self.max_attempts => {
                    return Err(MailError::Temporary(
                        reason.with_suffix(&format!(" (after {attempt} attempts)")),
                    ))
                }
                Failure::Retry(reason) => {
                    let wait = self.backoff.saturating_mul(1 << (attempt - 1).min(16));
                    tracing::debug!(message_id = %mail.message_id, attempt, ?wait, %reason, "mail attempt failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    /// Idle connections get a QUIT; sends after this open new ones.
    async fn close(&self) {
        self.pool.close().await;
    }
}

fn reply_text(response: &Response) -> String {
    let lines: Vec<&str> = response.message().collect();
    format!("{} {}", response.code(), lines.join(" "))
}

/// Sorts a lettre error into retry-later or never, as text free of addresses. The
/// error is not kept as a cause: lettre's errors quote the server's replies, and those
/// quote recipients' addresses, which only the redacted text is free of.
fn classify(e: &lettre::transport::smtp::Error, server: &str) -> Failure {
    let detail = e.source().map(|s| s.to_string()).unwrap_or_default();
    let text = |what: String| Reason::new(redact::addresses(&what));
    match e.status() {
        Some(code) if e.is_permanent() => Failure::Permanent(text(format!("{code} {detail}"))),
        Some(code) => Failure::Retry(text(format!("{code} {detail}"))),
        // The client refusing (no common AUTH mechanism, no STARTTLS offered, non-ASCII
        // addresses without SMTPUTF8) does not change by retrying.
        None if e.is_client() => {
            Failure::Permanent(text(format!("SMTP server {server}: {detail}")))
        }
        None if e.is_timeout() => Failure::Retry(format!("SMTP server {server}: timed out").into()),
        // lettre nests its connection errors, each saying "Connection error": the
        // source alone reads once.
        None if !detail.is_empty() => {
            Failure::Retry(text(format!("SMTP server {server}: {detail}")))
        }
        None => Failure::Retry(text(format!("SMTP server {server}: {e}"))),
    }
}
