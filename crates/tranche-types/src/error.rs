/// An error from a backend, with what was being done. Messages read "expected X, got Y"
/// where the caller supplied something wrong.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The store itself failed (I/O, corruption, connection lost).
    #[error("{op}: {message}")]
    Store { op: &'static str, message: String },
    /// The store's disk is full: nothing was written, and the same call succeeds once
    /// space is freed where `path` lives. Told apart from [`Store`](Self::Store) so that
    /// callers wait (and say so) instead of retrying blindly.
    #[error("{op}: {path} cannot grow, its disk is full ({message}): free space there")]
    Full {
        op: &'static str,
        /// The file that could not grow (e.g. the SQLite database).
        path: String,
        message: String,
    },
    /// The caller asked for something invalid.
    #[error("invalid {field}: expected {expected}, got {got}")]
    Invalid {
        field: &'static str,
        expected: String,
        got: String,
    },
    #[error("{what} not found")]
    NotFound { what: String },
    /// The backend was shut down.
    #[error("backend is closed")]
    Closed,
}

impl BackendError {
    pub fn store(op: &'static str, e: impl std::fmt::Display) -> Self {
        BackendError::Store {
            op,
            message: e.to_string(),
        }
    }
}
