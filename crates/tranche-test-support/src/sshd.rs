//! A real OpenSSH server for a test: its own config, host key, client key and
//! known_hosts in a temporary directory, on a free loopback port, serving SFTP to the
//! user the tests run as; stopped (with its sessions) and removed when dropped.

use std::fs::File;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

/// A running `sshd` accepting one client key (password logins off) for [`user`]
/// (whoever runs the tests, root included), with `internal-sftp` as its SFTP
/// subsystem. Files an SFTP client writes land on this machine, so a test reads them
/// back from disk.
///
/// [`user`]: Sshd::user
#[derive(Debug)]
pub struct Sshd {
    /// Config, keys, known_hosts, log and the remote directories; removed when dropped.
    dir: tempfile::TempDir,
    port: u16,
    user: String,
    /// The listening server; `None` after [`kill`](Sshd::kill).
    child: Mutex<Option<Child>>,
    remote_dirs: AtomicU32,
}

impl Sshd {
    /// Start a server. `None` when OpenSSH's server is not installed (the test is
    /// skipped, saying why), or a failure when [`tools_required`](crate::tools_required).
    pub fn start() -> Option<Sshd> {
        if !Path::new(SSHD).is_file() {
            crate::missing_tool("OpenSSH server (/usr/sbin/sshd: apt-get install openssh-server)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("tranche-sshd-")
            .tempdir()
            .expect("a temporary directory");
        let d = dir.path();
        keygen(&d.join("host_key"), "tranche-test-host");
        keygen(&d.join("client_key"), "tranche-test-client");
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))
            .expect("write authorized_keys");
        let port = free_port();
        let host_key = std::fs::read_to_string(d.join("host_key.pub")).expect("the host key");
        std::fs::write(
            d.join("known_hosts"),
            format!("[127.0.0.1]:{port} {}", host_key.trim_end()) + "\n",
        )
        .expect("write known_hosts");
        // StrictModes no: the temporary directory's owner and modes are whatever the
        // test's umask made them. UsePAM no: no PAM stack needed (and none that would
        // refuse a container's root). prohibit-password: CI runs as root.
        let config = format!(
            "Port {port}\n\
             ListenAddress 127.0.0.1\n\
             HostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\n\
             StrictModes no\n\
             UsePAM no\n\
             PidFile {d}/sshd.pid\n\
             Subsystem sftp internal-sftp\n\
             LogLevel VERBOSE\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), config).expect("write sshd_config");
        if is_root() {
            // sshd started as root separates privileges into this directory and will
            // not start without it; a fresh container has no /run/sshd.
            std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
        }
        let sshd = Sshd {
            dir,
            port,
            user: whoami(),
            child: Mutex::new(None),
            remote_dirs: AtomicU32::new(0),
        };
        sshd.spawn();
        Some(sshd)
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The user to log in as: whoever runs the tests.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The private key the server accepts (ed25519, no passphrase, mode 0600).
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client_key")
    }

    /// A known_hosts file holding the server's host key as
    /// `[127.0.0.1]:PORT ssh-ed25519 …`.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// The server's public host key file (`ssh-ed25519 AAAA… comment`).
    pub fn host_public_key(&self) -> PathBuf {
        self.dir.path().join("host_key.pub")
    }

    /// The host key's SHA-256 fingerprint as OpenSSH prints it (`SHA256:…`).
    pub fn host_key_fingerprint(&self) -> String {
        fingerprint(&self.host_public_key())
    }

    /// Make another ed25519 key pair (no passphrase) in the server's directory, one the
    /// server does not accept: a wrong client key, or a stranger's host key for a
    /// known_hosts. Returns the private key's path; the public key is beside it, `.pub`.
    pub fn new_key(&self, name: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        keygen(&path, name);
        path
    }

    /// Accept one more client key: append the public key file `public_key` (a `.pub`)
    /// to the server's authorized_keys (read at each login, so no restart).
    pub fn authorize(&self, public_key: &Path) {
        let key = std::fs::read_to_string(public_key)
            .unwrap_or_else(|e| panic!("reading {}: {e}", public_key.display()));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("authorized_keys"))
            .expect("open authorized_keys");
        std::io::Write::write_all(&mut file, format!("{}\n", key.trim_end()).as_bytes())
            .expect("append to authorized_keys");
    }

