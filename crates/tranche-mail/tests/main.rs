//! tranche-mail's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod outbox;
mod smtp;
mod smtp_faults;
mod smtp_server;
mod smtp_tls;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
