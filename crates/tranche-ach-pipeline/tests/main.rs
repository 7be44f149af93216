//! tranche-ach-pipeline's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod cancellations;
mod day;
mod ledger_faults;
mod modifiers;
mod support;
mod uploads;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
