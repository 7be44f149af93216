use std::collections::BTreeMap;
use std::path::Path;

use super::csv_rows::{CsvRows, Row};
use super::{InputError, RowError};
use crate::model::Client;

/// The columns `clients.csv` must have (in any order; others are ignored).
pub(crate) const COLUMNS: [&str; 6] = ["client_code", "name", "pan", "email", "address", "state"];

/// The client master, and the rows that could not be used: every row read is in
/// exactly one of the two.
#[derive(Debug, Default)]
pub struct Clients {
    /// The clients whose rows could be used, by client code.
    pub by_code: BTreeMap<String, Client>,
    /// The rows that could not, each naming its client when the row says.
    pub errors: Vec<RowError>,
    /// Rows in the file (non-blank lines after the header).
    pub rows_read: u64,
}

/// Read and check the client master. Fails only when the file as a whole cannot be
/// used; a bad row goes to [`Clients::errors`].
pub fn read_clients(path: &Path) -> Result<Clients, InputError> {
    let mut rows = CsvRows::open(path, &COLUMNS)?;
    let mut by_code: BTreeMap<String, Client> = BTreeMap::new();
    let mut errors = Vec::new();
    rows.each_row(&mut errors, |row| {
        let client = parse(row)?;
        if let Some(first) = by_code.get(&client.client_code) {
            return Err(row.error(
                "client_code",
                format!(
                    "expected a unique client code, got {:?} again (first on line {})",
                    client.client_code, first.line
                ),
                Some(&client.client_code),
            ));
        }
        by_code.insert(client.client_code.clone(), client);
        Ok(())
    })?;
    Ok(Clients {
        by_code,
        errors,
        rows_read: rows.rows_read,
    })
}

/// A PAN is five letters, four digits and a letter (e.g. ABCDE1234F).
pub(crate) fn valid_pan(pan: &str) -> bool {
    let b = pan.as_bytes();
    b.len() == 10
        && b[..5].iter().all(u8::is_ascii_uppercase)
        && b[5..9].iter().all(u8::is_ascii_digit)
        && b[9].is_ascii_uppercase()
}

fn parse(row: &Row<'_>) -> Result<Client, RowError> {
    let code = row.required("client_code", None)?;
    let c = Some(code);
    // Never echo a PAN or an e-mail address into an error: they are personal data.
    let pan = row.required("pan", c)?.to_ascii_uppercase();
    if !valid_pan(&pan) {
        return Err(row.error(
            "pan",
            "expected a PAN of five letters, four digits and a letter (value not shown)",
            c,
        ));
    }
    let email = row.required("email", c)?;
    let at = email.find('@');
    if !matches!(at, Some(i) if i > 0 && i + 1 < email.len() && email[i + 1..].contains('.'))
        || email.contains(char::is_whitespace)
    {
        return Err(row.error(
            "email",
            "expected an e-mail address like name@example.com (value not shown)",
            c,
        ));
    }
    Ok(Client {
        client_code: code.to_string(),
        name: row.required("name", c)?.to_string(),
        pan,
        email: email.to_string(),
        address: row.required("address", c)?.to_string(),
        state: row.required("state", c)?.to_string(),
        line: row.line,
    })
}
