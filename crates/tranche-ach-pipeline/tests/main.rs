//! tranche-ach-pipeline's integration tests, one module per file, linked as one test binary
//! (a binary per file linked the crate's whole dependency graph once per file).

mod cancellations;
mod day;
mod support;
mod uploads;

#[test]
fn every_test_file_is_a_module() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    tranche_test_support::assert_every_test_file_is_a_module(&tests, include_str!("main.rs"));
}
