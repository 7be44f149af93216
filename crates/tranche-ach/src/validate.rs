//! The NACHA file validator: everything a bank's front end checks, on files from
//! anyone, each problem reported by line, field (with its positions), expected and
//! found.

use std::collections::HashSet;
use std::fmt;

use chrono::NaiveDate;
use serde::Serialize;

use crate::codes::{
    is_zero_amount_code, known_transaction_code, Direction, ServiceClass, KNOWN_SEC_CODES,
};
use crate::entry::SAME_DAY_LIMIT_CENTS;
use crate::field::{blank_or_zeros, is_nacha_byte, mask_account};
use crate::layout::{
    addenda05, batch_control, batch_header, entry_detail, field_at, file_control, file_header,
    Field, Fields, BLOCKING_FACTOR, RECORD_LEN,
};
use crate::routing::check_digit;

/// One problem in a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The line (from 1); for a problem of the whole file, its last line.
    pub line: usize,
    /// The field, as [`layout`](crate::layout) names it, or what is checked when it
    /// is not one field (`line count`, `record length`, `line ending`, `padding`).
    pub field: &'static str,
    /// The field's first position (from 1); 0 when not one field.
    pub start: usize,
    /// The field's last position; 0 when not one field.
    pub end: usize,
    /// What the field must be.
    pub expected: String,
    /// What it is (account numbers masked).
    pub found: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.field)?;
        if self.start > 0 {
            if self.start == self.end {
                write!(f, " (position {})", self.start)?;
            } else {
                write!(f, " (positions {}-{})", self.start, self.end)?;
            }
        }
        write!(f, ": expected {}, found {}", self.expected, self.found)
    }
}

/// What [`validate`] found in a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Every problem, in the order of their lines.
    pub findings: Vec<Finding>,
    /// Lines read.
    pub lines: usize,
    /// Batches read.
    pub batches: usize,
    /// Entry detail records read.
    pub entries: u64,
    /// Addenda records read.
    pub addenda: u64,
    /// Debits of all entries, in cents, as recomputed.
    pub debit_cents: u64,
    /// Credits of all entries, in cents, as recomputed.
    pub credit_cents: u64,
}

impl Report {
    /// Whether the file has no problem.
    pub fn is_valid(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Check a NACHA file: record lengths (94) and line endings; the order of record types;
/// blocking by ten and the `9…9` padding; every field of the file header, batch
/// headers, entry details, addenda, batch controls and file control (codes, dates,
/// digits, routing check digits, the character set); counts, totals and entry hashes
/// recomputed; batch numbers ascending; trace numbers unique in the file, ascending
/// within a batch and starting with the batch's ODFI; addenda indicators matching
/// the addenda that follow; at least one entry per batch; and the Same Day ACH limit
/// of $1,000,000 per entry in same-day batches (effective on or before the file's
/// creation date, or a descriptive date starting with `SD`).
///
/// A batch's SEC code is held to its own rules, as the NACHA rules and moov-io/ach's
/// batch types give them: the direction of its entries (TEL debits, or credits in a
/// batch described `REVERSAL`; ARC, BOC, POP, RCK, TRC, TRX and XCK debits; CIE
/// credits) and a service class that admits it; the description ENR and RCK batches
/// must have; the most one ARC, BOC, POP ($25,000), RCK or XCK ($2,500) entry may be;
/// no money in ACK, ATX, COR, DNE and ENR entries; which addenda types it takes (05
/// not for ARC, BOC, COR, MTE, POP, POS, RCK, SHR, TEL, TRC, XCK; 02 only and always
/// for MTE, POS, SHR; 98 only and always for COR). An originator status code is 1 or 2
/// (0 is an ACH operator's, in ADV files).
///
/// Entries are read in the standard layout (PPD, CCD, WEB, TEL and the other
/// domestic SEC codes); IAT and ADV batches are reported as not supported.
pub fn validate(bytes: &[u8]) -> Report {
    let mut v = Validator::default();
    let lines = split_lines(bytes, &mut v);
    let total = lines.len();
    // A trace number per entry line at most: room for them all up front.
    v.traces.reserve(total);
    let mut rec = [b' '; RECORD_LEN];
    for (i, raw) in lines.iter().enumerate() {
        let line = i + 1;
        if raw.len() != RECORD_LEN {
            v.find(
                line,
                "record length",
                0,
                0,
                format!("{RECORD_LEN} characters"),
                format!("{} characters", raw.len()),
            );
        }
        rec.fill(b' ');
        let n = raw.len().min(RECORD_LEN);
        rec[..n].copy_from_slice(&raw[..n]);
        v.record(line, &rec);
    }
    v.end(total);
    v.report.lines = total;
    v.report
}

/// The lines of a file: split on `\n` (a `\r` before it dropped), or fixed 94-byte
/// records when the file has no line breaks at all.
fn split_lines<'a>(bytes: &'a [u8], v: &mut Validator) -> Vec<&'a [u8]> {
    if bytes.is_empty() {
        return Vec::new();
    }
    // Empty lines after the last record are line endings, not records: ignored.
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let trimmed = &bytes[..end];
    if !trimmed.contains(&b'\n') && !trimmed.is_empty() && trimmed.len().is_multiple_of(RECORD_LEN)
    {
        return trimmed.chunks(RECORD_LEN).collect();
    }
    let tail = &bytes[end..];
    let ending = if tail.starts_with(b"\r\n") {
        2
    } else {
        usize::from(tail.starts_with(b"\n"))
    };
    let body = &bytes[..end + ending];
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    let mut out = Vec::with_capacity(body.len() / (RECORD_LEN + 1) + 1);
    let mut first_crlf = None;
    let parts: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    let count = parts.len();
    for (i, line) in parts.into_iter().enumerate() {
        let crlf = line.last() == Some(&b'\r');
        let line = if crlf { &line[..line.len() - 1] } else { line };
        // The last line has no ending when the file does not end in one.
        let has_ending = i + 1 < count || ending > 0;
        if has_ending || crlf {
            match first_crlf {
                None => first_crlf = Some(crlf),
                Some(f) if f != crlf => {
                    let (want, got) = if f {
                        ("\\r\\n", "\\n")
                    } else {
                        ("\\n", "\\r\\n")
                    };
                    v.find(
                        i + 1,
                        "line ending",
                        0,
                        0,
                        format!("{want} like line 1"),
                        got.to_string(),
                    );
                }
                _ => {}
            }
        }
        out.push(line);
    }
    out
}

