//! tranche-workflow-expr's integration tests, one module per file, linked as one test
//! binary.

mod scripts;
mod steps;

tranche_test_support::every_test_file_is_a_module!(include_str!("main.rs"));
