//! A real `redis-server` for tests: on a free loopback port, data in a temporary
//! directory, shut down by a watchdog when the test process exits (daemonised servers
//! outlive their parent otherwise).

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tranche_test_support::tools_required;

/// False (after printing why) when redis-server is not installed and this is not CI;
/// under CI a missing server fails the test.
pub fn available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            !tools_required(),
            "redis-server is not installed (apt-get install -y redis-server), and TRANCHE_REQUIRE_TOOLS=1 or CI is set"
        );
        eprintln!("SKIPPED: redis-server is not installed");
    }
    found
}

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    appendonly: bool,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Server {
    /// Start a server in `dir` (kept by the caller) on a free port.
    pub fn start(dir: &Path, appendonly: bool) -> Server {
        let server = Server {
            port: free_port(),
            dir: dir.to_path_buf(),
            appendonly,
        };
        server.launch();
        watchdog(server.port);
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// (Re)start on the same port and directory, and wait until it answers.
    pub fn launch(&self) {
        let dir = self.dir.display().to_string();
        let status = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--dir", &dir, "--save", ""])
            .args(["--appendonly", if self.appendonly { "yes" } else { "no" }])
            .args(["--daemonize", "yes", "--pidfile", &format!("{dir}/pid")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .expect("run redis-server");
        assert!(status.success(), "redis-server failed to start: {status}");
        tranche_test_support::eventually("redis-server answers", Duration::from_secs(10), || {
            self.ping()
        });
    }

    pub fn ping(&self) -> bool {
        Command::new("redis-cli")
            .args(["-p", &self.port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| o.status.success() && o.stdout.starts_with(b"PONG"))
    }

    /// SIGKILL the server, as a crash would, and wait until it is gone.
    pub fn kill(&self) {
        let pid = std::fs::read_to_string(self.dir.join("pid")).expect("redis pid file");
        let pid = pid.trim().to_string();
        let _ = Command::new("kill").args(["-9", &pid]).status();
        tranche_test_support::eventually(
            &format!("redis-server {pid} gone after SIGKILL"),
            Duration::from_secs(10),
            || {
                !Command::new("kill")
                    .args(["-0", &pid])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            },
        );
        let _ = std::fs::remove_file(self.dir.join("pid"));
    }
}

/// Shuts the server on `port` down once this process has exited.
fn watchdog(port: u16) {
    let script = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; redis-cli -p {port} shutdown nosave",
        std::process::id()
    );
    let _ = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// A prefix no other backend of this server uses: each backend starts empty.
pub fn fresh_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{{t{}-{}}}:",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
