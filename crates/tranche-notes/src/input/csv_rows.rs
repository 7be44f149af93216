use std::collections::HashMap;
use std::path::Path;

use super::{InputError, RowError};

/// A CSV file read by column name, with the line of every record.
pub struct CsvRows {
    pub file: String,
    columns: HashMap<String, usize>,
    reader: csv::Reader<std::fs::File>,
}

pub struct Row<'a> {
    pub line: u64,
    record: csv::StringRecord,
    rows: &'a CsvRows,
}

impl CsvRows {
    pub fn open(path: &Path, required: &[&str]) -> Result<CsvRows, InputError> {
        let file = path.display().to_string();
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .from_path(path)
            .map_err(|e| InputError::File {
                file: file.clone(),
                message: format!("could not open: {}", io_message(&e)),
            })?;
        let headers = reader.headers().map_err(|e| InputError::Syntax {
            file: file.clone(),
            line: 1,
            message: format!("could not read the header: {e}"),
        })?;
        let columns: HashMap<String, usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| (h.to_ascii_lowercase(), i))
            .collect();
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|c| !columns.contains_key(*c))
            .collect();
        if !missing.is_empty() {
            return Err(InputError::Syntax {
                file,
                line: 1,
                message: format!(
                    "expected columns {}, missing {}",
                    required.join(","),
                    missing.join(",")
                ),
            });
        }
        Ok(CsvRows {
            file,
            columns,
            reader,
        })
    }

    /// The next record, or a syntax error with its line.
    pub fn next_row(&mut self) -> Option<Result<Row<'_>, InputError>> {
        let mut record = csv::StringRecord::new();
        match self.reader.read_record(&mut record) {
            Ok(false) => None,
            Ok(true) => {
                let line = record.position().map_or(0, |p| p.line());
                Some(Ok(Row {
                    line,
                    record,
                    rows: self,
                }))
            }
            Err(e) => Some(Err(InputError::Syntax {
                file: self.file.clone(),
                line: e.position().map_or(0, |p| p.line()),
                message: e.to_string(),
            })),
        }
    }
}

fn io_message(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => io.to_string(),
        _ => e.to_string(),
    }
}

impl Row<'_> {
    /// The trimmed value of a column ("" if the row is short).
    pub fn get(&self, column: &str) -> &str {
        self.rows
            .columns
            .get(column)
            .and_then(|i| self.record.get(*i))
            .unwrap_or("")
    }

    pub fn error(&self, field: &str, message: impl Into<String>, client: Option<&str>) -> RowError {
        RowError {
            file: self.rows.file.clone(),
            line: self.line,
            field: field.to_string(),
            message: message.into(),
            client: client.map(str::to_string),
        }
    }

    /// A required, non-empty column.
    pub fn required(&self, column: &str, client: Option<&str>) -> Result<&str, RowError> {
        let v = self.get(column);
        if v.is_empty() {
            Err(self.error(column, "expected a value, got nothing", client))
        } else {
            Ok(v)
        }
    }
}
