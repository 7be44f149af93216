//! The NACHA file writer: records straight into an `io::Write`, each built in a stack
//! buffer (nothing allocated per entry or per field).

use std::collections::HashMap;
use std::fmt;
use std::io::Write;

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use serde::Serialize;

use crate::codes::{Direction, ServiceClass};
use crate::entry::{BatchKey, Entry};
use crate::field::{check_text, shown, FieldError, Text};
use crate::layout::{
    addenda05, batch_control, batch_header, entry_detail, file_control, file_header, Field,
    BLOCKING_FACTOR, RECORD_LEN,
};
use crate::routing::RoutingNumber;

/// The most records a batch may hold (the 6 digits of its entry/addenda count).
pub const MAX_BATCH_RECORDS: u64 = 999_999;
/// The most lines a file may have (the 6 digits of its block count, ten lines a block).
pub const MAX_FILE_LINES: u64 = 999_999 * BLOCKING_FACTOR as u64;
/// The largest debit or credit total of a batch or a file, in cents (12 digits).
pub const MAX_TOTAL_CENTS: u64 = 999_999_999_999;
/// The largest trace sequence number (7 digits).
pub const MAX_TRACE_SEQUENCE: u32 = 9_999_999;

/// What a bank needs in a file: who it is from and to, and the ODFI the batches and
/// trace numbers name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BankProfile {
    /// The key entries name in [`Entry::bank`].
    pub bank: String,
    /// The originating bank's routing number: its first 8 digits are the ODFI
    /// identification of every batch and the start of every trace number.
    pub odfi: RoutingNumber,
    /// Immediate destination (file header 4-13): the routing number of the bank or
    /// ACH operator receiving the file, written with a leading space.
    pub immediate_destination: RoutingNumber,
    /// Its name (41-63, up to 23).
    pub immediate_destination_name: String,
    /// Immediate origin (14-23): 9 digits (written with a leading space) or the 10
    /// characters the bank assigned (often `1` + EIN).
    pub immediate_origin: String,
    /// Its name (64-86, up to 23).
    pub immediate_origin_name: String,
    /// Reference code (87-94, up to 8, may be blank).
    #[serde(default)]
    pub reference_code: String,
}

impl BankProfile {
    /// Every problem with the profile, each naming its field.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.bank.is_empty() {
            errors.push(FieldError::new("bank", "not empty", shown(&self.bank)));
        }
        let o = self.immediate_origin.as_bytes();
        let ok = match o.len() {
            9 => o.iter().all(u8::is_ascii_digit),
            10 => o.iter().all(u8::is_ascii_alphanumeric),
            _ => false,
        } && !o.iter().all(|&b| b == b'0');
        if !ok {
            errors.push(FieldError::new(
                "immediate_origin",
                "9 digits or 10 letters and digits, not all zeros",
                shown(&self.immediate_origin),
            ));
        }
        check_text(
            "immediate_destination_name",
            &self.immediate_destination_name,
            23,
            false,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "immediate_origin_name",
            &self.immediate_origin_name,
            23,
            false,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "reference_code",
            &self.reference_code,
            8,
            false,
            Text::Shown,
            &mut errors,
        );
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// How records end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineEnding {
    /// `\n` (the default).
    #[default]
    Lf,
    /// `\r\n`.
    CrLf,
}

impl LineEnding {
    fn bytes(self) -> &'static [u8] {
        match self {
            LineEnding::Lf => b"\n",
            LineEnding::CrLf => b"\r\n",
        }
    }
}

/// What differs from one file to the next. Passed in (no clock is read), so the same
/// entries and options always give the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOptions {
    /// File creation date and time (file header 24-33; minutes kept).
    pub created: NaiveDateTime,
    /// File ID modifier (34): `A`-`Z` or `0`-`9`, telling apart the files of one day.
    pub file_id_modifier: char,
    /// The sequence number (up to 7 digits) of the file's first trace number; the
    /// following entries count up from it. 1 for the first file of a day; a caller
    /// that sends several files a day through one ODFI continues where the last
    /// file stopped so trace numbers stay unique.
    pub first_trace_sequence: u32,
    /// How records end.
    pub line_ending: LineEnding,
}

