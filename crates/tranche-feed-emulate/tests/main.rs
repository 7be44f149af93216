//! tranche-feed-emulate's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod checker;
mod loopback;
mod store;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