    /// A fresh empty directory the user can write, for one test's files (an absolute
    /// path, the same on the server and for the test, which reads files back from it).
    pub fn remote_dir(&self) -> PathBuf {
        let n = self.remote_dirs.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.path().join(format!("remote-{n}"));
        std::fs::create_dir(&path).expect("create a remote directory");
        path
    }

    /// What the server logged (`sshd -e`): for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// Stop the server at once (SIGKILL), with every session it serves, as a crash
    /// would: clients see their connections drop. [`restart`](Self::restart) brings it
    /// back on the same port with the same keys.
    pub fn kill(&self) {
        let Some(mut child) = self.child.lock().unwrap().take() else {
            return;
        };
        // Freeze the listener, then every session below it, before killing any: a
        // stopped process forks nothing, so the tree read here is complete. (Killed one
        // by one, a session could die first and its client reconnect to the listener
        // before that died too.)
        let listener = child.id();
        signal("STOP", &[listener]);
        let mut frozen = vec![listener];
        loop {
            let new: Vec<u32> = descendants(listener)
                .into_iter()
                .filter(|p| !frozen.contains(p))
                .collect();
            if new.is_empty() {
                break;
            }
            signal("STOP", &new);
            frozen.extend(new);
        }
        signal("KILL", &frozen);
        let _ = child.wait();
    }

    /// Start the server again after [`kill`](Self::kill): same port, same keys.
    pub fn restart(&self) {
        self.kill();
        self.spawn();
    }

    fn spawn(&self) {
        let d = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("sshd.log"))
            .expect("open sshd.log");
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(d.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {SSHD}: {e}"));
        *self.child.lock().unwrap() = Some(child);
        self.wait_ready(Duration::from_secs(20));
    }

    /// Wait until the port answers with an SSH banner (not a bare sleep: sshd listens
    /// within milliseconds, but a loaded machine may take longer).
    fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("sshd exited ({status}) before listening:\n{}", self.log());
            }
            if banner(self.port).is_some_and(|b| b.starts_with("SSH-2.0-")) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not answer on 127.0.0.1:{} within {within:?}:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The first bytes the server sends on a new connection, if it accepts one.
fn banner(port: u16) -> Option<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Send `SIGname` to `pids` with kill(1) (the crate has no unsafe code, so no libc).
fn signal(name: &str, pids: &[u32]) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .stderr(Stdio::null())
        .status();
}

/// `ssh-keygen -t ed25519 -N ''`: `path` (mode 0600) and `path.pub`.
fn keygen(path: &Path, comment: &str) {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .output()
        .expect("run ssh-keygen (openssh-client)");
    assert!(
        out.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A public key file's SHA-256 fingerprint, from `ssh-keygen -l`.
fn fingerprint(public_key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .args(["-l", "-E", "sha256", "-f"])
        .arg(public_key)
        .output()
        .expect("run ssh-keygen -l");
    assert!(
        out.status.success(),
        "ssh-keygen -l: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "256 SHA256:abc… comment (ED25519)"
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .expect("a fingerprint")
        .to_string()
}

/// Every process below `pid`, read from /proc (sshd forks one per session, and those
/// fork again to drop privileges).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let mut stat = String::new();
            if File::open(entry.path().join("stat"))
                .and_then(|mut f| f.read_to_string(&mut stat))
                .is_err()
            {
                continue;
            }
            // "pid (comm) state ppid …": comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse().ok());
            if let Some(ppid) = ppid {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = vec![];
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parents {
            if parent == p && !found.contains(&child) {
                found.push(child);
                frontier.push(child);
            }
        }
    }
    found
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
