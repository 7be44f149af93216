//! tranche's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod ach;
mod ach_engine;
mod ach_fleet;
mod ach_intake;
mod architecture;
mod broker_restart;
mod cli;
mod conductor_sdk;
mod feed;
mod feed_emulate;
mod feed_metrics;
mod fleet;
mod limits_fleet;
mod notes_disk_full;
mod notes_input;
mod notes_rerun;
mod notes_run;
mod prune;
mod python_sdk;
mod schedules;
mod server;
mod server_redis;
mod support;
mod traces;
mod workflows;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
