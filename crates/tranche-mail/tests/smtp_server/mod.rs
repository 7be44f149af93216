//! A real SMTP server for the tests: aiosmtpd on a free loopback port, writing each
//! message it accepts to `maildir/new/` with the envelope in `X-MailFrom` /
//! `X-RcptTo` and the client's address in `X-Peer`. Stopped (by its PID) on drop.

#![allow(dead_code)] // each test file uses a part

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mail_parser::MessageParser;

pub struct Aiosmtpd {
    child: Child,
    pub port: u16,
    pub maildir: PathBuf,
    dir: tempfile::TempDir,
}

/// The scripts beside this file (fault handlers, the TLS server).
pub fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp_server")
}

/// Whether python3 with aiosmtpd is here. Missing is a failure under CI (or
/// TRANCHE_REQUIRE_TOOLS=1), a skip with a reason otherwise.
pub fn available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import aiosmtpd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let required = std::env::var_os("CI").is_some_and(|v| !v.is_empty())
            || std::env::var("TRANCHE_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "python3 with aiosmtpd is required (pip install aiosmtpd)"
        );
        eprintln!("SKIPPED: python3 with aiosmtpd is not installed (pip install aiosmtpd)");
    }
    ok
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Aiosmtpd {
    /// The stock server with its Mailbox handler.
    pub fn start() -> Option<Aiosmtpd> {
        Self::with_handler("aiosmtpd.handlers.Mailbox", &[])
    }

    /// The stock server with `handler` (a class path; `faults.*` from this folder),
    /// given `args` and then the maildir.
    pub fn with_handler(handler: &str, args: &[&str]) -> Option<Aiosmtpd> {
        Self::launch(|port, maildir| {
            let mut cmd = Command::new("python3");
            cmd.env("PYTHONPATH", scripts())
                .args([
                    "-m",
                    "aiosmtpd",
                    "-n",
                    "-l",
                    &format!("127.0.0.1:{port}"),
                    "-c",
                    handler,
                ])
                .args(args)
                .arg(maildir);
            cmd
        })
    }

    /// `tls_auth_server.py` in `mode` (`starttls` | `implicit`), accepting `user` /
    /// `password` (handed over in its environment, never its arguments).
    pub fn with_tls(
        mode: &str,
        cert: &Path,
        key: &Path,
        user: &str,
        password: &str,
    ) -> Option<Aiosmtpd> {
        Self::launch(|port, maildir| {
            let mut cmd = Command::new("python3");
            cmd.arg(scripts().join("tls_auth_server.py"))
                .arg(port.to_string())
                .arg(maildir)
                .args([cert, key])
                .arg(mode)
                .env("TEST_SMTP_USER", user)
                .env("TEST_SMTP_PASSWORD", password);
            cmd
        })
    }

    fn launch(command: impl Fn(u16, &Path) -> Command) -> Option<Aiosmtpd> {
        if !available() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let maildir = dir.path().join("maildir");
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(maildir.join(sub)).unwrap();
        }
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = command(port, &maildir)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("python3 starts");
        let mut server = Aiosmtpd {
            child,
            port,
            maildir,
            dir,
        };
        server.wait_listening();
        Some(server)
    }

    fn wait_listening(&mut self) {
        let addr: SocketAddr = ([127, 0, 0, 1], self.port).into();
        tranche_test_support::eventually(
            "the SMTP server listens",
            Duration::from_secs(20),
            || {
                if let Some(status) = self.child.try_wait().unwrap() {
                    panic!("the SMTP server exited ({status}): {}", self.log());
                }
                TcpStream::connect_timeout(&addr, Duration::from_millis(200))
                    .map(drop)
                    .map_err(|_| self.log())
            },
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message delivered so far.
    pub fn messages(&self) -> Vec<Vec<u8>> {
        let mut files: Vec<_> = std::fs::read_dir(self.maildir.join("new"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read(p).unwrap()).collect()
    }

    /// The delivered message with this Message-ID; panics if it arrived twice.
    pub fn read_back(&self, message_id: &str) -> Option<Vec<u8>> {
        let mut found: Vec<Vec<u8>> = self
            .messages()
            .into_iter()
            .filter(|m| header(m, "Message-ID").as_deref() == Some(&format!("<{message_id}>")))
            .collect();
        assert!(
            found.len() <= 1,
            "{message_id} arrived {} times",
            found.len()
        );
        found.pop()
    }
}

/// A header's raw value, trimmed (e.g. `X-RcptTo`, `X-Peer`).
pub fn header(message: &[u8], name: &str) -> Option<String> {
    let parsed = MessageParser::default().parse(message)?;
    parsed.header_raw(name).map(|v| v.trim().to_string())
}

impl Drop for Aiosmtpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