impl FileOptions {
    /// Options for a file created at `created` with this modifier, trace numbers
    /// from 1, `\n` line endings.
    pub fn new(created: NaiveDateTime, file_id_modifier: char) -> Self {
        FileOptions {
            created,
            file_id_modifier,
            first_trace_sequence: 1,
            line_ending: LineEnding::Lf,
        }
    }
}

/// A trace number: the ODFI's 8 digits and a 7-digit sequence number, 15 digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(into = "String")]
pub struct TraceNumber(u64);

impl TraceNumber {
    /// The trace number of `sequence` at `odfi`.
    pub fn new(odfi: &RoutingNumber, sequence: u32) -> Self {
        TraceNumber(odfi.dfi_value() * 10_000_000 + u64::from(sequence))
    }

    /// The 15 digits as a number.
    pub fn value(self) -> u64 {
        self.0
    }

    /// The sequence number (the last 7 digits).
    pub fn sequence(self) -> u32 {
        (self.0 % 10_000_000) as u32
    }
}

impl fmt::Display for TraceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:015}", self.0)
    }
}

impl fmt::Debug for TraceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceNumber({self})")
    }
}

impl From<TraceNumber> for String {
    fn from(t: TraceNumber) -> String {
        t.to_string()
    }
}

/// What cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The bank profile is invalid.
    #[error("bank profile {bank:?}: {}", join(errors))]
    Profile {
        /// The profile's key.
        bank: String,
        /// What is wrong with it.
        errors: Vec<FieldError>,
    },
    /// A file option is invalid.
    #[error("file options: {0}")]
    Options(FieldError),
    /// An entry is invalid.
    #[error("entry {entry_id:?}: {}", join(errors))]
    Entry {
        /// The caller's id of the entry.
        entry_id: String,
        /// What is wrong with it.
        errors: Vec<FieldError>,
    },
    /// A batch was begun for another bank than the file's.
    #[error("batch for bank {got:?}: expected the file's bank {expected:?}")]
    WrongBank {
        /// The file's bank.
        expected: String,
        /// The batch's.
        got: String,
    },
    /// An entry was added whose batch fields differ from the open batch's.
    #[error("entry {entry_id:?}: its batch fields differ from batch {batch}'s")]
    NotInBatch {
        /// The caller's id of the entry.
        entry_id: String,
        /// The open batch's number.
        batch: u32,
    },
    /// An entry was added with no batch open.
    #[error("entry {entry_id:?}: no batch is open")]
    NoBatch {
        /// The caller's id of the entry.
        entry_id: String,
    },
    /// A count or total would not fit its field: split the entries over more batches
    /// or files.
    #[error("{what}: at most {limit}")]
    Full {
        /// Which count or total.
        what: &'static str,
        /// Its limit.
        limit: u64,
    },
    /// The output refused the bytes.
    #[error("cannot write the file")]
    Io(#[source] std::io::Error),
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Counts and totals of a file (or a batch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Entry detail records.
    pub entries: u64,
    /// Addenda records.
    pub addenda: u64,
    /// The sum of the RDFI identifications (first 8 routing digits), before the last
    /// ten digits are kept.
    pub hash_sum: u64,
    /// Debits, in cents.
    pub debit_cents: u64,
    /// Credits, in cents.
    pub credit_cents: u64,
}

impl Totals {
    /// The entry hash as written: the last ten digits of [`Totals::hash_sum`].
    pub fn entry_hash(&self) -> u64 {
        self.hash_sum % 10_000_000_000
    }
}

/// What a finished file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FileSummary {
    /// Batches.
    pub batches: u32,
    /// Lines, padding included (a multiple of 10).
    pub lines: u64,
    /// Blocks of ten lines.
    pub blocks: u64,
    /// Entries, addenda, hash and totals.
    pub totals: Totals,
}

struct OpenBatch {
    key: BatchKey,
    number: u32,
    totals: Totals,
}

