//! Reading the day's input files. Every problem is reported with file, line and field,
//! and a bad row fails only the client it belongs to: the rest of the night proceeds.

mod broker;
mod clients;
mod csv_rows;
mod trades;

pub use broker::{load_broker, Broker, ComplianceOfficer};
pub use clients::{read_clients, Clients};
pub use trades::{read_trades, Trades, COLUMNS as TRADE_COLUMNS};

use std::fmt;

/// One problem in an input file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, thiserror::Error)]
pub struct RowError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based, counting the header and blank lines.
    pub line: u64,
    /// The column, or empty when the problem is the row's shape (its field count).
    pub field: String,
    /// What was expected and what was found; never a personal value (PAN, e-mail).
    pub message: String,
    /// The client whose note this row belongs to, when the row says.
    pub client: Option<String>,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(
                f,
                "{}:{}: field {}: {}",
                self.file, self.line, self.field, self.message
            )
        }
    }
}

/// A whole file could not be used (missing, unreadable, wrong header).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened or read, or a required value is missing from it.
    #[error("{file}: {message}")]
    File {
        /// The file as the user named it.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// The file's structure is wrong: a CSV header, or `broker.toml`'s TOML.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// The file as the user named it.
        file: String,
        /// 1-based; 0 when the parser cannot tell.
        line: u64,
        /// What was expected.
        message: String,
    },
}
