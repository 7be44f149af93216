//! Reading a TOML document whose every key and value knows where it was written:
//! unknown keys, missing keys and values of the wrong type or form each become a
//! [`Problem`] at their line, and reading goes on, so one pass finds them all.
//!
//! Serde stops at the first error and places only syntax errors, so ach.toml is read
//! as a `toml_edit` document (spans kept) and walked by hand.

use std::ops::Range;
use std::path::Path;

use toml_edit::{Item, TableLike, Value};

use crate::problem::Problem;
use crate::suggest::did_you_mean;

/// Where something was written: a byte range of the text.
pub(crate) type Span = Option<Range<usize>>;

/// A value read from the document: what it became, where it was written, and the
/// field's dotted path.
#[derive(Debug, Clone)]
pub(crate) struct At<T> {
    pub value: T,
    pub span: Span,
    pub field: String,
}

/// Why a value is not what its key needs: a more precise expectation than the key's
/// usual one, and a hint.
#[derive(Debug, Default)]
pub(crate) struct Bad {
    pub expected: Option<String>,
    pub hint: Option<String>,
    /// A number, date or boolean where text was expected: hint to quote it.
    pub quote: bool,
}

impl Bad {
    pub fn hint(hint: Option<String>) -> Bad {
        Bad {
            hint,
            ..Bad::default()
        }
    }

    pub fn expected(expected: impl Into<String>) -> Bad {
        Bad {
            expected: Some(expected.into()),
            ..Bad::default()
        }
    }
}

/// The document's text and the problems found in it so far.
pub(crate) struct Reader<'a> {
    text: &'a str,
    file: &'a Path,
    pub problems: Vec<Problem>,
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str, file: &'a Path) -> Self {
        Reader {
            text,
            file,
            problems: Vec::new(),
        }
    }

    /// Record a problem at `span`.
    pub fn problem(
        &mut self,
        span: &Span,
        field: impl Into<String>,
        expected: impl Into<String>,
        got: impl Into<String>,
        hint: Option<String>,
    ) {
        let (line, column) = self.position(span.as_ref().map_or(0, |s| s.start));
        self.problems.push(Problem {
            file: self.file.to_path_buf(),
            line,
            column,
            field: field.into(),
            expected: expected.into(),
            got: got.into(),
            hint,
        });
    }

    /// A TOML syntax error: nothing else can be read.
    pub fn syntax(&mut self, e: &toml_edit::TomlError) {
        let message = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        // An unquoted value (08:30, 15s, outbox) is the usual slip in this file.
        let hint = [
            "invalid string",
            "invalid time",
            "invalid date",
            "invalid integer",
            "invalid float",
            "expected newline",
        ]
        .iter()
        .any(|m| message.contains(m))
        .then(|| "text, times and durations are quoted: \"sftp\", \"08:30\", \"15s\"".into());
        self.problem(&e.span(), "", "TOML syntax", message, hint);
    }

    /// The text at `span` as written, its first line only, for `got`.
    pub fn raw(&self, span: &Span) -> String {
        let Some(text) = span.as_ref().and_then(|s| self.text.get(s.clone())) else {
            return "a value".into();
        };
        let text = text.trim();
        match text.split_once('\n') {
            Some((first, _)) => format!("{}…", first.trim_end()),
            None => text.to_string(),
        }
    }

    /// Line and column (in characters), both from 1, of a byte offset.
    fn position(&self, offset: usize) -> (u32, u32) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(column).unwrap_or(u32::MAX),
        )
    }
}

/// A table of the document being read.
pub(crate) struct Table<'t> {
    /// Its dotted path (`bank[0].delivery`), empty for the root.
    pub path: String,
    /// How the file writes it (`[[bank.window]]`), for messages.
    pub header: String,
    /// Where it starts (its header), for problems about the table as a whole.
    pub span: Span,
    table: &'t dyn TableLike,
}

impl<'t> Table<'t> {
    pub fn root(table: &'t toml_edit::Table) -> Self {
        Table {
            path: String::new(),
            header: "the top level".into(),
            span: Some(0..0),
            table,
        }
    }

