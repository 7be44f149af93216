//! Files delivered to a bank's SFTP server, over SSH with a private-key file, the
//! server's host key checked against a known_hosts file.

use std::future::Future;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use russh::client;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::client::SftpSession;
use russh_sftp::protocol::{FileAttributes, OpenFlags, StatusCode};
use tokio::io::AsyncWriteExt;
use tranche_types::one_line;

use crate::error::is_connection_kind;
use crate::protocol::{self, Store};
use crate::{hostkey, name, Delivery, DeliveryError, HostKeyProblem, HostKeyRefusal};

/// Where and how to reach a bank's SFTP server. No secret in it: the key is a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SftpTarget {
    /// Host name or IP address.
    pub host: String,
    /// Usually 22.
    pub port: u16,
    /// The user to log in as.
    pub user: String,
    /// An OpenSSH private key (ed25519 or ECDSA, no passphrase), readable by its owner
    /// only.
    pub key_file: PathBuf,
    /// The known_hosts file holding the server's host key (`host` or `[host]:port`
    /// lines, as `ssh-keyscan` prints them). An unknown key is refused, never learnt.
    pub known_hosts: PathBuf,
    /// The directory files go into: absolute, or relative to the login directory; it
    /// must exist.
    pub remote_dir: String,
}

/// How long to wait for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// To connect, check the host key, log in and start SFTP.
    pub connect: Duration,
    /// For each SFTP request (an open, a write of one chunk, a rename).
    pub request: Duration,
}

impl Default for Timeouts {
    /// 30 s to connect, 60 s per request: generous for a bank's server at night.
    fn default() -> Timeouts {
        Timeouts {
            connect: Duration::from_secs(30),
            request: Duration::from_secs(60),
        }
    }
}

/// SFTP over SSH to a bank's server. One SSH connection, shared by concurrent
/// deliveries, opened by [`connect`](Sftp::connect) (so a wrong host key, key or
/// directory shows at once) and opened again on the next call when it drops. A call
/// that finds its reused connection dead reconnects and tries once more, which is safe:
/// delivering is idempotent.
pub struct Sftp {
    target: SftpTarget,
    /// Read once: the file may become unreadable to a process that dropped privileges.
    key: Arc<PrivateKey>,
    timeouts: Timeouts,
    location: String,
    /// The live connection; the lock is held while connecting, so concurrent callers
    /// wait for one connection instead of opening one each.
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
}

// The key stays out of logs.
impl std::fmt::Debug for Sftp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sftp")
            .field("location", &self.location)
            .field("key_file", &self.target.key_file)
            .finish_non_exhaustive()
    }
}

impl Sftp {
    /// Load the key, connect, check the host key, log in and check that the remote
    /// directory exists, with [`Timeouts::default`].
    pub async fn connect(target: SftpTarget) -> Result<Sftp, DeliveryError> {
        Sftp::connect_with(target, Timeouts::default()).await
    }

    /// [`connect`](Sftp::connect) with other timeouts.
    pub async fn connect_with(
        target: SftpTarget,
        timeouts: Timeouts,
    ) -> Result<Sftp, DeliveryError> {
        let key = load_key(&target.key_file).await?;
        let sftp = Sftp {
            location: location(&target),
            target,
            key,
            timeouts,
            conn: tokio::sync::Mutex::new(None),
        };
        sftp.connection().await?;
        Ok(sftp)
    }

    /// Close the connection politely (the next call opens a new one).
    pub async fn close(&self) {
        if let Some(conn) = self.conn.lock().await.take() {
            let _ = conn.sftp.close().await;
            let _ = conn
                .ssh
                .disconnect(russh::Disconnect::ByApplication, "", "en")
                .await;
        }
    }

