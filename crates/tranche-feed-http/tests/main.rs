//! tranche-feed-http's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod dashboard;
mod door;
mod group_commit;
mod http;
mod metrics;
mod shards;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
