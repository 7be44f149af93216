//! A CSV file read by column name, one physical line per record.
//!
//! Why not hand the whole file to the `csv` crate's reader: a quoted field may span
//! lines there, so one stray `"` (an instrument written `"RELIANCE`) makes the rest of
//! the file one field, and every later client silently loses its note. Our files never
//! need a line break inside a field, so a record is one line: the line is split with
//! `csv_core` (quoting and `""` escapes as RFC 4180 says) and a quote left open at the
//! end of its line fails that row alone. The row's field count must match the header's
//! (an unquoted comma in an address would otherwise shift the state column), and each
//! field must be UTF-8; a row that breaks one of these is a [`RowError`] naming the
//! column, and reading goes on with the next line.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{InputError, RowError};

/// The ASCII-only byte-order mark spreadsheets put at the start of a UTF-8 file.
const BOM: &[u8] = b"\xEF\xBB\xBF";

pub(crate) struct CsvRows {
    pub(crate) file: String,
    names: Vec<String>,
    columns: HashMap<String, usize>,
    input: BufReader<File>,
    line: u64,
    raw: Vec<u8>,
    parser: csv_core::Reader,
    /// Non-blank lines after the header: every one becomes a row or a row error.
    pub(crate) rows_read: u64,
}

/// One line's fields.
pub(crate) struct Row<'a> {
    pub(crate) line: u64,
    text: String,
    ends: Vec<usize>,
    rows: &'a CsvRows,
}

impl CsvRows {
    pub(crate) fn open(path: &Path, required: &[&str]) -> Result<CsvRows, InputError> {
        let file = path.display().to_string();
        let handle = File::open(path).map_err(|e| InputError::File {
            file: file.clone(),
            message: format!("could not open: {e}"),
        })?;
        let mut rows = CsvRows {
            file,
            names: Vec::new(),
            columns: HashMap::new(),
            input: BufReader::with_capacity(1 << 16, handle),
            line: 0,
            raw: Vec::new(),
            parser: csv_core::Reader::new(),
            rows_read: 0,
        };
        let header = match rows.next_line()? {
            Some(fields) => fields,
            None => return Err(rows.header_error("expected a header line, got an empty file")),
        };
        let (text, ends) = match header {
            Ok(split) => split,
            Err(problem) => {
                return Err(rows.header_error(&format!(
                    "header field {}: {}",
                    problem.field + 1,
                    problem.describe()
                )))
            }
        };
        rows.names = field_slices(&text, &ends)
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        rows.columns = rows
            .names
            .iter()
            .enumerate()
            .map(|(i, h)| (h.clone(), i))
            .collect();
        let missing: Vec<&str> = required
            .iter()
            .copied()
            .filter(|c| !rows.columns.contains_key(*c))
            .collect();
        if !missing.is_empty() {
            return Err(rows.header_error(&format!(
                "expected columns {}, missing {}",
                required.join(","),
                missing.join(",")
            )));
        }
        Ok(rows)
    }

    fn header_error(&self, message: &str) -> InputError {
        InputError::Syntax {
            file: self.file.clone(),
            line: self.line.max(1),
            message: message.to_string(),
        }
    }

