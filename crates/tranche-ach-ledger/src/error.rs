//! The ledger's error, and URLs shown without their credentials.

/// Any error a cause chain can hold.
pub(crate) type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a ledger call failed. `location` is the database file, or its URL with the user
/// information hidden ([`mask_url`]); no message ever holds an account number.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The database cannot be reached (PostgreSQL down, connection refused or lost).
    /// The call may or may not have committed; retry it.
    #[error("ledger at {location} is unavailable")]
    Unavailable {
        /// Where.
        location: String,
        /// Why.
        #[source]
        source: Cause,
    },
    /// The database answered an error.
    #[error("ledger at {location}: {doing} failed")]
    Database {
        /// Where.
        location: String,
        /// What the ledger was doing.
        doing: &'static str,
        /// The database's error.
        #[source]
        source: Cause,
    },
    /// The database was written by a newer version of the ledger.
    #[error("ledger at {location}: expected schema version {known} or older, got {found} (written by a newer tranche)")]
    Newer {
        /// Where.
        location: String,
        /// The version found.
        found: i64,
        /// The newest version this binary knows.
        known: i64,
    },
    /// A stored row could not be read back.
    #[error("ledger at {location}: stored {what}: expected {expected}, got {got}")]
    Corrupt {
        /// Where.
        location: String,
        /// Which row and column.
        what: String,
        /// What was expected.
        expected: String,
        /// What was found (never an account number).
        got: String,
    },
    /// The ledger is misconfigured (a URL holding a password, an unreadable password
    /// file, a bad URL).
    #[error("ledger configuration: {0}")]
    Config(String),
}

impl LedgerError {
    /// What another attempt can do (see [`Transience`](tranche_types::Transience)): a
    /// schema too new or a bad configuration stays so; a lost or failing database may
    /// pass (a restart, a serialisation failure retried too often).
    pub fn transience(&self) -> tranche_types::Transience {
        use tranche_types::Transience;
        match self {
            LedgerError::Newer { .. } | LedgerError::Config(_) => Transience::Permanent,
            LedgerError::Unavailable { .. }
            | LedgerError::Database { .. }
            | LedgerError::Corrupt { .. } => Transience::Transient,
        }
    }
}

/// `url` with its user information (user and password) replaced by `***`, for
/// messages: `postgres://***@db:5432/tranche`.
pub fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => format!("{}***@{}", &url[..scheme_end + 3], &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::mask_url;

    #[test]
    fn user_information_is_hidden() {
        assert_eq!(
            mask_url("postgres://bob:s3cret@db:5432/ledger?sslmode=disable"),
            "postgres://***@db:5432/ledger?sslmode=disable"
        );
        assert_eq!(mask_url("postgres://bob@db/x"), "postgres://***@db/x");
        assert_eq!(mask_url("postgres://db/x@y"), "postgres://db/x@y");
        assert_eq!(mask_url("host=db"), "host=db");
    }
}
