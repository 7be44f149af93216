//! Conductor's own Python SDK (`conductor-python` 2.0.0, unchanged) against a real
//! `tranche server`'s `/api`: its metadata, workflow and task clients and its
//! `TaskHandler` workers run `conductor_sdk_check.py` (definitions registered, 20
//! workflows with a sub-workflow, a fork and join, a switch and a wait run to their
//! exact outputs, search, terminate, remove, pause and resume, a failing worker and a
//! retry, a restart, an idempotent start, polls, updates, queue sizes and task logs).
//!
//! Needs a Python with the SDK installed: `TRANCHE_CONDUCTOR_PYTHON` names it (`.ci/run`
//! makes a virtualenv from `.ci/conductor-sdk-requirements.txt`).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Python that has the SDK, or None (the test then skips, unless tools are
/// required).
fn python() -> Option<PathBuf> {
    let python = std::env::var_os("TRANCHE_CONDUCTOR_PYTHON").map(PathBuf::from);
    let ok = python.as_ref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", "import conductor.client"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !ok {
        tranche_test_support::missing_tool(
            "a Python with conductor-python 2.0.0 (TRANCHE_CONDUCTOR_PYTHON; see .ci/run)",
        );
        return None;
    }
    python
}

#[test]
fn conductors_python_sdk_runs_unchanged_against_the_api() {
    let Some(python) = python() else { return };
    let data = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_tranche"))
        .arg("--data")
        .arg(data.path())
        .args(["server", "--listen", "127.0.0.1:0"])
        .env_remove("TRANCHE_TOKENS")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start tranche server");
    let (base, _) = support::server_address(&mut server);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conductor_sdk_check.py");
    // The check stops the SDK's worker processes itself (and after its own 150 s
    // watchdog at the latest).
    let mut check = Command::new(python)
        .arg(script)
        .arg(format!("{base}/api"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the SDK check");
    let status = tranche_test_support::exit_within(&mut check, Duration::from_secs(180));
    if status.is_none() {
        let _ = check.kill();
    }
    let output = check.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match status {
        Some(s) if s.success() => assert!(said.contains("0 failed"), "{said}"),
        Some(s) => panic!("the SDK check failed ({s}):\n{said}"),
        None => panic!("the SDK check did not finish in 180 s:\n{said}"),
    }
}
