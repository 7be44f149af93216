//! How a note is cut into parts that are rendered one at a time and joined.
//!
//! A short note is one part: its lines flow, its annexure is paged (see
//! [`Part::whole`]). A long one is cut so that no single
//! Typst document grows with the client's trades: a front part (broker, client and
//! settlement blocks, the first lines and, when they all fit there, the charges), then
//! "paged" parts of the lines and of the annexure, each a few dozen pages with a fixed
//! number of rows to a page, so their page counts are known before they are laid out.
//! Only the front part's pages are learnt by laying it out; the template counts them
//! itself and adds the pages after it, so every part is laid out once.

use std::ops::Range;

use serde::Serialize;
use serde_json::Value;

use crate::note::NoteData;

/// Rows of the annexure to a page: a page holds 71 rows and the first one the title
/// too. Three rows' room is left for pages laid out a cell per row, where a security
/// too wide for its column wraps onto a second line.
pub(crate) const TRADES_PER_PAGE: usize = 68;
/// Lines to a page; a line is two text lines high when its security has an ISIN.
pub(crate) const LINES_PER_PAGE: usize = 32;
/// Lines that flow on the front pages; more than this and the rest go on pages of their
/// own with the charges after them.
pub(crate) const FRONT_LINES: usize = 300;
/// Pages in one paged part: enough for Typst to lay pages out in parallel, few enough
/// that one part's memory stays small.
pub(crate) const PAGES_PER_PART: usize = 24;

/// What the template reads as `/part.json`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Part {
    /// The number printed on this part's first page.
    pub first_page: usize,
    /// Pages of the whole note, when known before this part is laid out.
    pub total_pages: Option<usize>,
    /// Without `total_pages`, the template adds this to its own page count.
    pub pages_after: usize,
    /// The broker, client and settlement blocks.
    pub front: bool,
    /// The charges, the net amount and the closing text.
    pub summary: bool,
    pub lines: Option<Table>,
    pub annexure: Option<Table>,
    /// Which of the note's lines and trades the part shows.
    #[serde(skip)]
    pub line_rows: Range<usize>,
    #[serde(skip)]
    pub trade_rows: Range<usize>,
    /// Pages the part will have: known in advance for paged parts.
    #[serde(skip)]
    pub pages: Option<usize>,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct Table {
    /// Rows already shown before this part: no title.
    pub continued: bool,
    /// None: the table flows; otherwise this many rows to a page.
    pub rows_per_page: Option<usize>,
    /// For paged tables, a row with each column's widest value over the whole note.
    pub widest: Option<Value>,
}

impl Part {
    fn blank() -> Self {
        Part {
            first_page: 1,
            total_pages: None,
            pages_after: 0,
            front: false,
            summary: false,
            lines: None,
            annexure: None,
            line_rows: 0..0,
            trade_rows: 0..0,
            pages: None,
        }
    }

    /// The whole note in one document. Its lines flow; its annexure is paged even when
    /// short: a column of a page as one paragraph lays out in about a third of the time
    /// of a cell per row (the annexure was over half of a two-page note's render time).
    pub(crate) fn whole(note: &NoteData) -> Result<Self, serde_json::Error> {
        let annexure = Table {
            continued: false,
            rows_per_page: Some(TRADES_PER_PAGE),
            widest: Some(widest(&note.annexure)?),
        };
        Ok(Part {
            front: true,
            summary: true,
            lines: Some(Table {
                continued: false,
                rows_per_page: None,
                widest: None,
            }),
            annexure: Some(annexure),
            line_rows: 0..note.lines.len(),
            trade_rows: 0..note.annexure.len(),
            ..Part::blank()
        })
    }
}

/// Whether a note is long enough to be rendered in parts.
pub(crate) fn needs_parts(note: &NoteData) -> bool {
    note.lines.len() > FRONT_LINES || note.annexure.len() > TRADES_PER_PAGE * PAGES_PER_PART
}

/// The parts of a long note, in page order. The first is the front part, whose pages are
/// not known in advance; all others have `pages` set.
pub(crate) fn parts(note: &NoteData) -> Result<Vec<Part>, serde_json::Error> {
    let lines = note.lines.len();
    let front_lines = lines.min(FRONT_LINES);
    let mut parts = vec![Part {
        front: true,
        summary: front_lines == lines,
        lines: Some(Table {
            continued: false,
            rows_per_page: None,
            widest: None,
        }),
        line_rows: 0..front_lines,
        ..Part::blank()
    }];
    if front_lines < lines {
        let widest = Some(widest(&note.lines)?);
        paged(front_lines..lines, LINES_PER_PAGE, &mut parts, |rows, _| {
            Part {
                lines: Some(Table {
                    continued: true,
                    rows_per_page: Some(LINES_PER_PAGE),
                    widest: widest.clone(),
                }),
                line_rows: rows,
                ..Part::blank()
            }
        });
        // The charges start on a page of their own after the last lines.
        parts.push(Part {
            summary: true,
            // The charges table has a dozen rows: it never fills a page.
            pages: Some(1),
            ..Part::blank()
        });
    }
    let widest = Some(widest(&note.annexure)?);
    paged(
        0..note.annexure.len(),
        TRADES_PER_PAGE,
        &mut parts,
        |rows, first| Part {
            annexure: Some(Table {
                continued: !first,
                rows_per_page: Some(TRADES_PER_PAGE),
                widest: widest.clone(),
            }),
            trade_rows: rows,
            ..Part::blank()
        },
    );
    Ok(parts)
}

/// Cut `rows` into parts of `PAGES_PER_PART` pages of `per_page` rows.
fn paged(
    rows: Range<usize>,
    per_page: usize,
    parts: &mut Vec<Part>,
    make: impl Fn(Range<usize>, bool) -> Part,
) {
    let per_part = per_page * PAGES_PER_PART;
    let mut start = rows.start;
    while start < rows.end {
        let end = (start + per_part).min(rows.end);
        let mut part = make(start..end, start == rows.start);
        part.pages = Some((end - start).div_ceil(per_page));
        parts.push(part);
        start = end;
    }
}

/// For each field of `rows`, its widest value: the longest, with numbers compared by
/// their whole digits first (the template groups them with commas).
fn widest<T: Serialize>(rows: &[T]) -> Result<Value, serde_json::Error> {
    fn width(v: &Value) -> (usize, usize) {
        let s = match v {
            Value::String(s) => s.as_str(),
            Value::Number(n) => return (n.to_string().len(), n.to_string().len()),
            _ => return (0, 0),
        };
        let numeric = s
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-');
        let whole = if numeric {
            s.split('.').next().unwrap_or(s).len()
        } else {
            s.chars().count()
        };
        (whole, s.chars().count())
    }
    let mut widest = serde_json::Map::new();
    for row in rows {
        let Value::Object(fields) = serde_json::to_value(row)? else {
            continue;
        };
        for (key, value) in fields {
            match widest.get(&key) {
                Some(old) if width(old) >= width(&value) => {}
                _ => {
                    widest.insert(key, value);
                }
            }
        }
    }
    Ok(Value::Object(widest))
}
