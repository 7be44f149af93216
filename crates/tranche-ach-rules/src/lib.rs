//! ACH rules: the banks (ODFIs) a payments company sends files to, when, and how;
//! read from `ach.toml` and checked whole before anything runs. Built on the format
//! layer `tranche-ach`; the packaging pipeline reads these rules, the delivery crate
//! carries the files.
//!
//! - [`Rules`]: engine settings ([`EngineSettings`]: tick, claim lifetime) and banks
//!   ([`BankRules`]: the file header [`tranche_ach::BankProfile`], time zone, entries
//!   per file, upload pacing, batch grouping, [`Delivery`], and [`Window`]s).
//!   [`Rules::parse`] / [`Rules::load`] read them; [`Rules::due`] says which windows
//!   are packaging or submitting at an instant.
//! - [`Window`]: a submission window. Its time math ([`Window::packaging_from`],
//!   [`Window::begins`], [`Window::ends`]) reads wall-clock times in the bank's zone
//!   with one daylight-saving rule (a time in a gap is the gap's end, a repeated time
//!   its first occurrence; see [`resolve`]).
//! - [`EXAMPLE`]: the shipped, commented ach.toml ([`example_for`]: the same for other
//!   bank names).
//! - [`generate`]: a deterministic, streaming generator of a realistic day of entries,
//!   and the import CSV and ach.toml for it.
//!
//! # Why windows have a packaging phase
//!
//! A window has two phases: packaging, from `lead` before `submission_begin` until
//! `submission_end`; and submission, from `submission_begin` until `submission_end`
//! (the bank's cut-off). Entries accrue in the ledger until packaging starts, so a
//! window's files are few and full (a payroll of 30,000 entries is one file, not 300
//! files of whatever had arrived each tick), and they are ready when the window
//! opens instead of being built against the cut-off. Packaging goes on through the
//! submission phase so late entries still make the window. Two windows of one kind
//! (same-day or next-day) of a bank may not be packaging at once: an entry must have
//! exactly one window to go in.
//!
//! # Why validation lists every problem
//!
//! An ach.toml is edited by hand, rarely, often under pressure (a bank moved its
//! cut-off). Fix-one-rerun-find-the-next is slow and each round risks a night, so
//! the whole file is read and every problem reported at once, each at its line and
//! column with its dotted field (`bank[1].window[0].submission_end`), what was
//! expected, what was written, and a hint when a near spelling exists (unknown keys,
//! `eligible`, `kind`, `grouping`, time zones, durations). TOML is read as a
//! spanned document (`toml_edit`), not through serde, which stops at the first
//! error and places only syntax errors. Checks across values (duplicate names,
//! overlapping windows) run on whatever read well, so they are reported alongside
//! the rest. A [`Rules`] value exists only when there is no problem.

#![deny(missing_docs)]

mod duration;
mod example;
pub mod generate;
mod problem;
mod rules;
mod suggest;
mod toml_shape;
mod validate;
mod window;

pub use duration::{format_duration, parse_duration, parse_time, BadDuration};
pub use example::{example_for, EXAMPLE};
pub use problem::{Problem, RulesError};
pub use rules::{BankRules, Delivery, EngineSettings, Rules};
pub use window::{resolve, Due, Eligible, Window};
