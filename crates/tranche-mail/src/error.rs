//! Why a message was not sent: what kind of failure (retry, give up, fix the input, wait
//! for space) and, for people, a [`Reason`] with the error behind it.

use std::error::Error;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// What went wrong, in words free of addresses, and the error that caused it when there
/// is one (an I/O error, a TLS setting refused), returned as [`MailError`]'s `source()`.
/// The words do not repeat the cause: print the error's chain to see both.
///
/// Derefs to the words, so `reason.contains("451")` reads as it did when this was a
/// `String`.
#[derive(Debug, Clone)]
pub struct Reason {
    text: String,
    // Arc, not Box: MailError is Clone.
    cause: Option<Arc<dyn Error + Send + Sync>>,
}

impl Reason {
    pub(crate) fn new(text: impl Into<String>) -> Reason {
        Reason {
            text: text.into(),
            cause: None,
        }
    }

    /// `text` says what failed; `cause` says why.
    pub(crate) fn because(
        text: impl Into<String>,
        cause: impl Error + Send + Sync + 'static,
    ) -> Reason {
        Reason {
            text: text.into(),
            cause: Some(Arc::new(cause)),
        }
    }

    pub(crate) fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }

    /// The same reason with `more` added to its words (e.g. how many attempts were made).
    pub(crate) fn with_suffix(mut self, more: &str) -> Reason {
        self.text.push_str(more);
        self
    }
}

impl From<String> for Reason {
    fn from(text: String) -> Reason {
        Reason::new(text)
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::new(text)
    }
}

impl Deref for Reason {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A cause whose message already spells out its own sources (lettre writes them into
/// its errors' messages and returns them as `source()` too): it reports no source, so a
/// printed chain says each once.
#[derive(Debug)]
pub(crate) struct WholeMessage<E>(pub E);

impl<E: fmt::Display> fmt::Display for WholeMessage<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: fmt::Debug + fmt::Display> Error for WholeMessage<E> {}

/// Why a message was not sent. Messages never contain a recipient's address or the
/// body, and neither do their causes.
#[derive(Debug, Clone)]
pub enum MailError {
    /// Try again later: a 4xx reply after the mailer's own retries, a connection or
    /// TLS failure, a timeout.
    Temporary(Reason),
    /// The server refused the message for good (5xx); carries its reply.
    Permanent(Reason),
    /// The mail or the configuration is malformed; nothing was sent.
    Invalid(Reason),
    /// The disk the mail goes to (an outbox) is full: nothing was written, and the same
    /// mail succeeds once space is freed. Apart from `Temporary` so that callers wait for
    /// space instead of spending their attempts.
    Full(Reason),
}

impl MailError {
    /// Whether the same mail may succeed if sent again later.
    pub fn is_temporary(&self) -> bool {
        matches!(self, MailError::Temporary(_) | MailError::Full(_))
    }

    /// What another attempt can do (see [`Transience`](tranche_types::Transience)): a
    /// 4xx reply or a lost connection may pass, a full outbox waits for space, a
    /// refusal or a malformed mail is final.
    pub fn transience(&self) -> tranche_types::Transience {
        use tranche_types::Transience;
        match self {
            MailError::Temporary(_) => Transience::Transient,
            MailError::Full(_) => Transience::Full,
            MailError::Permanent(_) | MailError::Invalid(_) => Transience::Permanent,
        }
    }

    pub(crate) fn reason(&self) -> &Reason {
        match self {
            MailError::Temporary(r)
            | MailError::Permanent(r)
            | MailError::Invalid(r)
            | MailError::Full(r) => r,
        }
    }
}

// Written out rather than derived: the message shows the reason's words, and the
// source is the reason's cause (thiserror would make it one or the other).
impl fmt::Display for MailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MailError::Temporary(r) => write!(f, "temporary mail failure: {r}"),
            MailError::Permanent(r) => write!(f, "permanent mail failure: {r}"),
            MailError::Invalid(r) => write!(f, "invalid mail: {r}"),
            MailError::Full(r) => write!(f, "mail not written, the disk is full: {r}"),
        }
    }
}

impl Error for MailError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.reason().cause().map(|c| c as &(dyn Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(e: &(dyn Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |e| (*e).source())
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn the_message_says_what_failed_and_the_source_why() {
        let denied = std::io::Error::from_raw_os_error(13);
        let e = MailError::Temporary(Reason::because("writing to the outbox /o", denied));
        assert_eq!(
            chain(&e),
            [
                "temporary mail failure: writing to the outbox /o",
                "Permission denied (os error 13)"
            ]
        );
        let e = MailError::Permanent(Reason::new("550 5.1.1 <address> unknown"));
        assert!(e.source().is_none());
        assert!(e.reason().contains("550"));
    }
}