#[derive(Default)]
struct Validator {
    report: Report,
    state: State,
    creation_date: Option<NaiveDate>,
    batch: Option<Batch>,
    last_batch_number: Option<u64>,
    file: Sums,
    traces: HashSet<u64>,
    /// The entry the next addenda would belong to.
    entry: Option<PendingEntry>,
    file_control_line: Option<usize>,
    /// The file control's block count (`Some(None)`: not digits).
    block_count_field: Option<Option<u64>>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing read yet.
    #[default]
    Start,
    /// After the file header or a batch control: a batch header or the file control.
    BetweenBatches,
    /// Inside a batch: entries, addenda, or its control.
    InBatch,
    /// After the file control: padding only.
    Padding,
}

#[derive(Default, Clone, Copy)]
struct Sums {
    entries: u64,
    addenda: u64,
    hash: u64,
    debits: u64,
    credits: u64,
    /// An entry's transaction code was unknown: its amount is on neither side, and
    /// the totals cannot be recomputed (the code is the finding).
    unknown_side: bool,
}

struct Batch {
    header_line: usize,
    service_class: Option<ServiceClass>,
    service_class_raw: [u8; 3],
    company_id: [u8; 10],
    sec: [u8; 3],
    /// Its SEC code is one whose entries name their receiver (decided once per batch,
    /// not per entry).
    names_receivers: bool,
    odfi: [u8; 8],
    number: [u8; 7],
    same_day: bool,
    /// What its SEC code asks of its entries.
    rules: SecRules,
    /// Its service class refuses its SEC code's direction (said once, at the header).
    class_refuses_sec: bool,
    last_trace: Option<u64>,
    sums: Sums,
}

/// What a batch's SEC code asks of its entries beyond the common layout: the NACHA
/// rules as moov-io/ach's batch types (`batchTEL.go`, `batchARC.go`, …) check them.
/// Returns and notifications of change (transaction codes ending in 1 or 6) are left
/// out of the direction and amount rules: they answer entries of the other direction.
#[derive(Clone, Copy, Default)]
struct SecRules {
    /// The three letters.
    sec: [u8; 3],
    /// The one direction its entries take (`None`: either).
    direction: Option<Direction>,
    /// The company entry description it requires.
    description: Option<&'static str>,
    /// The most one entry may be, in cents, and its words.
    max_amount: Option<(u64, &'static str)>,
    /// Its entries carry no money.
    zero_amount: bool,
    /// Its entries may carry addenda of type 05.
    addenda05: bool,
    /// The addenda type every entry carries (02 for MTE, POS and SHR; 98 for COR).
    required_addenda: Option<&'static [u8; 2]>,
}

impl SecRules {
    /// The rules of SEC code `sec` in a batch whose entry description is
    /// `description` (a TEL batch described `REVERSAL` holds credits).
    fn of(sec: &[u8], description: &[u8]) -> SecRules {
        let mut r = SecRules {
            addenda05: true,
            ..SecRules::default()
        };
        r.sec.copy_from_slice(&sec[..3]);
        const CHECK: (u64, &str) = (2_500_000, "$25,000.00");
        const SMALL_CHECK: (u64, &str) = (250_000, "$2,500.00");
        match sec {
            b"ARC" | b"BOC" | b"POP" => {
                r.direction = Some(Direction::Debit);
                r.max_amount = Some(CHECK);
                r.addenda05 = false;
            }
            b"RCK" => {
                r.direction = Some(Direction::Debit);
                r.max_amount = Some(SMALL_CHECK);
                r.description = Some("REDEPCHECK");
                r.addenda05 = false;
            }
            b"XCK" => {
                r.direction = Some(Direction::Debit);
                r.max_amount = Some(SMALL_CHECK);
                r.addenda05 = false;
            }
            b"TRC" => {
                r.direction = Some(Direction::Debit);
                r.addenda05 = false;
            }
            b"TRX" => r.direction = Some(Direction::Debit),
            b"CIE" => r.direction = Some(Direction::Credit),
            b"TEL" => {
                let reversal = description.trim_ascii().eq_ignore_ascii_case(b"REVERSAL");
                r.direction = Some(if reversal {
                    Direction::Credit
                } else {
                    Direction::Debit
                });
                r.addenda05 = false;
            }
            b"ACK" | b"ATX" | b"DNE" => r.zero_amount = true,
            b"ENR" => {
                r.zero_amount = true;
                r.description = Some("AUTOENROLL");
            }
            b"COR" => {
                r.zero_amount = true;
                r.addenda05 = false;
                r.required_addenda = Some(b"98");
            }
            b"MTE" | b"POS" | b"SHR" => {
                r.addenda05 = false;
                r.required_addenda = Some(b"02");
            }
            _ => {}
        }
        r
    }