    /// The live connection, opened if there is none or it closed; and whether it was
    /// opened by this call.
    async fn connection(&self) -> Result<(Arc<Conn>, bool), DeliveryError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref().filter(|c| !c.ssh.is_closed()) {
            return Ok((conn.clone(), false));
        }
        *slot = None;
        let conn = match tokio::time::timeout(self.timeouts.connect, self.open()).await {
            Ok(conn) => Arc::new(conn?),
            Err(_) => {
                return Err(DeliveryError::Connection {
                    location: self.location.clone(),
                    doing: self.connecting(),
                    source: Box::new(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no SFTP session within {:?}", self.timeouts.connect),
                    )),
                })
            }
        };
        *slot = Some(conn.clone());
        Ok((conn, true))
    }

    /// Drop `conn` if it is still the live one (another task may have replaced it).
    async fn forget(&self, conn: &Arc<Conn>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
            *slot = None;
        }
    }

    /// Run `op` on the connection; when a reused connection turns out dead, once more
    /// on a new one.
    async fn run<T, F, Fut>(&self, purpose: &str, op: F) -> Result<T, DeliveryError>
    where
        F: Fn(Arc<Conn>) -> Fut,
        Fut: Future<Output = Result<T, DeliveryError>>,
    {
        let mut retried = false;
        loop {
            let (conn, fresh) = self.connection().await.map_err(|e| match e {
                // Say which file could not go, not only which server was unreachable.
                DeliveryError::Connection {
                    location,
                    doing,
                    source,
                } => DeliveryError::Connection {
                    location,
                    doing: format!("{doing} ({purpose})"),
                    source,
                },
                e => e,
            })?;
            match op(conn.clone()).await {
                Err(e @ DeliveryError::Connection { .. }) => {
                    self.forget(&conn).await;
                    if fresh || retried {
                        return Err(e);
                    }
                    tracing::info!(
                        location = %self.location,
                        error = %one_line(&e),
                        "the SFTP connection had dropped; reconnecting"
                    );
                    retried = true;
                }
                other => return other,
            }
        }
    }

    fn connecting(&self) -> String {
        format!("connecting to {}:{}", self.target.host, self.target.port)
    }

    /// Connect, check the host key, log in, start SFTP, check the directory.
    async fn open(&self) -> Result<Conn, DeliveryError> {
        let t = &self.target;
        let known_hosts = tokio::fs::read_to_string(&t.known_hosts)
            .await
            .map_err(|source| DeliveryError::KnownHosts {
                path: t.known_hosts.clone(),
                source,
            })?;
        let host = hostkey::lookup_name(&t.host, t.port);
        let mut preferred = russh::Preferred::default();
        preferred.key = hostkey::preferred(&known_hosts, &host, &preferred.key).into();
        let config = Arc::new(client::Config {
            preferred,
            // A silent peer (a dead NAT entry, a hung server) is noticed within a minute.
            keepalive_interval: Some(Duration::from_secs(15)),
            keepalive_max: 3,
            nodelay: true,
            ..Default::default()
        });
        let checker = HostKeyCheck {
            known_hosts,
            host: host.clone(),
        };
        let mut ssh = client::connect(config, (t.host.as_str(), t.port), checker)
            .await
            .map_err(|e| match e {
                Handshake::Refused {
                    algorithm,
                    fingerprint,
                    problem,
                } => DeliveryError::HostKeyRefused(Box::new(HostKeyRefusal {
                    location: self.location.clone(),
                    host,
                    algorithm,
                    fingerprint,
                    known_hosts: t.known_hosts.clone(),
                    problem,
                })),
                Handshake::Ssh(e) => self.ssh_error(self.connecting(), e),
            })?;
        let auth = ssh
            .authenticate_publickey(&t.user, PrivateKeyWithHashAlg::new(self.key.clone(), None))
            .await
            .map_err(|e| self.ssh_error(format!("logging in as {}", t.user), e))?;
        if !auth.success() {
            return Err(DeliveryError::AuthRefused {
                location: self.location.clone(),
                user: t.user.clone(),
                key_file: t.key_file.clone(),
            });
        }
        let starting = || "starting the SFTP subsystem".to_string();
        let channel = ssh
            .channel_open_session()
            .await
            .map_err(|e| self.ssh_error(starting(), e))?;
        channel
            .request_subsystem(true, "sftp")
            .await
            .map_err(|e| self.ssh_error(starting(), e))?;
        let sftp = SftpSession::new_with_config(
            channel.into_stream(),
            russh_sftp::client::Config {
                request_timeout_secs: self.timeouts.request.as_secs().max(1),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| sftp_error(&self.location, starting(), e))?;
        let conn = Conn {
            ssh,
            sftp,
            location: self.location.clone(),
            dir: t.remote_dir.trim_end_matches('/').to_string(),
        };
        // A typo in the rules shows at connect, not at the first file of the night.
        let doing = || format!("opening the remote directory {:?}", t.remote_dir);
        let dir = if conn.dir.is_empty() { "." } else { &conn.dir };
        let attrs = conn
            .sftp
            .metadata(dir)
            .await
            .map_err(|e| sftp_error(&self.location, doing(), e))?;
        if !attrs.is_dir() {
            return Err(DeliveryError::Failed {
                location: self.location.clone(),
                doing: doing(),
                transient: false,
                source: "expected a directory, got a file".into(),
            });
        }
        Ok(conn)
    }

    fn ssh_error(&self, doing: String, e: russh::Error) -> DeliveryError {
        use russh::Error as E;
        let location = self.location.clone();
        match e {
            E::IO(_)
            | E::Disconnect
            | E::HUP
            | E::ConnectionTimeout
            | E::KeepaliveTimeout
            | E::InactivityTimeout
            | E::Elapsed(_)
            | E::SendError
            | E::RecvError
            | E::Pending => DeliveryError::Connection {
                location,
                doing,
                source: Box::new(e),
            },
            e => DeliveryError::Failed {
                location,
                doing,
                transient: false,
                source: Box::new(e),
            },
        }
    }
}