    /// The dotted path of `key` in this table.
    pub fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn child_header(&self, key: &str, array: bool) -> String {
        let inner = self.header.trim_matches(|c| c == '[' || c == ']');
        let name = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{inner}.{key}")
        };
        if array {
            format!("[[{name}]]")
        } else {
            format!("[{name}]")
        }
    }

    /// Report every key not in `known`, with the nearest known key as a hint, or
    /// `elsewhere`'s word when it knows the key.
    pub fn unknown_keys(
        &self,
        r: &mut Reader<'_>,
        known: &[&str],
        elsewhere: impl Fn(&str) -> Option<String>,
    ) {
        for (key, _) in self.table.iter() {
            if known.contains(&key) {
                continue;
            }
            let span = self.table.key(key).and_then(|k| k.span());
            let hint = did_you_mean(key, known.iter().copied()).or_else(|| elsewhere(key));
            r.problem(
                &span,
                self.field(key),
                format!("a key of {}: {}", self.header, known.join(", ")),
                format!("{key:?}"),
                hint,
            );
        }
    }

    /// Whether the table has `key`.
    pub fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// The span of `key`'s value, or of the table when the key is missing.
    pub fn span_of(&self, key: &str) -> Span {
        self.table
            .get(key)
            .and_then(Item::span)
            .or_else(|| self.span.clone())
    }

    /// Read `key`'s value with `convert`. Missing: a problem when `required`, `None`
    /// either way. Not convertible: a problem saying `expected` (or `Bad`'s own
    /// expectation), with what was written.
    pub fn get<T>(
        &self,
        r: &mut Reader<'_>,
        key: &str,
        required: bool,
        expected: &str,
        convert: impl FnOnce(&Value) -> Result<T, Bad>,
    ) -> Option<At<T>> {
        let field = self.field(key);
        let Some(item) = self.table.get(key) else {
            if required {
                r.problem(&self.span, field, expected, "nothing", None);
            }
            return None;
        };
        let span = item.span().or_else(|| self.span.clone());
        let result = match item.as_value() {
            Some(value) => convert(value),
            None => Err(Bad::default()),
        };
        match result {
            Ok(value) => Some(At { value, span, field }),
            Err(bad) => {
                let got = r.raw(&span);
                let hint = if bad.quote {
                    Some(format!("quote it: \"{got}\""))
                } else {
                    bad.hint
                };
                r.problem(
                    &span,
                    field,
                    bad.expected.as_deref().unwrap_or(expected),
                    got,
                    hint,
                );
                None
            }
        }
    }

    /// `key`'s string value.
    pub fn string(
        &self,
        r: &mut Reader<'_>,
        key: &str,
        required: bool,
        expected: &str,
    ) -> Option<At<String>> {
        self.get(r, key, required, expected, |v| {
            string(v).map(str::to_string)
        })
    }

    /// `key`'s value, a table (`[key]` or an inline `{ … }`); a problem when it is
    /// something else.
    pub fn table(&self, r: &mut Reader<'_>, key: &str) -> Option<Table<'t>> {
        let item = self.table.get(key)?;
        let header = self.child_header(key, false);
        match item.as_table_like() {
            Some(table) => Some(Table {
                path: self.field(key),
                span: item.span().or_else(|| self.span.clone()),
                header,
                table,
            }),
            None => {
                let span = item.span().or_else(|| self.span.clone());
                let got = r.raw(&span);
                r.problem(
                    &span,
                    self.field(key),
                    format!("a table {header}"),
                    got,
                    None,
                );
                None
            }
        }
    }

    /// `key`'s tables (`[[key]]`, or an array of inline tables). A single `[key]` is
    /// reported and read as the only one, so its own problems are found too.
    pub fn tables(&self, r: &mut Reader<'_>, key: &str) -> Vec<Table<'t>> {
        let header = self.child_header(key, true);
        let path = |i: usize| format!("{}[{i}]", self.field(key));
        let Some(item) = self.table.get(key) else {
            return Vec::new();
        };
        let fallback = item.span().or_else(|| self.span.clone());
        match item {
            Item::ArrayOfTables(tables) => tables
                .iter()
                .enumerate()
                .map(|(i, t)| Table {
                    path: path(i),
                    header: header.clone(),
                    span: t.span().or_else(|| fallback.clone()),
                    table: t,
                })
                .collect(),
            Item::Value(Value::Array(values)) => {
                let mut out = Vec::new();
                for (i, v) in values.iter().enumerate() {
                    match v.as_inline_table() {
                        Some(t) => out.push(Table {
                            path: path(i),
                            header: header.clone(),
                            span: v.span().or_else(|| fallback.clone()),
                            table: t,
                        }),
                        None => {
                            let span = v.span().or_else(|| fallback.clone());
                            let got = r.raw(&span);
                            r.problem(&span, path(i), format!("a table {header}"), got, None);
                        }
                    }
                }
                out
            }
            Item::Table(t) => {
                r.problem(
                    &fallback,
                    self.field(key),
                    format!("{header} tables (an array: double brackets)"),
                    format!("{} (a single table)", self.child_header(key, false)),
                    Some(format!("write {header}")),
                );
                vec![Table {
                    path: path(0),
                    header,
                    span: fallback,
                    table: t,
                }]
            }
            _ => {
                let got = r.raw(&fallback);
                r.problem(
                    &fallback,
                    self.field(key),
                    format!("{header} tables"),
                    got,
                    None,
                );
                Vec::new()
            }
        }
    }
}

/// A string value, or why not.
pub(crate) fn string(v: &Value) -> Result<&str, Bad> {
    v.as_str().ok_or_else(|| Bad {
        quote: matches!(
            v,
            Value::Integer(_) | Value::Float(_) | Value::Datetime(_) | Value::Boolean(_)
        ),
        ..Bad::default()
    })
}