    /// The next row, or why the row on that line cannot be read (its client named when
    /// the fields before the problem say who it is); `None` at the end of the file.
    pub(crate) fn next_row(&mut self) -> Result<Option<Result<Row<'_>, RowError>>, InputError> {
        let Some(split) = self.next_line()? else {
            return Ok(None);
        };
        self.rows_read += 1;
        let line = self.line;
        Ok(Some(match split {
            Ok((text, ends)) if ends.len() == self.names.len() => Ok(Row {
                line,
                text,
                ends,
                rows: self,
            }),
            Ok((text, ends)) => Err(RowError {
                file: self.file.clone(),
                line,
                field: String::new(),
                message: format!(
                    "expected {} fields as in the header, got {} (a comma in a value must be inside double quotes)",
                    self.names.len(),
                    ends.len()
                ),
                client: self.client_in(&text, &ends, ends.len()),
            }),
            Err(problem) => Err(RowError {
                file: self.file.clone(),
                line,
                field: self.names.get(problem.field).cloned().unwrap_or_default(),
                message: problem.describe(),
                client: problem
                    .readable
                    .as_ref()
                    .and_then(|(text, ends)| self.client_in(text, ends, problem.field)),
            }),
        }))
    }

    /// Hand every readable row to `take`; the errors of the rest, and those `take`
    /// returns, go to `errors`: every row ends in exactly one of the two.
    pub(crate) fn each_row(
        &mut self,
        errors: &mut Vec<RowError>,
        mut take: impl FnMut(&Row<'_>) -> Result<(), RowError>,
    ) -> Result<(), InputError> {
        while let Some(row) = self.next_row()? {
            if let Err(e) = row.and_then(|r| take(&r)) {
                errors.push(e);
            }
        }
        Ok(())
    }

    /// The client code of a row whose fields before `upto` could be read.
    fn client_in(&self, text: &str, ends: &[usize], upto: usize) -> Option<String> {
        let at = *self.columns.get("client_code")?;
        if at >= upto {
            return None;
        }
        field_slices(text, ends)
            .nth(at)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
    }

    /// The next non-blank line, split into its fields (one text, field end offsets).
    fn next_line(
        &mut self,
    ) -> Result<Option<Result<(String, Vec<usize>), LineProblem>>, InputError> {
        loop {
            self.raw.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.raw)
                .map_err(|e| InputError::File {
                    file: self.file.clone(),
                    message: format!("could not read line {}: {e}", self.line + 1),
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.line == 1 && self.raw.starts_with(BOM) {
                self.raw.drain(..BOM.len());
            }
            if self.raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if self.raw.last() != Some(&b'\n') {
                self.raw.push(b'\n');
            }
            return Ok(Some(split_line(&mut self.parser, &self.raw)));
        }
    }
}

/// Why a line could not be split into text fields.
struct LineProblem {
    /// The field (0-based) where reading stopped.
    field: usize,
    kind: LineProblemKind,
    /// The fields before the problem, when they could be read.
    readable: Option<(String, Vec<usize>)>,
}

enum LineProblemKind {
    UnclosedQuote,
    NotUtf8 { offset: usize },
}

impl LineProblem {
    fn describe(&self) -> String {
        match self.kind {
            LineProblemKind::UnclosedQuote => "expected a closing double quote before the end of the line, got none (a stray \"?); a value cannot span lines".to_string(),
            // Never the value itself: it may be a name or an address.
            LineProblemKind::NotUtf8 { offset } => format!(
                "expected UTF-8 text, got a byte that is not (byte {} of the value; save the file as UTF-8)",
                offset + 1
            ),
        }
    }
}

/// Split one line (ending in `\n`) into fields.
fn split_line(
    parser: &mut csv_core::Reader,
    line: &[u8],
) -> Result<(String, Vec<usize>), LineProblem> {
    if let Some((field, start)) = unclosed_quote(line) {
        let readable = if field == 0 {
            None
        } else {
            // The fields before it, without the comma that ends them.
            let mut head = line[..start - 1].to_vec();
            head.push(b'\n');
            split_line(parser, &head).ok()
        };
        return Err(LineProblem {
            field,
            kind: LineProblemKind::UnclosedQuote,
            readable,
        });
    }
    parser.reset();
    let mut out = vec![0u8; line.len()];
    let commas = line.iter().filter(|b| **b == b',').count();
    let mut ends = vec![0usize; commas + 1];
    let (result, _, written, fields) = parser.read_record(line, &mut out, &mut ends);
    debug_assert!(matches!(result, csv_core::ReadRecordResult::Record));
    out.truncate(written);
    ends.truncate(fields);
    match String::from_utf8(out) {
        Ok(text) => Ok((text, ends)),
        Err(e) => {
            let bad = e.utf8_error().valid_up_to();
            let field = ends.iter().position(|end| *end > bad).unwrap_or(0);
            let start = if field == 0 { 0 } else { ends[field - 1] };
            let bytes = e.into_bytes();
            let readable = String::from_utf8(bytes[..start].to_vec())
                .ok()
                .map(|text| (text, ends[..field].to_vec()));
            Err(LineProblem {
                field,
                kind: LineProblemKind::NotUtf8 {
                    offset: bad - start,
                },
                readable,
            })
        }
    }
}

/// The field (0-based) in which a double quote is still open at the end of the line,
/// and the offset where that field starts. Quotes pair up in a well-formed line (`""`
/// inside a quoted field is two), so the count decides; a quote inside an unquoted
/// value counts too: it is ambiguous, and refusing the row is safer than guessing.
fn unclosed_quote(line: &[u8]) -> Option<(usize, usize)> {
    let (mut open, mut field, mut start) = (false, 0, 0);
    let mut opened = (0, 0);
    for (i, b) in line.iter().enumerate() {
        match b {
            b'"' => {
                open = !open;
                if open {
                    opened = (field, start);
                }
            }
            b',' if !open => {
                field += 1;
                start = i + 1;
            }
            _ => {}
        }
    }
    open.then_some(opened)
}

fn field_slices<'t>(text: &'t str, ends: &'t [usize]) -> impl Iterator<Item = &'t str> + 't {
    let starts = std::iter::once(0).chain(ends.iter().copied());
    starts.zip(ends.iter().copied()).map(|(s, e)| &text[s..e])
}

impl Row<'_> {
    /// The trimmed value of a column.
    pub(crate) fn get(&self, column: &str) -> &str {
        let Some(&i) = self.rows.columns.get(column) else {
            return "";
        };
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        self.text[start..self.ends[i]].trim()
    }

    pub(crate) fn error(
        &self,
        field: &str,
        message: impl Into<String>,
        client: Option<&str>,
    ) -> RowError {
        RowError {
            file: self.rows.file.clone(),
            line: self.line,
            field: field.to_string(),
            message: message.into(),
            client: client.map(str::to_string),
        }
    }

    /// A required, non-empty column.
    pub(crate) fn required(&self, column: &str, client: Option<&str>) -> Result<&str, RowError> {
        let v = self.get(column);
        if v.is_empty() {
            Err(self.error(column, "expected a value, got nothing", client))
        } else {
            Ok(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Result<Vec<String>, String> {
        let mut p = csv_core::Reader::new();
        split_line(&mut p, format!("{line}\n").as_bytes())
            .map(|(t, e)| field_slices(&t, &e).map(str::to_string).collect())
            .map_err(|p| format!("field {}: {}", p.field, p.describe()))
    }

    #[test]
    fn quoted_commas_and_escaped_quotes_are_one_field() {
        assert_eq!(
            split(r#"C1,"1 MG Road, Pune","say ""hi""""#).unwrap(),
            ["C1", "1 MG Road, Pune", r#"say "hi""#]
        );
        assert_eq!(split("a,,c").unwrap(), ["a", "", "c"]);
    }

    #[test]
    fn a_quote_left_open_fails_its_line_and_names_the_column() {
        let e = split(r#"C1,"RELIANCE,x"#).unwrap_err();
        assert!(
            e.starts_with("field 1: expected a closing double quote"),
            "{e}"
        );
        let e = split(r#""a,b",12" pipe,x"#).unwrap_err();
        assert!(e.starts_with("field 1:"), "{e}");
    }
}