#[async_trait]
impl Delivery for Sftp {
    async fn deliver(&self, name: &str, bytes: &[u8]) -> Result<(), DeliveryError> {
        // Before any connection: a bad name never reaches the server.
        name::check(name)?;
        self.run(&format!("delivering {name}"), |conn| async move {
            protocol::deliver(&*conn, name, bytes).await
        })
        .await
    }

    async fn find(&self, name: &str) -> Result<Option<String>, DeliveryError> {
        name::check(name)?;
        self.run(&format!("looking for {name}"), |conn| async move {
            conn.hash(name).await
        })
        .await
    }

    fn location(&self) -> String {
        self.location.clone()
    }
}

/// `sftp://user@host:port/dir`; a relative directory is under `~`, as in the SFTP URI
/// draft. IPv6 addresses in brackets.
fn location(t: &SftpTarget) -> String {
    let host = if t.host.contains(':') {
        format!("[{}]", t.host)
    } else {
        t.host.clone()
    };
    let dir = t.remote_dir.trim_end_matches('/');
    let path = if t.remote_dir.starts_with('/') {
        if dir.is_empty() {
            "/".to_string()
        } else {
            dir.to_string()
        }
    } else if dir.is_empty() || dir == "." {
        "/~".to_string()
    } else {
        format!("/~/{dir}")
    };
    format!("sftp://{}@{host}:{}{path}", t.user, t.port)
}

/// Read the private key, refusing one that others can read (as `ssh` refuses it: the
/// bank would accept payment files from whoever copied it).
async fn load_key(path: &Path) -> Result<Arc<PrivateKey>, DeliveryError> {
    let owned = path.to_path_buf();
    let fail = |problem: &str, source: Option<crate::BoxError>| DeliveryError::KeyFile {
        path: path.to_path_buf(),
        problem: problem.to_string(),
        source,
    };
    let read = tokio::task::spawn_blocking(move || -> io::Result<(u32, String)> {
        let mut f = std::fs::File::open(&owned)?;
        // The mode of the file opened, not of whatever the path names a moment later.
        let mode = f.metadata()?.permissions().mode();
        let mut text = String::new();
        if mode & 0o077 == 0 {
            io::Read::read_to_string(&mut f, &mut text)?;
        }
        Ok((mode, text))
    })
    .await
    .map_err(|e| fail("cannot be read", Some(e.into())))?;
    let (mode, text) = read.map_err(|e| fail("cannot be read", Some(e.into())))?;
    if mode & 0o077 != 0 {
        return Err(fail(
            &format!(
                "expected it readable by its owner only (mode 600), got mode {:o}: \
                 refused, as ssh refuses it",
                mode & 0o777
            ),
            None,
        ));
    }
    let key = russh::keys::decode_secret_key(&text, None);
    // Leave no copy of the key text in freed memory (the decoded key zeroes itself).
    let mut text = text.into_bytes();
    text.fill(0);
    std::hint::black_box(&text);
    let key = key.map_err(|e| {
        fail(
            "expected an OpenSSH private key without a passphrase",
            Some(e.into()),
        )
    })?;
    if key.algorithm().is_rsa() {
        return Err(fail(
            "expected an ed25519 or ECDSA key, got an RSA key, which this build cannot \
             sign with (make one with ssh-keygen -t ed25519)",
            None,
        ));
    }
    Ok(Arc::new(key))
}

/// Checks the server's host key during the handshake.
struct HostKeyCheck {
    known_hosts: String,
    /// The name looked up, `host` or `[host]:port`.
    host: String,
}