/// A NACHA file being written: [`NachaWriter::begin_batch`], [`NachaWriter::add`]
/// its entries, [`NachaWriter::end_batch`], more batches, then [`NachaWriter::finish`].
///
/// Trace numbers count up across the file from
/// [`FileOptions::first_trace_sequence`]; batch numbers from 1. Every entry is
/// validated ([`Entry::validate`]) before it is written, so a file this writes is
/// always well-formed. Give it a buffered output (a `Vec<u8>`, a `BufWriter`): it
/// writes one record at a time.
pub struct NachaWriter<W: Write> {
    out: W,
    rec: [u8; RECORD_LEN + 2],
    eol: &'static [u8],
    bank: String,
    odfi: RoutingNumber,
    next_sequence: u32,
    batches: u32,
    lines: u64,
    totals: Totals,
    batch: Option<OpenBatch>,
}

impl<W: Write> fmt::Debug for NachaWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NachaWriter")
            .field("bank", &self.bank)
            .field("batches", &self.batches)
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl<W: Write> NachaWriter<W> {
    /// Start a file for `profile`'s bank: checks the profile and options and writes
    /// the file header.
    pub fn new(out: W, profile: &BankProfile, options: &FileOptions) -> Result<Self, WriteError> {
        profile.validate().map_err(|errors| WriteError::Profile {
            bank: profile.bank.clone(),
            errors,
        })?;
        let m = options.file_id_modifier;
        if !(m.is_ascii_uppercase() || m.is_ascii_digit()) {
            return Err(WriteError::Options(FieldError::new(
                "file_id_modifier",
                "A-Z or 0-9",
                format!("{m:?}"),
            )));
        }
        let seq = options.first_trace_sequence;
        if seq == 0 || seq > MAX_TRACE_SEQUENCE {
            return Err(WriteError::Options(FieldError::new(
                "first_trace_sequence",
                format!("1 to {MAX_TRACE_SEQUENCE}"),
                seq.to_string(),
            )));
        }
        let mut w = NachaWriter {
            out,
            rec: [b' '; RECORD_LEN + 2],
            eol: options.line_ending.bytes(),
            bank: profile.bank.clone(),
            odfi: profile.odfi,
            next_sequence: seq,
            batches: 0,
            lines: 0,
            totals: Totals::default(),
            batch: None,
        };
        use file_header as f;
        w.start(b'1');
        w.put(f::PRIORITY, b"01");
        w.put(f::DESTINATION, b" ");
        w.put_at(f::DESTINATION, 1, profile.immediate_destination.digits());
        let origin = profile.immediate_origin.as_bytes();
        if origin.len() == 9 {
            w.put_at(f::ORIGIN, 1, origin);
        } else {
            w.put(f::ORIGIN, origin);
        }
        w.date(f::CREATION_DATE, options.created.date());
        w.num(
            f::CREATION_TIME,
            u64::from(options.created.hour() * 100 + options.created.minute()),
        );
        w.put(f::ID_MODIFIER, &[m as u8]);
        w.put(f::RECORD_SIZE, b"094");
        w.put(f::BLOCKING, b"10");
        w.put(f::FORMAT, b"1");
        w.put(
            f::DESTINATION_NAME,
            profile.immediate_destination_name.as_bytes(),
        );
        w.put(f::ORIGIN_NAME, profile.immediate_origin_name.as_bytes());
        w.put(f::REFERENCE, profile.reference_code.as_bytes());
        w.emit()?;
        Ok(w)
    }

    /// Open a batch for entries of `key` (closing the open one, if any) and write its
    /// header. Returns its batch number.
    ///
    /// The header carries the key's fields; the settlement date is left blank (the
    /// ACH operator fills it in); a same-day batch is one whose effective date is its
    /// submission date (and may say `SDHHMM` in its descriptive date).
    pub fn begin_batch(&mut self, key: &BatchKey) -> Result<u32, WriteError> {
        if key.bank != self.bank {
            return Err(WriteError::WrongBank {
                expected: self.bank.clone(),
                got: key.bank.clone(),
            });
        }
        // A key is taken from a valid entry; its text fields were checked there, but a
        // key built by hand is checked again here (once per batch).
        let mut errors = Vec::new();
        check_text(
            "company_name",
            &key.company_name,
            16,
            true,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "company_id",
            &key.company_id,
            10,
            true,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "entry_description",
            &key.entry_description,
            10,
            true,
            Text::Shown,
            &mut errors,
        );
        check_text(
            "descriptive_date",
            &key.descriptive_date,
            6,
            false,
            Text::Shown,
            &mut errors,
        );
        if let Some(e) = errors.into_iter().next() {
            return Err(WriteError::Options(e));
        }
        self.end_batch()?;
        if u64::from(self.batches) + 1 > 999_999 {
            return Err(WriteError::Full {
                what: "batches in a file",
                limit: 999_999,
            });
        }
        self.room_for(3)?;
        self.batches += 1;
        let number = self.batches;
        use batch_header as f;
        self.start(b'5');
        self.num(f::SERVICE_CLASS, u64::from(key.service_class.code()));
        self.put(f::COMPANY_NAME, key.company_name.as_bytes());
        self.put(f::COMPANY_ID, key.company_id.as_bytes());
        self.put(f::SEC, key.sec_code.as_str().as_bytes());
        self.put(f::DESCRIPTION, key.entry_description.as_bytes());
        self.put(f::DESCRIPTIVE_DATE, key.descriptive_date.as_bytes());
        self.date(f::EFFECTIVE_DATE, key.effective_date);
        self.put(f::ORIGINATOR_STATUS, b"1");
        let odfi = self.odfi;
        self.put(f::ODFI, odfi.dfi());
        self.num(f::BATCH_NUMBER, u64::from(number));
        self.emit()?;
        self.batch = Some(OpenBatch {
            key: key.clone(),
            number,
            totals: Totals::default(),
        });
        Ok(number)
    }

    /// Write an entry (and its addenda) into the open batch. Returns its trace number.
    pub fn add(&mut self, entry: &Entry) -> Result<TraceNumber, WriteError> {
        self.add_checked(entry, true)
    }

    /// [`NachaWriter::add`], checking that the entry fits the open batch only when
    /// `check_batch` ([`write_file`] grouped its entries by key already).
    fn add_checked(&mut self, entry: &Entry, check_batch: bool) -> Result<TraceNumber, WriteError> {
        entry.validate().map_err(|errors| WriteError::Entry {
            entry_id: entry.entry_id.clone(),
            errors,
        })?;
        let Some(batch) = &self.batch else {
            return Err(WriteError::NoBatch {
                entry_id: entry.entry_id.clone(),
            });
        };
        if check_batch && !entry.fits(&batch.key) {
            return Err(WriteError::NotInBatch {
                entry_id: entry.entry_id.clone(),
                batch: batch.number,
            });
        }
        let records = 1 + u64::from(entry.addenda.is_some());
        let bt = batch.totals;
        if bt.entries + bt.addenda + records > MAX_BATCH_RECORDS {
            return Err(WriteError::Full {
                what: "entry and addenda records in a batch",
                limit: MAX_BATCH_RECORDS,
            });
        }
        // A file's totals are at least its open batch's: checking the file's checks both.
        let (debit, credit) = match entry.direction() {
            Direction::Debit => (entry.amount_cents, 0),
            Direction::Credit => (0, entry.amount_cents),
        };
        if self.totals.debit_cents + debit > MAX_TOTAL_CENTS
            || self.totals.credit_cents + credit > MAX_TOTAL_CENTS
        {
            return Err(WriteError::Full {
                what: "debit or credit total of a file, in cents",
                limit: MAX_TOTAL_CENTS,
            });
        }
        if self.next_sequence > MAX_TRACE_SEQUENCE {
            return Err(WriteError::Full {
                what: "trace sequence numbers",
                limit: u64::from(MAX_TRACE_SEQUENCE),
            });
        }
        // This entry, its addenda, the batch control and the file control.
        self.room_for(records + 2)?;

        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let trace = TraceNumber::new(&self.odfi, sequence);
        let hash = entry.rdfi_routing.dfi_value();
        let add = Totals {
            entries: 1,
            addenda: records - 1,
            hash_sum: hash,
            debit_cents: debit,
            credit_cents: credit,
        };
        if let Some(b) = &mut self.batch {
            b.totals.add(&add);
        }
        self.totals.add(&add);

        use entry_detail as f;
        self.start(b'6');
        self.num(
            f::TRANSACTION_CODE,
            u64::from(entry.transaction_code.code()),
        );
        let routing = entry.rdfi_routing.digits();
        self.put(f::RDFI, &routing[..8]);
        self.put(f::CHECK_DIGIT, &routing[8..]);
        self.put(f::ACCOUNT, entry.account_number.expose().as_bytes());
        self.num(f::AMOUNT, entry.amount_cents);
        self.put(f::INDIVIDUAL_ID, entry.individual_id.as_bytes());
        self.put(f::INDIVIDUAL_NAME, entry.individual_name.as_bytes());
        self.put(
            f::ADDENDA_INDICATOR,
            if entry.addenda.is_some() { b"1" } else { b"0" },
        );
        self.num(f::TRACE, trace.value());
        self.emit()?;

        if let Some(text) = &entry.addenda {
            use addenda05 as a;
            self.start(b'7');
            self.put(a::TYPE_CODE, b"05");
            self.put(a::PAYMENT_INFO, text.as_bytes());
            self.num(a::SEQUENCE, 1);
            self.num(a::ENTRY_SEQUENCE, u64::from(sequence));
            self.emit()?;
        }
        Ok(trace)
    }

    /// Close the open batch, if any, writing its control record.
    pub fn end_batch(&mut self) -> Result<(), WriteError> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        let t = batch.totals;
        use batch_control as f;
        self.start(b'8');
        self.num(f::SERVICE_CLASS, u64::from(batch.key.service_class.code()));
        self.num(f::COUNT, t.entries + t.addenda);
        self.num(f::HASH, t.entry_hash());
        self.num(f::DEBITS, t.debit_cents);
        self.num(f::CREDITS, t.credit_cents);
        self.put(f::COMPANY_ID, batch.key.company_id.as_bytes());
        let odfi = self.odfi;
        self.put(f::ODFI, odfi.dfi());
        self.num(f::BATCH_NUMBER, u64::from(batch.number));
        self.emit()
    }

    /// Close the open batch, write the file control and the padding records, and give
    /// back the output (not flushed) with what the file holds.
    pub fn finish(mut self) -> Result<(W, FileSummary), WriteError> {
        self.end_batch()?;
        let lines = self.lines + 1;
        let blocks = lines.div_ceil(BLOCKING_FACTOR as u64);
        let t = self.totals;
        use file_control as f;
        self.start(b'9');
        self.num(f::BATCH_COUNT, u64::from(self.batches));
        self.num(f::BLOCK_COUNT, blocks);
        self.num(f::COUNT, t.entries + t.addenda);
        self.num(f::HASH, t.entry_hash());
        self.num(f::DEBITS, t.debit_cents);
        self.num(f::CREDITS, t.credit_cents);
        self.emit()?;
        self.rec[..RECORD_LEN].fill(b'9');
        while !self.lines.is_multiple_of(BLOCKING_FACTOR as u64) {
            self.emit_raw()?;
        }
        let summary = FileSummary {
            batches: self.batches,
            lines: self.lines,
            blocks,
            totals: t,
        };
        Ok((self.out, summary))
    }

    /// Whether `records` more lines (and the padding to a block) fit in a file.
    fn room_for(&self, records: u64) -> Result<(), WriteError> {
        if self.lines + records > MAX_FILE_LINES {
            return Err(WriteError::Full {
                what: "lines in a file",
                limit: MAX_FILE_LINES,
            });
        }
        Ok(())
    }

    #[inline]
    fn start(&mut self, record_type: u8) {
        self.rec[..RECORD_LEN].fill(b' ');
        self.rec[0] = record_type;
    }

    /// Left-justified text, space-padded (the record is blank already); never longer
    /// than the field (validation made sure it fits).
    #[inline]
    fn put(&mut self, f: Field, s: &[u8]) {
        self.put_at(f, 0, s);
    }

    #[inline]
    fn put_at(&mut self, f: Field, offset: usize, s: &[u8]) {
        let start = f.start - 1 + offset;
        let n = s.len().min(f.len() - offset);
        self.rec[start..start + n].copy_from_slice(&s[..n]);
    }

    /// A number, right-justified and zero-filled.
    #[inline]
    fn num(&mut self, f: Field, mut v: u64) {
        for b in self.rec[f.start - 1..f.end].iter_mut().rev() {
            *b = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }

    #[inline]
    fn date(&mut self, f: Field, d: NaiveDate) {
        let yymmdd =
            (d.year().rem_euclid(100) as u64) * 10_000 + u64::from(d.month() * 100 + d.day());
        self.num(f, yymmdd);
    }

    #[inline]
    fn emit(&mut self) -> Result<(), WriteError> {
        self.emit_raw()
    }

    #[inline]
    fn emit_raw(&mut self) -> Result<(), WriteError> {
        let n = RECORD_LEN + self.eol.len();
        self.rec[RECORD_LEN..n].copy_from_slice(self.eol);
        self.out.write_all(&self.rec[..n]).map_err(WriteError::Io)?;
        self.lines += 1;
        Ok(())
    }
}