    /// Its code as text.
    fn name(&self) -> &str {
        std::str::from_utf8(&self.sec).unwrap_or("?")
    }

    /// Whether it admits addenda of `type_code`: 05 unless the code forbids them, 02
    /// only for MTE, POS and SHR, 98 only for COR, 99 (returns) always.
    fn admits_addenda(&self, type_code: &[u8]) -> bool {
        match type_code {
            b"05" => self.addenda05,
            b"02" => self.required_addenda == Some(b"02"),
            b"98" => self.required_addenda == Some(b"98"),
            _ => true,
        }
    }
}

/// A return or notification of change (codes 21, 26, 31, 36, 41, 46, 51, 56): it
/// answers an entry of the other direction, so the SEC code's direction and amount
/// rules are not its own.
fn is_return_code(code: u64) -> bool {
    matches!(code, 21 | 26 | 31 | 36 | 41 | 46 | 51 | 56)
}

struct PendingEntry {
    line: usize,
    indicator: u8,
    trace: Option<u64>,
    addenda: u32,
    /// Whether its batch's SEC code allows more than one addenda record.
    many_addenda: bool,
    /// The addenda type its batch's SEC code requires, and whether one came.
    required: Option<(&'static [u8; 2], bool)>,
    /// Its batch's SEC code.
    sec: [u8; 3],
}

fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

fn text(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

fn yymmdd(b: &[u8]) -> Option<NaiveDate> {
    digits(b)?;
    let n = |i: usize| u32::from(b[i] - b'0') * 10 + u32::from(b[i + 1] - b'0');
    // Two-digit years: 2000-2099, as every current ACH file means them.
    NaiveDate::from_ymd_opt(2000 + n(0) as i32, n(2), n(4))
}

impl Validator {
    fn find(
        &mut self,
        line: usize,
        field: &'static str,
        start: usize,
        end: usize,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) {
        self.report.findings.push(Finding {
            line,
            field,
            start,
            end,
            expected: expected.into(),
            found: found.into(),
        });
    }

    fn bad(
        &mut self,
        line: usize,
        f: Field,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) {
        self.find(line, f.name, f.start, f.end, expected, found);
    }

    /// A field that must be exactly `want`.
    fn exact(&mut self, line: usize, rec: &[u8], f: Field, want: &[u8]) {
        let got = f.of(rec);
        if got != want {
            self.bad(line, f, text(want), text(got));
        }
    }

    fn number(&mut self, line: usize, rec: &[u8], f: Field) -> Option<u64> {
        let got = f.of(rec);
        let n = digits(got);
        if n.is_none() {
            self.bad(line, f, format!("{} digits", f.len()), text(got));
        }
        n
    }

    /// A numeric field that must equal a recomputed value.
    fn equals(&mut self, line: usize, rec: &[u8], f: Field, want: u64, what: &str) {
        if let Some(n) = self.number(line, rec, f) {
            if n != want {
                self.bad(
                    line,
                    f,
                    format!("{want:0width$} ({what})", width = f.len()),
                    format!("{n:0width$}", width = f.len()),
                );
            }
        }
    }

    fn not_blank(&mut self, line: usize, rec: &[u8], f: Field) {
        if blank_or_zeros(f.of(rec)) {
            self.bad(line, f, "not blank (nor only zeros)", text(f.of(rec)));
        }
    }

    fn date(&mut self, line: usize, rec: &[u8], f: Field) -> Option<NaiveDate> {
        let d = yymmdd(f.of(rec));
        if d.is_none() {
            self.bad(line, f, "a date YYMMDD", text(f.of(rec)));
        }
        d
    }

    /// The character set, field by field (one finding per field).
    fn charset(&mut self, line: usize, rec: &[u8], fields: Fields) {
        // Nearly every record is clean: one pass with no early exit, which the compiler
        // vectorises, before the byte-by-byte walk that names the fields (that walk was
        // 2.5 % of the embedded packaging's CPU, for records it found nothing in).
        if rec.iter().fold(true, |clean, &b| clean & is_nacha_byte(b)) {
            return;
        }
        let mut last: Option<&'static str> = None;
        for (i, &b) in rec.iter().enumerate() {
            if !is_nacha_byte(b) {
                let f = field_at(fields, i + 1);
                if last == Some(f.name) {
                    continue;
                }
                last = Some(f.name);
                let shown = if f.name == entry_detail::ACCOUNT.name && fields == entry_detail::ALL {
                    format!(
                        "a byte 0x{b:02X} in {}",
                        text(
                            mask_account(String::from_utf8_lossy(f.of(rec)).trim_end()).as_bytes()
                        )
                    )
                } else {
                    format!("byte 0x{b:02X} at position {}", i + 1)
                };
                self.bad(
                    line,
                    f,
                    "characters of the NACHA set (printable ASCII)",
                    shown,
                );
            }
        }
    }

    fn order(&mut self, line: usize, rec: &[u8], expected: &str) {
        self.bad(line, file_header::RECORD_TYPE, expected, text(&rec[..1]));
    }

    fn record(&mut self, line: usize, rec: &[u8; RECORD_LEN]) {
        if self.state == State::Padding {
            if let Some(i) = rec.iter().position(|&b| b != b'9') {
                // Where, not the record: a line after the file control may be an entry
                // (an account number, a name).
                self.find(
                    line,
                    "padding",
                    1,
                    RECORD_LEN,
                    "94 nines (a padding record after the file control)",
                    format!(
                        "byte 0x{:02X} at position {} (record type {})",
                        rec[i],
                        i + 1,
                        text(&rec[..1])
                    ),
                );
            }
            return;
        }
        match rec[0] {
            b'1' => self.file_header(line, rec),
            b'5' => self.batch_header(line, rec),
            b'6' => self.entry_detail(line, rec),
            b'7' => self.addenda(line, rec),
            b'8' => self.batch_control(line, rec),
            b'9' => self.file_control(line, rec),
            _ => {
                self.charset(line, rec, &[]);
                self.order(line, rec, "a record type code 1, 5, 6, 7, 8 or 9");
            }
        }
    }

    /// Close the entry the previous records were about: its addenda indicator must
    /// say whether addenda followed.
    fn close_entry(&mut self) {
        if let Some(e) = self.entry.take() {
            let f = entry_detail::ADDENDA_INDICATOR;
            match (e.indicator, e.addenda) {
                (b'1', 0) => self.bad(e.line, f, "0 (no addenda record follows)", "\"1\""),
                (b'0', n) if n > 0 => self.bad(
                    e.line,
                    f,
                    format!("1 ({n} addenda record follows)"),
                    "\"0\"",
                ),
                _ => {}
            }
            if let Some((kind, false)) = e.required {
                // An indicator of 1 with no addenda at all is said above.
                if !(e.indicator == b'1' && e.addenda == 0) {
                    let kind = String::from_utf8_lossy(kind);
                    let sec = String::from_utf8_lossy(&e.sec);
                    self.bad(
                        e.line,
                        f,
                        format!("1, with an addenda record of type {kind} (every {sec} entry carries one)"),
                        format!("{} and no addenda record of type {kind}", text(&[e.indicator])),
                    );
                }
            }
        }
    }

    fn file_header(&mut self, line: usize, rec: &[u8]) {
        use file_header as f;
        if self.state != State::Start {
            self.order(line, rec, "no second file header (type 1)");
            return;
        }
        self.state = State::BetweenBatches;
        self.charset(line, rec, f::ALL);
        self.exact(line, rec, f::PRIORITY, b"01");
        let dest = f::DESTINATION.of(rec);
        let routing = &dest[1..];
        if !(dest[0] == b' ' || dest[0].is_ascii_digit()) || digits(routing).is_none() {
            self.bad(
                line,
                f::DESTINATION,
                "a space and a 9-digit routing number",
                text(dest),
            );
        } else if routing.iter().all(|&b| b == b'0') {
            self.bad(
                line,
                f::DESTINATION,
                "a routing number (not zeros)",
                text(dest),
            );
        } else if check_digit(&routing[..8]) != Some(routing[8] - b'0') {
            self.bad(
                line,
                f::DESTINATION,
                format!(
                    "routing check digit {}",
                    check_digit(&routing[..8]).unwrap_or(0)
                ),
                text(dest),
            );
        }
        let origin = f::ORIGIN.of(rec);
        if blank_or_zeros(origin) {
            self.bad(
                line,
                f::ORIGIN,
                "not blank (nor only zeros): who sends the file",
                text(origin),
            );
        } else if !origin
            .iter()
            .all(|&b| b == b' ' || b.is_ascii_alphanumeric())
        {
            self.bad(
                line,
                f::ORIGIN,
                "10 letters and digits (or a space and 9 digits)",
                text(origin),
            );
        }
        self.creation_date = self.date(line, rec, f::CREATION_DATE);
        let time = f::CREATION_TIME.of(rec);
        if time != b"    " {
            let ok = digits(time).is_some_and(|t| t / 100 < 24 && t % 100 < 60);
            if !ok {
                self.bad(line, f::CREATION_TIME, "a time HHMM (or blank)", text(time));
            }
        }
        let m = f::ID_MODIFIER.of(rec)[0];
        if !(m.is_ascii_uppercase() || m.is_ascii_digit()) {
            self.bad(line, f::ID_MODIFIER, "A-Z or 0-9", text(&[m]));
        }
        self.exact(line, rec, f::RECORD_SIZE, b"094");
        self.exact(line, rec, f::BLOCKING, b"10");
        self.exact(line, rec, f::FORMAT, b"1");
    }

    fn batch_header(&mut self, line: usize, rec: &[u8]) {
        use batch_header as f;
        match self.state {
            State::BetweenBatches => {}
            State::Start => self.order(line, rec, "a file header (type 1) first"),
            State::InBatch => {
                self.close_entry();
                self.order(
                    line,
                    rec,
                    "a batch control (type 8) before the next batch header",
                );
            }
            State::Padding => unreachable!(),
        }
        self.state = State::InBatch;
        self.report.batches += 1;
        self.charset(line, rec, f::ALL);
        let class_raw = f::SERVICE_CLASS.of(rec);
        let service_class = digits(class_raw).and_then(|c| ServiceClass::from_code(c as u16));
        if service_class.is_none() {
            self.bad(line, f::SERVICE_CLASS, "200, 220 or 225", text(class_raw));
        }
        self.not_blank(line, rec, f::COMPANY_NAME);
        self.not_blank(line, rec, f::COMPANY_ID);
        let sec = f::SEC.of(rec);
        if !KNOWN_SEC_CODES.iter().any(|c| c.as_bytes() == sec) {
            self.bad(
                line,
                f::SEC,
                "a NACHA SEC code (PPD, CCD, WEB, TEL, CTX…)",
                text(sec),
            );
        } else if sec == b"IAT" || sec == b"ADV" {
            self.bad(
                line,
                f::SEC,
                "a SEC code in the standard layout (IAT and ADV are not read)",
                text(sec),
            );
        }
        self.not_blank(line, rec, f::DESCRIPTION);
        // Notifications of change (COR) come from RDFIs with no effective date.
        let cor_without_date =
            sec == b"COR" && matches!(f::EFFECTIVE_DATE.of(rec), b"000000" | b"      ");
        let effective = if cor_without_date {
            None
        } else {
            self.date(line, rec, f::EFFECTIVE_DATE)
        };
        let settlement = f::SETTLEMENT_DATE.of(rec);
        if settlement != b"   " && !digits(settlement).is_some_and(|d| (1..=366).contains(&d)) {
            self.bad(
                line,
                f::SETTLEMENT_DATE,
                "blank (set by the ACH operator) or a day of the year 001-366",
                text(settlement),
            );
        }
        let status = f::ORIGINATOR_STATUS.of(rec);
        if !matches!(status[0], b'1' | b'2') {
            // 0 is for ADV files, which only ACH operators make (and we do not read).
            self.bad(
                line,
                f::ORIGINATOR_STATUS,
                "1 or 2 (0 is for ADV batches, made by ACH operators)",
                text(status),
            );
        }
        self.number(line, rec, f::ODFI);
        if let Some(n) = self.number(line, rec, f::BATCH_NUMBER) {
            if let Some(last) = self.last_batch_number {
                if n <= last {
                    self.bad(
                        line,
                        f::BATCH_NUMBER,
                        format!("above the previous batch's {last:07}"),
                        format!("{n:07}"),
                    );
                }
            }
            self.last_batch_number = Some(n);
        }
        let same_day = f::DESCRIPTIVE_DATE.of(rec).starts_with(b"SD")
            || matches!((effective, self.creation_date), (Some(e), Some(c)) if e <= c);
        let rules = SecRules::of(sec, f::DESCRIPTION.of(rec));
        if let Some(want) = rules.description {
            let got = f::DESCRIPTION.of(rec);
            if got.trim_ascii() != want.as_bytes() {
                self.bad(
                    line,
                    f::DESCRIPTION,
                    format!("{want:?} ({} batches)", rules.name()),
                    text(got),
                );
            }
        }
        let mut class_refuses_sec = false;
        if let (Some(d), Some(class)) = (rules.direction, service_class) {
            if &rules.sec != b"TEL" && !class.admits(d) {
                class_refuses_sec = true;
                let (want, kind) = match d {
                    Direction::Debit => ("200 or 225", "debits"),
                    Direction::Credit => ("200 or 220", "credits"),
                };
                self.bad(
                    line,
                    f::SERVICE_CLASS,
                    format!("{want} ({} entries are {kind})", rules.name()),
                    text(class_raw),
                );
            }
        }
        let mut b = Batch {
            header_line: line,
            service_class,
            service_class_raw: [0; 3],
            company_id: [0; 10],
            sec: [0; 3],
            names_receivers: false,
            odfi: [0; 8],
            number: [0; 7],
            same_day,
            rules,
            class_refuses_sec,
            last_trace: None,
            sums: Sums::default(),
        };
        b.service_class_raw.copy_from_slice(class_raw);
        b.company_id.copy_from_slice(f::COMPANY_ID.of(rec));
        b.sec.copy_from_slice(sec);
        // The SEC codes whose entries name their receiver (moov-io/ach's list).
        const NAMED: [&[u8; 3]; 13] = [
            b"ARC", b"BOC", b"CIE", b"DNE", b"ENR", b"MTE", b"POP", b"POS", b"PPD", b"RCK", b"SHR",
            b"TEL", b"WEB",
        ];
        b.names_receivers = NAMED.contains(&&b.sec);
        b.odfi.copy_from_slice(f::ODFI.of(rec));
        b.number.copy_from_slice(f::BATCH_NUMBER.of(rec));
        self.batch = Some(b);
    }

    fn entry_detail(&mut self, line: usize, rec: &[u8]) {
        use entry_detail as f;
        self.close_entry();
        if self.state != State::InBatch {
            self.order(line, rec, "a batch header (type 5) before entries");
        }
        self.charset(line, rec, f::ALL);
        self.report.entries += 1;
        let code = self.number(line, rec, f::TRANSACTION_CODE);
        let direction = code.and_then(|c| {
            let d = known_transaction_code(c as u8);
            if d.is_none() {
                self.bad(
                    line,
                    f::TRANSACTION_CODE,
                    "a NACHA transaction code (22, 27, 32, 37…)",
                    text(f::TRANSACTION_CODE.of(rec)),
                );
            }
            d
        });
        let rdfi = self.number(line, rec, f::RDFI);
        if let (Some(_), Some(check)) = (rdfi, self.number(line, rec, f::CHECK_DIGIT)) {
            let want = check_digit(f::RDFI.of(rec)).expect("digits");
            if u64::from(want) != check {
                self.bad(
                    line,
                    f::CHECK_DIGIT,
                    format!(
                        "{want} (the check digit of {})",
                        String::from_utf8_lossy(f::RDFI.of(rec))
                    ),
                    check.to_string(),
                );
            }
        }
        let account = f::ACCOUNT.of(rec);
        if account.iter().all(|&b| b == b' ') {
            self.bad(line, f::ACCOUNT, "not blank", text(account));
        }
        let amount = self.number(line, rec, f::AMOUNT);
        if let (Some(amount), Some(code)) = (amount, code) {
            if is_zero_amount_code(code as u8) {
                if amount != 0 {
                    self.bad(
                        line,
                        f::AMOUNT,
                        format!("0 for transaction code {code}"),
                        format!("{amount:010}"),
                    );
                }
            } else if amount == 0
                && direction.is_some()
                && !matches!(code, 21 | 26 | 31 | 36 | 41 | 46 | 51 | 56)
            {
                self.bad(
                    line,
                    f::AMOUNT,
                    format!("above 0 for transaction code {code}"),
                    format!("{amount:010}"),
                );
            }
        }
        if self.batch.as_ref().is_some_and(|b| b.names_receivers) {
            self.not_blank(line, rec, f::INDIVIDUAL_NAME);
        }
        let indicator = f::ADDENDA_INDICATOR.of(rec)[0];
        if !matches!(indicator, b'0' | b'1') {
            self.bad(line, f::ADDENDA_INDICATOR, "0 or 1", text(&[indicator]));
        }
        let trace = self.number(line, rec, f::TRACE);
        let mut duplicate = false;
        if let Some(t) = trace {
            if !self.traces.insert(t) {
                duplicate = true;
                self.bad(
                    line,
                    f::TRACE,
                    "a trace number not used before in the file",
                    format!("{t:015}"),
                );
            }
        }
        let mut many_addenda = false;
        let mut required = None;
        let mut sec = [b' '; 3];
        let mut findings = Vec::new();
        if let Some(b) = &mut self.batch {
            many_addenda = matches!(&b.sec, b"CTX" | b"ENR" | b"TRX" | b"ATX");
            let rules = b.rules;
            sec = rules.sec;
            required = rules.required_addenda.map(|kind| (kind, false));
            let mut class_refused = false;
            if let (Some(class), Some(d)) = (b.service_class, direction) {
                if !class.admits(d) {
                    class_refused = true;
                    let want = match class {
                        ServiceClass::CreditsOnly => {
                            "a credit code (service class 220: credits only)"
                        }
                        _ => "a debit code (service class 225: debits only)",
                    };
                    findings.push((
                        f::TRANSACTION_CODE,
                        want.to_string(),
                        text(f::TRANSACTION_CODE.of(rec)),
                    ));
                }
            }
            let forward = code.is_some_and(|c| !is_return_code(c));
            if let (Some(want), Some(d), true) = (rules.direction, direction, forward) {
                if d != want && !class_refused && !b.class_refuses_sec {
                    let (kind, reversal) = match want {
                        Direction::Debit => ("a debit code", ""),
                        Direction::Credit if &rules.sec == b"TEL" => {
                            ("a credit code", " in a REVERSAL batch")
                        }
                        Direction::Credit => ("a credit code", ""),
                    };
                    let dir = match want {
                        Direction::Debit => "debits",
                        Direction::Credit => "credits",
                    };
                    findings.push((
                        f::TRANSACTION_CODE,
                        format!("{kind} ({} entries{reversal} are {dir})", rules.name()),
                        text(f::TRANSACTION_CODE.of(rec)),
                    ));
                }
            }
            if let (Some((max, words)), Some(a), true) = (rules.max_amount, amount, forward) {
                if a > max {
                    findings.push((
                        f::AMOUNT,
                        format!(
                            "at most {max:010} ({words}, the most of a {} entry)",
                            rules.name()
                        ),
                        format!("{a:010}"),
                    ));
                }
            }
            if let (true, Some(a), Some(c)) = (rules.zero_amount, amount, code) {
                // A zero-amount code with an amount is said above.
                if a > 0 && !is_zero_amount_code(c as u8) {
                    findings.push((
                        f::AMOUNT,
                        format!("0 ({} entries carry no money)", rules.name()),
                        format!("{a:010}"),
                    ));
                }
            }
            if let Some(t) = trace {
                let odfi = f::TRACE.of(rec);
                if odfi[..8] != b.odfi {
                    findings.push((
                        f::TRACE,
                        format!(
                            "to start with the batch's ODFI {}",
                            String::from_utf8_lossy(&b.odfi)
                        ),
                        format!("{t:015}"),
                    ));
                }
                if let Some(last) = b.last_trace {
                    // A duplicate is said once, not also as out of order.
                    if t <= last && !duplicate {
                        findings.push((
                            f::TRACE,
                            format!("above the previous entry's {last:015} (ascending in a batch)"),
                            format!("{t:015}"),
                        ));
                    }
                }
                b.last_trace = Some(t);
            }
            if let (Some(amount), true) = (amount, b.same_day) {
                if amount > SAME_DAY_LIMIT_CENTS {
                    findings.push((
                        f::AMOUNT,
                        format!("at most {SAME_DAY_LIMIT_CENTS:010} ($1,000,000.00) in a same-day batch"),
                        format!("{amount:010}"),
                    ));
                }
            }
            b.sums.entries += 1;
            b.sums.hash += rdfi.unwrap_or(0);
            match (direction, amount) {
                (Some(Direction::Debit), Some(a)) => b.sums.debits += a,
                (Some(Direction::Credit), Some(a)) => b.sums.credits += a,
                _ => b.sums.unknown_side = true,
            }
        }
        for (f, want, got) in findings {
            self.bad(line, f, want, got);
        }
        self.file.entries += 1;
        self.file.hash += rdfi.unwrap_or(0);
        match (direction, amount) {
            (Some(Direction::Debit), Some(a)) => {
                self.file.debits += a;
                self.report.debit_cents += a;
            }
            (Some(Direction::Credit), Some(a)) => {
                self.file.credits += a;
                self.report.credit_cents += a;
            }
            _ => self.file.unknown_side = true,
        }
        self.entry = Some(PendingEntry {
            line,
            indicator,
            trace,
            addenda: 0,
            many_addenda,
            required,
            sec,
        });
    }

    fn addenda(&mut self, line: usize, rec: &[u8]) {
        use addenda05 as f;
        self.report.addenda += 1;
        self.file.addenda += 1;
        if let Some(b) = &mut self.batch {
            b.sums.addenda += 1;
        }
        let Some(mut e) = self.entry.take() else {
            self.charset(line, rec, f::ALL);
            self.order(line, rec, "an entry detail (type 6) before its addenda");
            return;
        };
        e.addenda += 1;
        let n = e.addenda;
        let (many, trace) = (e.many_addenda, e.trace);
        let type_code = f::TYPE_CODE.of(rec);
        if let Some((kind, seen)) = &mut e.required {
            *seen |= type_code == kind.as_slice();
        }
        self.entry = Some(e);
        if let Some(rules) = self.batch.as_ref().map(|b| b.rules) {
            if matches!(type_code, b"02" | b"05" | b"98") && !rules.admits_addenda(type_code) {
                let want = match rules.required_addenda {
                    Some(kind) => format!(
                        "{} ({} entries carry addenda of that type, or 99 when returned)",
                        String::from_utf8_lossy(kind),
                        rules.name()
                    ),
                    None if rules.addenda05 => format!(
                        "05 or 99 ({} entries carry no addenda of type {})",
                        rules.name(),
                        String::from_utf8_lossy(type_code)
                    ),
                    None => format!("99 ({} entries carry no addenda but returns)", rules.name()),
                };
                self.charset(line, rec, &[]);
                self.bad(line, f::TYPE_CODE, want, text(type_code));
                return;
            }
        }
        if type_code != b"05" {
            self.charset(line, rec, &[]);
            if !matches!(type_code, b"02" | b"98" | b"99") {
                self.bad(line, f::TYPE_CODE, "05 (or 02, 98, 99)", text(type_code));
            }
            return;
        }
        self.charset(line, rec, f::ALL);
        if n > 1 && !many {
            self.order(
                line,
                rec,
                "at most one addenda record per entry for this SEC code",
            );
        }
        self.equals(
            line,
            rec,
            f::SEQUENCE,
            u64::from(n),
            "this entry's addenda so far",
        );
        if let Some(t) = trace {
            self.equals(
                line,
                rec,
                f::ENTRY_SEQUENCE,
                t % 10_000_000,
                "the last 7 digits of the entry's trace number",
            );
        }
    }

    fn batch_control(&mut self, line: usize, rec: &[u8]) {
        use batch_control as f;
        self.close_entry();
        self.charset(line, rec, f::ALL);
        if self.state != State::InBatch {
            self.order(line, rec, "a batch header (type 5) before its control");
            return;
        }
        self.state = State::BetweenBatches;
        let Some(b) = self.batch.take() else { return };
        let header = b.header_line;
        if b.sums.entries == 0 {
            self.order(
                line,
                rec,
                &format!("an entry detail (type 6): the batch of line {header} holds none"),
            );
        }
        let same = |v: &mut Self, fld: Field, want: &[u8], what: &str| {
            // Compared without the blanks around them: a batch control's company
            // identification is often justified otherwise than its header's.
            let got = fld.of(rec);
            if got.trim_ascii() != want.trim_ascii() {
                v.bad(
                    line,
                    fld,
                    format!("{} (the batch header's, line {header}{what})", text(want)),
                    text(got),
                );
            }
        };
        same(self, f::SERVICE_CLASS, &b.service_class_raw, "");
        let s = b.sums;
        self.equals(
            line,
            rec,
            f::COUNT,
            s.entries + s.addenda,
            "entries and addenda in the batch",
        );
        self.equals(
            line,
            rec,
            f::HASH,
            s.hash % 10_000_000_000,
            "the sum of the batch's RDFI identifications",
        );
        if !s.unknown_side {
            self.equals(line, rec, f::DEBITS, s.debits, "the batch's debits");
            self.equals(line, rec, f::CREDITS, s.credits, "the batch's credits");
        }
        same(self, f::COMPANY_ID, &b.company_id, "");
        if f::RESERVED.of(rec).iter().any(|&c| c != b' ') {
            self.bad(line, f::RESERVED, "blanks", text(f::RESERVED.of(rec)));
        }
        same(self, f::ODFI, &b.odfi, "");
        same(self, f::BATCH_NUMBER, &b.number, "");
    }

    fn file_control(&mut self, line: usize, rec: &[u8]) {
        use file_control as f;
        self.close_entry();
        match self.state {
            State::BetweenBatches => {}
            State::Start => self.order(line, rec, "a file header (type 1) first"),
            State::InBatch => self.order(
                line,
                rec,
                "a batch control (type 8) before the file control",
            ),
            State::Padding => unreachable!(),
        }
        if rec.iter().all(|&b| b == b'9') {
            self.find(
                line,
                "padding",
                1,
                RECORD_LEN,
                "a file control record (type 9) before padding",
                text(rec),
            );
            self.state = State::Padding;
            return;
        }
        self.state = State::Padding;
        self.file_control_line = Some(line);
        self.charset(line, rec, f::ALL);
        let batches = self.report.batches as u64;
        self.equals(
            line,
            rec,
            f::BATCH_COUNT,
            batches,
            "batch headers in the file",
        );
        // The block count is checked at the end, when the line count is known.
        self.number(line, rec, f::BLOCK_COUNT);
        let s = self.file;
        self.equals(
            line,
            rec,
            f::COUNT,
            s.entries + s.addenda,
            "entries and addenda in the file",
        );
        self.equals(
            line,
            rec,
            f::HASH,
            s.hash % 10_000_000_000,
            "the sum of the file's RDFI identifications",
        );
        if !s.unknown_side {
            self.equals(line, rec, f::DEBITS, s.debits, "the file's debits");
            self.equals(line, rec, f::CREDITS, s.credits, "the file's credits");
        }
        if f::RESERVED.of(rec).iter().any(|&c| c != b' ') {
            self.bad(line, f::RESERVED, "blanks", text(f::RESERVED.of(rec)));
        }
        self.block_count_field = Some(digits(f::BLOCK_COUNT.of(rec)));
    }

    fn end(&mut self, lines: usize) {
        self.close_entry();
        if lines == 0 {
            self.find(0, "file", 0, 0, "a file header (type 1)", "an empty file");
            return;
        }
        match self.state {
            State::Padding => {}
            State::InBatch => self.find(
                lines,
                "record type code",
                1,
                1,
                "a batch control (type 8) and a file control (type 9)",
                "the end of the file",
            ),
            _ => self.find(
                lines,
                "record type code",
                1,
                1,
                "a file control record (type 9)",
                "the end of the file",
            ),
        }
        if !lines.is_multiple_of(BLOCKING_FACTOR) {
            self.find(
                lines,
                "line count",
                0,
                0,
                format!("a multiple of {BLOCKING_FACTOR} (padded with 9…9 records)"),
                format!("{lines} lines"),
            );
        }
        if let (Some(line), Some(Some(blocks))) = (self.file_control_line, self.block_count_field) {
            let want = lines.div_ceil(BLOCKING_FACTOR) as u64;
            if blocks != want {
                let f = file_control::BLOCK_COUNT;
                self.bad(
                    line,
                    f,
                    format!("{want:06} ({lines} lines in blocks of {BLOCKING_FACTOR})"),
                    format!("{blocks:06}"),
                );
            }
        }
        self.report.findings.sort_by_key(|f| f.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::tests::good;
    use crate::writer::{write_file, BankProfile, FileOptions, Grouping};

    fn file() -> Vec<u8> {
        let profile = BankProfile {
            bank: "first".into(),
            odfi: "021000021".parse().unwrap(),
            immediate_destination: "021000021".parse().unwrap(),
            immediate_destination_name: "BANK".into(),
            immediate_origin: "123456789".into(),
            immediate_origin_name: "US".into(),
            reference_code: String::new(),
        };
        let options = FileOptions::new(good().submission_date.and_hms_opt(8, 0, 0).unwrap(), '0');
        let mut second = good();
        second.entry_id = "E-2".into();
        write_file(
            Vec::new(),
            &profile,
            &options,
            &[good(), second],
            Grouping::Separate,
        )
        .unwrap()
        .out
    }

    fn lines_of(bytes: &[u8]) -> Vec<Vec<u8>> {
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    #[test]
    fn line_endings_lf_crlf_or_none_are_read() {
        let lf = file();
        assert!(validate(&lf).is_valid());
        let lines = lines_of(&lf);
        let crlf: Vec<u8> = lines
            .iter()
            .flat_map(|l| [l.as_slice(), b"\r\n"].concat())
            .collect();
        assert!(validate(&crlf).is_valid(), "{:?}", validate(&crlf).findings);
        let fixed: Vec<u8> = lines.concat();
        let r = validate(&fixed);
        assert!(r.is_valid(), "{:?}", r.findings);
        assert_eq!(r.lines, 10);
        let mut trailing = lf.clone();
        trailing.extend_from_slice(b"\n\n");
        assert!(validate(&trailing).is_valid());
        let mut no_last = lf.clone();
        no_last.pop();
        assert!(validate(&no_last).is_valid());
    }

    #[test]
    fn mixed_line_endings_are_found_at_their_line() {
        let mut lines = lines_of(&file());
        lines[3].push(b'\r');
        let mut bytes = lines.join(&b'\n');
        bytes.push(b'\n');
        let r = validate(&bytes);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        assert_eq!(
            r.findings[0].to_string(),
            "line 4: line ending: expected \\n like line 1, found \\r\\n"
        );
    }

    #[test]
    fn an_empty_file_is_invalid() {
        let r = validate(b"");
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].field, "file");
    }

    #[test]
    fn a_record_after_the_file_control_is_said_by_position_not_shown() {
        let mut lines = lines_of(&file());
        // An entry (account 123456789, JANE DOE) where padding belongs.
        let entry = lines[2].clone();
        *lines.last_mut().unwrap() = entry;
        let mut bytes = lines.join(&b'\n');
        bytes.push(b'\n');
        let r = validate(&bytes);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        let shown = r.findings[0].to_string();
        assert_eq!(
            shown,
            "line 10: padding (positions 1-94): expected 94 nines (a padding record after the file control), found byte 0x36 at position 1 (record type \"6\")"
        );
    }

    #[test]
    fn account_numbers_in_findings_are_masked() {
        let mut lines = lines_of(&file());
        // The first entry's account (positions 13-29) with a byte outside the set.
        lines[2][14] = 0x01;
        let mut bytes = lines.join(&b'\n');
        bytes.push(b'\n');
        let r = validate(&bytes);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        let shown = r.findings[0].to_string();
        assert!(
            shown.starts_with("line 3: DFI account number (positions 13-29)"),
            "{shown}"
        );
        assert!(!shown.contains("3456"), "{shown}");
    }
}