/// Why a handshake failed: the library's error, or our refusal of the host key (kept
/// whole, so the caller can say which key was refused).
#[derive(Debug)]
enum Handshake {
    Ssh(russh::Error),
    Refused {
        algorithm: String,
        fingerprint: String,
        problem: HostKeyProblem,
    },
}

impl From<russh::Error> for Handshake {
    fn from(e: russh::Error) -> Handshake {
        Handshake::Ssh(e)
    }
}

impl client::Handler for HostKeyCheck {
    type Error = Handshake;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Handshake> {
        let (algorithm, fingerprint, problem) = match offered {
            PublicKeyOrCertificate::PublicKey { key, .. } => {
                match hostkey::check(&self.known_hosts, &self.host, key) {
                    Ok(()) => return Ok(true),
                    Err(problem) => (
                        key.algorithm().to_string(),
                        key.fingerprint(HashAlg::Sha256).to_string(),
                        problem,
                    ),
                }
            }
            PublicKeyOrCertificate::Certificate(cert) => (
                cert.algorithm().to_string(),
                cert.public_key().fingerprint(HashAlg::Sha256).to_string(),
                HostKeyProblem::Certificate,
            ),
        };
        Err(Handshake::Refused {
            algorithm,
            fingerprint,
            problem,
        })
    }
}

/// One SSH connection with its SFTP session.
struct Conn {
    ssh: client::Handle<HostKeyCheck>,
    sftp: SftpSession,
    location: String,
    /// The remote directory without a trailing `/` (empty: the login directory).
    dir: String,
}

impl Conn {
    fn path(&self, name: &str) -> String {
        if self.dir.is_empty() {
            name.to_string()
        } else {
            format!("{}/{name}", self.dir)
        }
    }

    fn error(&self, doing: String, e: SftpError) -> DeliveryError {
        sftp_error(&self.location, doing, e)
    }

    /// An error from an SFTP file's reads and writes (tokio I/O): the SFTP error
    /// inside when there is one.
    fn io_error(&self, doing: String, e: io::Error) -> DeliveryError {
        if is_connection_kind(e.kind()) {
            return DeliveryError::io(&self.location, doing, e);
        }
        match e.into_inner() {
            Some(inner) => match inner.downcast::<SftpError>() {
                Ok(sftp) => self.error(doing, *sftp),
                // A status the server answered a write with, as words only (a full
                // disk is "Failure"): worth another try.
                Err(other) => DeliveryError::Failed {
                    location: self.location.clone(),
                    doing,
                    transient: true,
                    source: other,
                },
            },
            None => DeliveryError::Failed {
                location: self.location.clone(),
                doing,
                transient: true,
                source: "an I/O error without details".into(),
            },
        }
    }
}

#[async_trait]
impl Store for Conn {
    fn location(&self) -> String {
        self.location.clone()
    }

    async fn hash(&self, name: &str) -> Result<Option<String>, DeliveryError> {
        let doing = || format!("reading {name}");
        let file = match self.sftp.open(self.path(name)).await {
            Ok(f) => f,
            Err(SftpError::Status(s)) if s.status_code == StatusCode::NoSuchFile => {
                return Ok(None)
            }
            Err(e) => return Err(self.error(doing(), e)),
        };
        crate::sha256_hex_of(file)
            .await
            .map(Some)
            .map_err(|e| self.io_error(doing(), e))
    }

    async fn write_temporary(&self, temp: &str, bytes: &[u8]) -> Result<(), DeliveryError> {
        let doing = || format!("writing {temp}");
        // Owner-only on the server too (its umask may only take bits away).
        let attrs = FileAttributes {
            permissions: Some(0o600),
            ..FileAttributes::empty()
        };
        let mut file = self
            .sftp
            .open_with_flags_and_attributes(
                self.path(temp),
                OpenFlags::CREATE | OpenFlags::EXCLUDE | OpenFlags::WRITE,
                attrs,
            )
            .await
            .map_err(|e| self.error(doing(), e))?;
        file.write_all(bytes)
            .await
            .map_err(|e| self.io_error(doing(), e))?;
        // Every write acknowledged...
        file.flush().await.map_err(|e| self.io_error(doing(), e))?;
        // ...on the server's disk (fsync@openssh.com; skipped by servers without it)...
        file.sync_all().await.map_err(|e| self.error(doing(), e))?;
        // ...and all of it: a server that silently cut the file short (a quota) is
        // caught before the file gets its name.
        let size = file
            .metadata()
            .await
            .map_err(|e| self.error(doing(), e))?
            .size;
        if size != Some(bytes.len() as u64) {
            return Err(DeliveryError::Failed {
                location: self.location.clone(),
                doing: doing(),
                transient: true,
                source: format!(
                    "expected {} bytes on the server, got {}",
                    bytes.len(),
                    size.map_or("no size".to_string(), |s| s.to_string())
                )
                .into(),
            });
        }
        file.shutdown().await.map_err(|e| self.io_error(doing(), e))
    }