impl Totals {
    fn add(&mut self, o: &Totals) {
        self.entries += o.entries;
        self.addenda += o.addenda;
        self.hash_sum += o.hash_sum;
        self.debit_cents += o.debit_cents;
        self.credit_cents += o.credit_cents;
    }
}

/// How [`write_file`] forms batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grouping {
    /// Credits and debits in batches of their own (220 and 225): [`Entry::batch_key`].
    #[default]
    Separate,
    /// Both in one batch (200): [`Entry::mixed_batch_key`].
    Mixed,
}

/// A file [`write_file`] wrote.
#[derive(Debug)]
pub struct Written<W> {
    /// The output.
    pub out: W,
    /// What the file holds.
    pub summary: FileSummary,
    /// The trace number of each entry, in the order the entries were given.
    pub traces: Vec<TraceNumber>,
}

/// Write `entries` as one file for `profile`'s bank: one batch per batch key, batches
/// in the order their first entry comes, entries in the order given.
///
/// Entries given in batch order (as a ledger sorted by batch key gives them) are
/// grouped without allocating per entry; an entry that starts or returns to another
/// batch costs one [`BatchKey`] (a few strings). The writing itself never allocates
/// per entry.
pub fn write_file<W: Write>(
    out: W,
    profile: &BankProfile,
    options: &FileOptions,
    entries: &[Entry],
    grouping: Grouping,
) -> Result<Written<W>, WriteError> {
    let key_of = |e: &Entry| match grouping {
        Grouping::Separate => e.batch_key(),
        Grouping::Mixed => e.mixed_batch_key(),
    };
    // Group by key; most inputs come in batch order, so an entry that fits the last
    // group's key is placed without building its own key.
    let mut groups: Vec<(BatchKey, Vec<usize>)> = Vec::new();
    let mut index: HashMap<BatchKey, usize> = HashMap::new();
    for (i, e) in entries.iter().enumerate() {
        if let Some((key, members)) = groups.last_mut() {
            if same_group(e, key, grouping) {
                members.push(i);
                continue;
            }
        }
        let key = key_of(e);
        match index.get(&key) {
            Some(&g) => groups[g].1.push(i),
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key, vec![i]));
            }
        }
    }
    let mut w = NachaWriter::new(out, profile, options)?;
    let mut traces = vec![TraceNumber(0); entries.len()];
    for (key, members) in &groups {
        w.begin_batch(key)?;
        for &i in members {
            traces[i] = w.add_checked(&entries[i], false)?;
        }
    }
    let (out, summary) = w.finish()?;
    Ok(Written {
        out,
        summary,
        traces,
    })
}

/// Whether `e`'s key under `grouping` is `key` exactly.
fn same_group(e: &Entry, key: &BatchKey, grouping: Grouping) -> bool {
    let class_matches = match grouping {
        Grouping::Mixed => key.service_class == ServiceClass::Mixed,
        Grouping::Separate => key.service_class == e.service_class(),
    };
    class_matches && e.fits(key)
}
