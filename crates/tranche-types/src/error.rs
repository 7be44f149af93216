/// What a backend error was caused by: the store library's own error (rusqlite's,
/// redis's, an I/O error), kept so that callers and logs see the whole chain.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error from a backend, with what was being done. Messages read "expected X, got Y"
/// where the caller supplied something wrong.
///
/// The variants that wrap a cause show it in their message too (`op: cause`), so a
/// caller printing only `{e}` loses nothing; printers of the whole chain skip a cause
/// their previous line already ends with (see the CLI's `main`).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The store itself failed (I/O, corruption, a script error).
    #[error("{op}: {source}")]
    Store {
        /// What was being done, e.g. `"enqueue"`.
        op: &'static str,
        /// The store library's error.
        #[source]
        source: Cause,
    },
    /// The store could not be reached, or cannot serve yet (connection refused or lost,
    /// a reply timed out, a restarted server still loading its data): the same call may
    /// succeed later. With `maybe_applied` the request may have reached the store and
    /// taken effect (only its reply was lost), so a write that is not safe to repeat
    /// must not simply be sent again.
    #[error("{op}: {source}")]
    Unavailable {
        /// What was being done, e.g. `"complete"`.
        op: &'static str,
        /// Why the store could not be reached.
        #[source]
        source: Cause,
        /// The request may have taken effect (sent, but its reply lost).
        maybe_applied: bool,
    },
    /// The store's disk is full: nothing was written, and the same call succeeds once
    /// space is freed where `path` lives. Told apart from [`Store`](Self::Store) so that
    /// callers wait (and say so) instead of retrying blindly.
    #[error("{op}: {path} cannot grow, its disk is full ({source}): free space there")]
    Full {
        /// What was being done, e.g. `"enqueue"`.
        op: &'static str,
        /// The file that could not grow (e.g. the SQLite database).
        path: String,
        /// The store's own "disk full" error.
        #[source]
        source: Cause,
    },
    /// The caller asked for something invalid.
    #[error("invalid {field}: expected {expected}, got {got}")]
    Invalid {
        /// The argument at fault, e.g. `"kind"` or `"chain"`.
        field: &'static str,
        /// What would have been accepted.
        expected: String,
        /// What was given (or its length, when too long to echo back).
        got: String,
    },
    /// Something the call named does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for, as the message names it.
        what: String,
    },
    /// The backend was shut down.
    #[error("backend is closed")]
    Closed,
    /// A [`Commit`](crate::Commit) wrote a record that had changed since its writer
    /// read it: nothing of the commit was applied. Read again and decide again.
    #[error("record {key} changed since it was read (expected version {expected}, found {found})")]
    Conflict {
        /// The record's key.
        key: String,
        /// The version the writer read.
        expected: u64,
        /// The version found.
        found: u64,
    },
}

impl BackendError {
    /// The store failed doing `op`, because of `cause` (an error value, or a message
    /// when the store answered something unexpected).
    pub fn store(op: &'static str, cause: impl Into<Cause>) -> Self {
        BackendError::Store {
            op,
            source: cause.into(),
        }
    }

    /// The store could not be reached doing `op` (see [`Unavailable`](Self::Unavailable)).
    pub fn unavailable(op: &'static str, cause: impl Into<Cause>, maybe_applied: bool) -> Self {
        BackendError::Unavailable {
            op,
            source: cause.into(),
            maybe_applied,
        }
    }
}

/// A name or key longer than its limit, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: expected at most {max} bytes, got {got}")]
pub struct TooLong {
    /// The field at fault, e.g. `"queue"`.
    pub field: &'static str,
    /// The limit, in bytes.
    pub max: usize,
    /// The length given, in bytes.
    pub got: usize,
}

impl From<TooLong> for BackendError {
    fn from(e: TooLong) -> Self {
        BackendError::Invalid {
            field: e.field,
            expected: format!("at most {} bytes", e.max),
            got: format!("{} bytes", e.got),
        }
    }
}

/// An error and its causes on one line, outermost first, joined by ": ". Some errors
/// show their cause in their own message too (`op: cause`, as [`BackendError`] does):
/// a cause the line already ends with is not said twice. For messages that must be
/// whole on their own (a job's error, the CLI's last line, a server log).
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut next = Some(error);
    while let Some(cause) = next {
        let said = cause.to_string();
        if !line.ends_with(&said) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&said);
        }
        next = cause.source();
    }
    line
}

#[cfg(test)]
mod one_line_tests {
    use super::*;

    #[test]
    fn causes_are_joined_and_never_said_twice() {
        let shown = BackendError::store("enqueue", std::io::Error::other("disk I/O error"));
        assert_eq!(one_line(&shown), "enqueue: disk I/O error");

        #[derive(Debug, thiserror::Error)]
        #[error("read C042.pdf")]
        struct Hidden(#[source] std::io::Error);
        let hidden = Hidden(std::io::Error::other("connection reset"));
        assert_eq!(one_line(&hidden), "read C042.pdf: connection reset");
    }
}