    async fn publish(&self, temp: &str, name: &str) -> Result<bool, DeliveryError> {
        // SFTP v3's rename fails when the new name exists (OpenSSH links then unlinks,
        // never clobbering); posix-rename@openssh.com would overwrite, so it is not used.
        match self.sftp.rename(self.path(temp), self.path(name)).await {
            Ok(()) => Ok(true),
            // The server says only "Failure": look whether the name is taken.
            Err(e) => match self.sftp.metadata(self.path(name)).await {
                Ok(_) => Ok(false),
                Err(_) => Err(self.error(format!("renaming {temp} to {name}"), e)),
            },
        }
    }

    async fn discard(&self, temp: &str) {
        // Bounded: on a dying connection this would wait for the request timeout.
        let removed = tokio::time::timeout(
            Duration::from_secs(5),
            self.sftp.remove_file(self.path(temp)),
        )
        .await;
        if !matches!(removed, Ok(Ok(()))) {
            tracing::warn!(location = %self.location, temp, "a temporary file was left");
        }
    }
}

/// Classify an SFTP error: the connection, a refusal, or another failure.
fn sftp_error(location: &str, doing: String, e: SftpError) -> DeliveryError {
    let location = location.to_string();
    let (connection, denied, transient) = match &e {
        SftpError::Status(s) => match s.status_code {
            StatusCode::NoConnection | StatusCode::ConnectionLost => (true, false, true),
            StatusCode::PermissionDenied => (false, true, false),
            // OpenSSH answers "Failure" for most errno values, a full disk included.
            StatusCode::Failure => (false, false, true),
            _ => (false, false, false),
        },
        // No answer in time, or the channel closed under the request.
        SftpError::Timeout | SftpError::IO(_) | SftpError::UnexpectedBehavior(_) => {
            (true, false, true)
        }
        SftpError::Limited(_) | SftpError::UnexpectedPacket => (false, false, false),
    };
    let source = Box::new(e);
    if connection {
        DeliveryError::Connection {
            location,
            doing,
            source,
        }
    } else if denied {
        DeliveryError::PermissionDenied {
            location,
            doing,
            source,
        }
    } else {
        DeliveryError::Failed {
            location,
            doing,
            transient,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str, port: u16, dir: &str) -> SftpTarget {
        SftpTarget {
            host: host.into(),
            port,
            user: "acme".into(),
            key_file: "/keys/id".into(),
            known_hosts: "/keys/known_hosts".into(),
            remote_dir: dir.into(),
        }
    }

    #[test]
    fn locations_name_user_host_port_and_directory() {
        assert_eq!(
            location(&target("sftp.bank.example", 22, "/inbound/ach/")),
            "sftp://acme@sftp.bank.example:22/inbound/ach"
        );
        assert_eq!(
            location(&target("10.0.0.7", 2222, "inbound")),
            "sftp://acme@10.0.0.7:2222/~/inbound"
        );
        assert_eq!(location(&target("::1", 22, "")), "sftp://acme@[::1]:22/~");
        assert_eq!(location(&target("h", 22, "/")), "sftp://acme@h:22/");
    }

    #[test]
    fn sftp_errors_are_classified() {
        use russh_sftp::protocol::Status;
        let status = |code| {
            SftpError::Status(Status {
                id: 1,
                status_code: code,
                error_message: "m".into(),
                language_tag: "en".into(),
            })
        };
        let e = sftp_error("l", "d".into(), status(StatusCode::PermissionDenied));
        assert!(matches!(e, DeliveryError::PermissionDenied { .. }) && !e.is_transient());
        let e = sftp_error("l", "d".into(), status(StatusCode::NoSuchFile));
        assert!(!e.is_transient());
        let e = sftp_error("l", "d".into(), status(StatusCode::Failure));
        assert!(matches!(e, DeliveryError::Failed { .. }) && e.is_transient());
        let e = sftp_error("l", "d".into(), SftpError::Timeout);
        assert!(matches!(e, DeliveryError::Connection { .. }) && e.is_transient());
    }
}
