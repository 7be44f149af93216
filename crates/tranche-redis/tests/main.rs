//! tranche-redis's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod conformance;
mod reconnect;
mod record_format;
mod redis_specific;
mod restart;
mod server;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
