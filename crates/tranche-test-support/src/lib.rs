//! Fixtures the workspace's tests share, as a dev-dependency only.
//!
//! Tests start real tools (redis-server, s3s-fs, an SMTP server, Chromium, a tmpfs,
//! PostgreSQL, OpenSSH's sshd);
//! whether a missing one fails or skips a test is decided in one place,
//! [`tools_required`].

#![deny(missing_docs)]

pub mod ach_rules;
mod fault_script;
pub mod nacha;
mod postgres;
pub mod raw_http;
mod servers;
mod sshd;

pub use fault_script::FaultScript;
pub use postgres::Postgres;
pub use servers::{
    assert_script_passed, free_port, redis, redis_available, wait_listening, Server,
};
pub use sshd::Sshd;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether a missing tool fails the test instead of skipping it: under `.ci/run`
/// (which exports `TRANCHE_REQUIRE_TOOLS=1`) or any CI that sets `CI`.
pub fn tools_required() -> bool {
    std::env::var("TRANCHE_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
        || std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// Say a tool is missing: a failure when [`tools_required`], else a skip message.
pub fn missing_tool(what: &str) {
    assert!(!tools_required(), "missing: {what}");
    eprintln!("SKIPPED: missing {what}");
}

/// What a check in [`eventually`] gives: `true`, `Some(value)` or `Ok(value)` once
/// reached; an `Err` says what was seen instead, and the last one is in the failure.
pub trait Reached {
    /// What [`eventually`] returns once reached.
    type Value;
    /// The value once reached, else what was seen (if the check says).
    fn reached(self) -> Result<Self::Value, Option<String>>;
}

impl Reached for bool {
    type Value = ();
    fn reached(self) -> Result<(), Option<String>> {
        if self {
            Ok(())
        } else {
            Err(None)
        }
    }
}

impl<T> Reached for Option<T> {
    type Value = T;
    fn reached(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Reached for Result<T, String> {
    type Value = T;
    fn reached(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// The one deadline every wait of the tests keeps: fails naming `what`, and what was
/// seen last, once `within` has passed.
struct Patience<'a> {
    what: &'a str,
    within: Duration,
    deadline: Instant,
}

impl<'a> Patience<'a> {
    fn new(what: &'a str, within: Duration) -> Self {
        Patience {
            what,
            within,
            deadline: Instant::now() + within,
        }
    }

    fn past(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// What one try gave: its value once reached; else `None`, or the failure once
    /// the deadline has passed.
    fn judge<R: Reached>(&self, tried: R) -> Option<R::Value> {
        match tried.reached() {
            Ok(value) => Some(value),
            Err(seen) => {
                self.not_yet(seen);
                None
            }
        }
    }

    fn not_yet(&self, seen: Option<String>) {
        if self.past() {
            let seen = seen
                .map(|s| format!("\nseen last: {s}"))
                .unwrap_or_default();
            panic!("not reached in {:?}: {}{seen}", self.within, self.what);
        }
    }
}

/// Tries `check` until it is reached (`true`, `Some` or `Ok`) and returns what it gave;
/// fails naming `what` if that does not happen within `within`. How a test (or a thread
/// of one) waits for an outcome it can only observe — never a bare sleep. Blocks the
/// thread between tries: in async code use [`poll_until`] or [`poll_until_async`].
pub fn eventually<R: Reached>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> R,
) -> R::Value {
    let patience = Patience::new(what, within);
    loop {
        if let Some(value) = patience.judge(check()) {
            return value;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// As [`eventually`], in async code: tried every millisecond, the runtime free between
/// tries.
pub async fn poll_until<R: Reached>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> R,
) -> R::Value {
    let patience = Patience::new(what, within);
    loop {
        if let Some(value) = patience.judge(check()) {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// As [`poll_until`], for a check that must await (a backend read, an HTTP call):
/// tried every 10 ms.
pub async fn poll_until_async<R: Reached>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> R,
) -> R::Value {
    let patience = Patience::new(what, within);
    loop {
        if let Some(value) = patience.judge(check().await) {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether `child` exits within `within`: its status, or `None` (it still runs; the
/// caller says what it was doing, e.g. with what it printed).
pub fn exit_within(
    child: &mut std::process::Child,
    within: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("child's status") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` to exit (it was asked to stop), within `within`; kills it and
/// fails naming `what` if it does not.
pub fn exited(
    child: &mut std::process::Child,
    what: &str,
    within: Duration,
) -> std::process::ExitStatus {
    exit_within(child, within).unwrap_or_else(|| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("not reached in {within:?}: {what}")
    })
}

/// The name libtest runs a test by, given the `module_path!()` of the module that
/// defines it: that path without its first segment (the test binary's crate). A test that
/// runs its own binary again as a child (`--exact NAME --ignored`) needs the full name,
/// which changes when the file becomes a module of a crate's one test binary.
///
/// ```
/// let name = tranche_test_support::libtest_name("integration::crash", "crash_child");
/// assert_eq!(name, "crash::crash_child");
/// assert_eq!(tranche_test_support::libtest_name("signing", "t"), "t");
/// ```
pub fn libtest_name(module_path: &str, test: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    }
}

/// Fail unless every Rust file in a crate's `tests/` (and every folder there with a
/// `mod.rs`) is declared as a module in `main`, the text of `tests/main.rs`: with one
/// test binary per crate (`autotests = false`), a file nobody declares is never built or
/// run, and nothing else would say so.
pub fn assert_every_test_file_is_a_module(tests: &Path, main: &str) {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(tests).expect("read the tests folder") {
        let path = entry.expect("a tests folder entry").path();
        let name = match path.file_name().and_then(|n| n.to_str()) {
            Some(n) => n.to_string(),
            None => continue,
        };
        let module = if path.is_dir() && path.join("mod.rs").is_file() {
            name
        } else if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "main") {
            stem.to_string()
        } else {
            continue;
        };
        if !main.lines().any(|l| l.trim() == format!("mod {module};")) {
            missing.push(module);
        }
    }
    assert!(
        missing.is_empty(),
        "{}/main.rs does not declare {missing:?}: add `mod NAME;` for each, or they never run",
        tests.display()
    );
}

/// The test each crate's `tests/main.rs` runs: [`assert_every_test_file_is_a_module`]
/// on its own folder, given its own text (`include_str!("main.rs")`, which must be
/// written there to name that file).
#[macro_export]
macro_rules! every_test_file_is_a_module {
    ($main:expr) => {
        #[test]
        fn every_test_file_is_a_module() {
            let tests = ::std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
            $crate::assert_every_test_file_is_a_module(&tests, $main);
        }
    };
}

/// A tmpfs of a fixed size, a real filesystem that fills up; unmounted when dropped.
/// Mounting needs root: without it, `None` (the test is skipped, saying why) — or a
/// failure when [`tools_required`].
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mount a tmpfs of `size` (as `mount -o size=` reads it: `"8m"`, `"256k"`) on a
    /// fresh temporary directory.
    pub fn mount(size: &str) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match mounted {
            Ok(o) if o.status.success() => Some(SmallDisk { dir }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                assert!(
                    !tools_required(),
                    "cannot mount a small tmpfs (root is needed): {why}"
                );
                eprintln!("SKIPPED: cannot mount a small tmpfs (root is needed): {why}");
                None
            }
        }
    }

    /// Where the disk is mounted: files created under it fill it.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fill the disk with the file `name` but for `leave` bytes; deleting it frees them.
    pub fn fill_but(&self, name: &str, leave: u64) -> PathBuf {
        let path = self.path().join(name);
        fill_but(&path, leave);
        path
    }
}

/// Write a secret file (tokens, a password) readable by its owner only, as Tranche
/// requires of them.
pub fn write_secret(path: &Path, text: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    f.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Fill the disk holding `path` with that file, but for `leave` bytes.
pub fn fill_but(path: &Path, leave: u64) {
    let mut f = std::fs::File::create(path).expect("a filler file");
    let chunk = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    f.set_len(written.saturating_sub(leave))
        .expect("shrink the filler");
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
