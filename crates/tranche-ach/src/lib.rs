//! ACH payment files, the format layer: entries and their validation, batch keys, a
//! NACHA file writer and a NACHA file validator. The payment-file pipeline (entry
//! ledger, intake, rules, packaging) is built on top of this crate.
//!
//! - [`Entry`]: one credit or debit as the caller gives it; [`Entry::validate`] lists
//!   every problem, each a [`FieldError`] naming the field, what was expected and
//!   what was got (account numbers masked: [`mask_account`]).
//! - [`Entry::batch_key`]: entries with equal [`BatchKey`]s share a batch.
//! - [`NachaWriter`] / [`write_file`]: 94-character records straight into an
//!   `io::Write`, blocked by ten with `9…9` padding, entry hash, totals, ascending
//!   trace numbers; nothing allocated per entry. Everything that varies (creation
//!   time, file ID modifier, first trace number) is passed in: the same input gives
//!   the same bytes.
//! - [`validate`]: reads any NACHA file (not only ours) and reports every
//!   [`Finding`] by line, field (with its positions), expected and found.
//!
//! The writer and the validator are written by hand: no maintained Rust crate writes
//! or checks NACHA files (the Go library moov-io/ach is the reference we test
//! against: its `achcli -reformat=ach` must accept every file we write). Field
//! positions are in [`layout`].
//!
//! What moov-io's `achcli` v1.63.3 (`-reformat=ach`) passes and [`validate`] reports
//! (each case is in `tests/mutations.rs`, which checks both verdicts): a record of 93
//! characters; an effective entry date that is no date (`260231`); a padding record
//! that is not all nines; a file whose line count is not a multiple of ten (a missing
//! block of padding); a wrong block count; an addenda indicator of 1 with no addenda;
//! a same-day entry over $1,000,000.
//!
//! What achcli rejects and [`validate`] passed until issue 32 (now reported, each also
//! in `tests/mutations.rs`): an immediate destination or origin of zeros; an
//! originator status code of 0 outside an ADV batch; a batch without entries; and the
//! rules of a batch's SEC code (credits in a TEL batch, addenda on TEL entries, ARC
//! entries over $25,000, an ENR batch not described `AUTOENROLL`, money in DNE or COR
//! entries, COR entries without their addenda 98, …: see [`validate`]).
//!
//! Same Day ACH: an entry is same-day when its effective date is its submission date
//! (the batch header's effective entry date; the settlement date stays blank for the
//! ACH operator) and at most [`SAME_DAY_LIMIT_CENTS`]; the company descriptive date
//! may say `SDHHMM`. The validator treats a batch as same-day when its effective entry
//! date is the file's creation date or its descriptive date starts with `SD`.

#![deny(missing_docs)]

mod codes;
mod entry;
mod field;
pub mod layout;
mod routing;
mod validate;
mod writer;

pub use codes::{
    is_zero_amount_code, known_transaction_code, AccountKind, Direction, SecCode, ServiceClass,
    TransactionCode, KNOWN_SEC_CODES,
};
pub use entry::{
    is_bank_name, AccountNumber, BatchKey, Cut, Entry, MAX_AMOUNT_CENTS, MAX_BANK_NAME,
    MAX_ENTRY_ID, SAME_DAY_LIMIT_CENTS,
};
pub use field::{
    excerpt, is_nacha_byte, is_nacha_text, mask_account, shown, FieldError, EXCERPT_BYTES,
};
pub use routing::{check_digit, RoutingNumber};
pub use validate::{validate, Finding, Report};
pub use writer::{
    write_file, BankProfile, FileOptions, FileSummary, Grouping, LineEnding, NachaWriter, Totals,
    TraceNumber, WriteError, Written, MAX_BATCH_RECORDS, MAX_FILE_LINES, MAX_TOTAL_CENTS,
    MAX_TRACE_SEQUENCE,
};
