//! The e-mail seam of the contract-note pipeline: each client is e-mailed a signed PDF.
//!
//! One [`Mailer`] trait with two implementations: [`SmtpMailer`] (a bounded pool of
//! SMTP connections, STARTTLS or implicit TLS, AUTH, retries of 4xx replies with
//! backoff) and [`OutboxMailer`] (one `.eml` file per message in a directory, for runs
//! with no SMTP server). Both send the bytes of [`build_message`], so an `.eml` in the
//! outbox is what SMTP would have carried.
//!
//! Sending twice on a redelivered job is prevented by the engine's effect records, not
//! here; the caller supplies a stable `Message-ID` so that a duplicate from the one
//! window left (a crash after the server accepted, before the record) is recognisable.
//!
//! Errors say whether to retry ([`MailError::Temporary`]), give up
//! ([`MailError::Permanent`], with the server's reply) or fix the input
//! ([`MailError::Invalid`]). None carries a recipient's address or the body: addresses
//! in server replies are blanked out. `conformance::exercise` (feature `conformance`) is
//! the suite every implementation passes.

#![deny(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod message;
mod outbox;
mod redact;
mod smtp;

pub use error::{MailError, Reason};
pub use message::build_message;
pub use outbox::OutboxMailer;
pub use smtp::{SmtpConfig, SmtpMailer};

use async_trait::async_trait;

/// A file attached to a mail, e.g. the signed contract note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The name the recipient sees, e.g. `CN-2026-11-20-C0001.pdf`.
    pub filename: String,
    /// A MIME type, e.g. `application/pdf`.
    pub content_type: String,
    /// The file's content, any bytes (sent base64-encoded).
    pub bytes: Vec<u8>,
}

/// One message to one recipient.
#[derive(Clone, PartialEq, Eq)]
pub struct Mail {
    /// Without angle brackets, e.g. `CN-2026-11-20-C0001@broker.example`. Stable across
    /// redeliveries of the same job, so a duplicate is recognisable.
    pub message_id: String,
    /// `Name <addr>` or a bare address.
    pub from: String,
    /// `Name <addr>` or a bare address.
    pub to: String,
    /// Any Unicode, on one line (encoded per RFC 2047 when not ASCII).
    pub subject: String,
    /// Plain text; any line endings (sent as CRLF).
    pub text: String,
    /// In the order they appear in the mail; may be empty.
    pub attachments: Vec<Attachment>,
}

// Addresses and bodies are personal data: keep them out of logs that print a Mail.
impl std::fmt::Debug for Mail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mail")
            .field("message_id", &self.message_id)
            .field("attachments", &self.attachments.len())
            .finish_non_exhaustive()
    }
}

/// What a mailer did with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The sent mail's [`Mail::message_id`], without angle brackets.
    pub message_id: String,
    /// The SMTP server's final reply (e.g. `250 2.0.0 Ok: queued as 4Fh2`), or the
    /// path of the `.eml` file in the outbox.
    pub reply: String,
}

/// Sends one mail at a time, from many tasks at once: the seam between the pipeline and
/// a mail server (or the outbox). Checked by `conformance::exercise`.
#[async_trait]
pub trait Mailer: Send + Sync {
    /// Send `mail` to its recipient. Not idempotent by itself: sending the same mail
    /// twice delivers it twice, with the same `Message-ID`.
    async fn send(&self, mail: &Mail) -> Result<Sent, MailError>;

    /// Let go of what is held between messages, at the end of a night or a worker's
    /// life: pooled SMTP connections are closed politely (QUIT) rather than dropped
    /// mid-session. Sends after this still work (they open what they need again).
    async fn close(&self) {}
}
