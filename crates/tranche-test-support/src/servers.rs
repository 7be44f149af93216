//! Real servers started by tests on free loopback ports, killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A free TCP port on loopback (free when asked: bind it soon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait until something accepts TCP connections on `port`.
pub fn wait_listening(port: u16, what: &str) {
    crate::eventually(&format!("{what} listens"), Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// A child process killed (SIGKILL) when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A redis-server in the foreground on a free port, data in `dir`, nothing persisted.
pub fn redis(dir: &Path) -> (Server, u16) {
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .arg("--dir")
        .arg(dir)
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    wait_listening(port, "redis-server");
    (Server(child), port)
}

/// Whether `redis-server` can be run here.
pub fn redis_available() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Assert that a test script (a browser test run by node) exited 0 and printed `ok`;
/// its output is shown when it did not.
pub fn assert_script_passed(out: &std::process::Output, what: &str, ok: &str) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(ok), "{what}: expected {ok:?} in\n{stdout}");
}
