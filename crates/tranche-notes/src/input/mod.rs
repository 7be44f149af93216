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
    pub file: String,
    pub line: u64,
    /// The column, or empty when the problem is the row's shape (its field count).
    pub field: String,
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
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}:{line}: {message}")]
    Syntax {
        file: String,
        line: u64,
        message: String,
    },
}
