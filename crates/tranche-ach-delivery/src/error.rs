//! Why a file was not delivered or looked up, and whether trying again later may help.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Any error kept as a cause: an I/O error, an SSH or SFTP library's error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a delivery or a lookup failed. Each says where ([`Delivery::location`], never a
/// secret) and, when there is one, which file; the underlying error is the `source()`.
/// A key file is named by its path, its content never appears. Bank files hold account
/// numbers: no error quotes a file's content.
///
/// [`Delivery::location`]: crate::Delivery::location
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// Not a plain file name (see [`check_name`](crate::check_name)); refused before any
    /// I/O.
    #[error("{name:?} is not a plain file name: {why}")]
    BadName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },

    /// A different file already has this name at the destination. It was left as it
    /// is: the bank may have picked it up already.
    #[error(
        "{location}: {name} already exists with other content \
         (expected sha256 {expected}, found {found}); it was left as it is"
    )]
    Exists {
        /// Where ([`Delivery::location`](crate::Delivery::location)).
        location: String,
        /// The file name.
        name: String,
        /// The SHA-256 of the bytes being delivered.
        expected: String,
        /// The SHA-256 of the file already there.
        found: String,
    },

    /// The destination could not be reached, or the connection to it dropped or timed
    /// out: worth trying again later.
    #[error("{location}: {doing}")]
    Connection {
        /// Where.
        location: String,
        /// What was being done, naming the file when there is one.
        doing: String,
        /// Refused, reset, timed out, disconnected.
        #[source]
        source: BoxError,
    },

    /// The server's host key is not one the known_hosts file trusts for it: never
    /// accepted, whatever the reason (a first connection, a changed key, a
    /// man in the middle). Someone must check the fingerprint with the bank. Boxed: it
    /// is the largest variant, and errors travel by value.
    #[error("{0}")]
    HostKeyRefused(Box<HostKeyRefusal>),

    /// The server refused the client key for this user.
    #[error("{location}: the server refused the key {} for user {user}", key_file.display())]
    AuthRefused {
        /// Where.
        location: String,
        /// The user logged in as.
        user: String,
        /// The private key's path (never its content).
        key_file: PathBuf,
    },

    /// The private key file cannot be used: unreadable, readable by others than its
    /// owner, encrypted, or not a key this build supports.
    #[error("private key {}: {problem}", path.display())]
    KeyFile {
        /// The key's path.
        path: PathBuf,
        /// What is wrong.
        problem: String,
        /// The error behind it, if any.
        #[source]
        source: Option<BoxError>,
    },

    /// The known_hosts file cannot be read.
    #[error("cannot read the known_hosts file {}", path.display())]
    KnownHosts {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },

    /// The destination refused access to a file or directory.
    #[error("{location}: {doing}")]
    PermissionDenied {
        /// Where.
        location: String,
        /// What was being done, naming the file.
        doing: String,
        /// The refusal.
        #[source]
        source: BoxError,
    },

    /// No space left at the destination (ENOSPC, EDQUOT): nothing was delivered, and
    /// the same delivery succeeds once space is freed there. Told apart from other
    /// failures because waiting, not retrying, is the cure: an upload waits for space
    /// without spending its attempts.
    #[error("{location}: {doing}: no space left there")]
    Full {
        /// Where space must be freed.
        location: String,
        /// What was being done, naming the file.
        doing: String,
        /// ENOSPC or EDQUOT, as the OS reported it.
        #[source]
        source: io::Error,
    },

    /// Any other failure at the destination: a missing directory, an SSH protocol
    /// failure. [`is_transient`](Self::is_transient) says whether to retry.
    #[error("{location}: {doing}")]
    Failed {
        /// Where.
        location: String,
        /// What was being done, naming the file when there is one.
        doing: String,
        /// Whether the same call may succeed later (a full disk may be emptied).
        transient: bool,
        /// The failure.
        #[source]
        source: BoxError,
    },
}

/// A refused host key: which server, which key, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKeyRefusal {
    /// Where ([`Delivery::location`](crate::Delivery::location)).
    pub location: String,
    /// The host as looked up in known_hosts: `host`, or `[host]:port` off port 22.
    pub host: String,
    /// The key's algorithm, e.g. `ssh-ed25519`.
    pub algorithm: String,
    /// The refused key's fingerprint as OpenSSH prints it, `SHA256:…`.
    pub fingerprint: String,
    /// The known_hosts file consulted.
    pub known_hosts: PathBuf,
    /// Why it was refused.
    pub problem: HostKeyProblem,
}

impl fmt::Display for HostKeyRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: refused the host key of {}: {} ({} key {}, known_hosts {})",
            self.location,
            self.host,
            self.problem,
            self.algorithm,
            self.fingerprint,
            self.known_hosts.display()
        )
    }
}

/// Why a host key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostKeyProblem {
    /// No line of known_hosts is for this host with this key.
    Unknown,
    /// known_hosts has another key of the same algorithm for this host (at this line,
    /// counting from 1): the server's key changed, or someone is in between.
    Changed {
        /// The line holding the key that was expected.
        line: usize,
    },
    /// known_hosts marks this key `@revoked` (at this line).
    Revoked {
        /// The `@revoked` line.
        line: usize,
    },
    /// The server offered a host certificate; only plain host keys listed in
    /// known_hosts are trusted.
    Certificate,
}

impl fmt::Display for HostKeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostKeyProblem::Unknown => {
                f.write_str("expected a key listed in known_hosts, got an unknown key")
            }
            HostKeyProblem::Changed { line } => write!(
                f,
                "expected the key at line {line} of known_hosts, got another: the host key changed"
            ),
            HostKeyProblem::Revoked { line } => {
                write!(
                    f,
                    "the key is marked @revoked at line {line} of known_hosts"
                )
            }
            HostKeyProblem::Certificate => {
                f.write_str("expected a plain host key, got a certificate")
            }
        }
    }
}

impl DeliveryError {
    /// Whether the same call may succeed if tried again later: a connection refused,
    /// reset or timed out, a full disk. Not a refused host key or client key, a bad
    /// name, a different existing file, or a permission denied: those need a person.
    pub fn is_transient(&self) -> bool {
        match self {
            DeliveryError::Connection { .. } | DeliveryError::Full { .. } => true,
            DeliveryError::Failed { transient, .. } => *transient,
            DeliveryError::BadName { .. }
            | DeliveryError::Exists { .. }
            | DeliveryError::HostKeyRefused { .. }
            | DeliveryError::AuthRefused { .. }
            | DeliveryError::KeyFile { .. }
            | DeliveryError::KnownHosts { .. }
            | DeliveryError::PermissionDenied { .. } => false,
        }
    }

    /// What another attempt can do (see [`Transience`](tranche_types::Transience)):
    /// [`is_transient`](Self::is_transient), with a full destination waiting for space
    /// rather than spending attempts.
    pub fn transience(&self) -> tranche_types::Transience {
        use tranche_types::Transience;
        match self {
            DeliveryError::Full { .. } => Transience::Full,
            e if e.is_transient() => Transience::Transient,
            _ => Transience::Permanent,
        }
    }

    /// A local I/O failure at `location` while `doing`, classified by its kind.
    pub(crate) fn io(location: &str, doing: String, e: io::Error) -> DeliveryError {
        use io::ErrorKind as K;
        let location = location.to_string();
        if tranche_storage::is_full(&e) {
            return DeliveryError::Full {
                location,
                doing,
                source: e,
            };
        }
        match e.kind() {
            K::PermissionDenied => DeliveryError::PermissionDenied {
                location,
                doing,
                source: e.into(),
            },
            kind if is_connection_kind(kind) => DeliveryError::Connection {
                location,
                doing,
                source: e.into(),
            },
            kind => DeliveryError::Failed {
                location,
                doing,
                // A busy resource may be released; a missing directory, a read-only
                // filesystem or a corrupt disk wait for a person.
                transient: matches!(kind, K::ResourceBusy | K::Interrupted),
                source: e.into(),
            },
        }
    }
}

/// I/O error kinds that mean the connection, not the request, failed.
pub(crate) fn is_connection_kind(kind: io::ErrorKind) -> bool {
    use io::ErrorKind as K;
    matches!(
        kind,
        K::ConnectionRefused
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected
            | K::BrokenPipe
            | K::TimedOut
            | K::UnexpectedEof
            | K::HostUnreachable
            | K::NetworkUnreachable
            | K::NetworkDown
            | K::AddrNotAvailable
            | K::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
        std::iter::successors(Some(e), |e| (*e).source())
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn io_errors_are_classified_by_kind() {
        let io = |code| {
            DeliveryError::io(
                "outbox:/o",
                "writing a.ach".into(),
                io::Error::from_raw_os_error(code),
            )
        };
        let denied = io(13);
        assert!(matches!(denied, DeliveryError::PermissionDenied { .. }));
        assert!(!denied.is_transient());
        assert_eq!(
            chain(&denied),
            [
                "outbox:/o: writing a.ach",
                "Permission denied (os error 13)"
            ]
        );
        for full in [28, 122] {
            let e = io(full);
            assert!(matches!(e, DeliveryError::Full { .. }), "{e:?}");
            assert!(
                e.is_transient(),
                "a full disk may be emptied, a quota raised"
            );
            assert_eq!(
                chain(&e)[0],
                "outbox:/o: writing a.ach: no space left there"
            );
        }
        assert!(!io(30).is_transient(), "a read-only filesystem");
        assert!(!io(2).is_transient(), "a missing directory");
        assert!(!io(5).is_transient(), "EIO");
        assert!(io(111).is_transient(), "connection refused");
        assert!(io(104).is_transient(), "connection reset");
        assert!(io(110).is_transient(), "timed out");
    }

    #[test]
    fn refusals_need_a_person() {
        let cases = [
            DeliveryError::BadName {
                name: "../x".into(),
                why: "no",
            },
            DeliveryError::Exists {
                location: "l".into(),
                name: "a".into(),
                expected: "1".into(),
                found: "2".into(),
            },
            DeliveryError::HostKeyRefused(Box::new(HostKeyRefusal {
                location: "l".into(),
                host: "[h]:2".into(),
                algorithm: "ssh-ed25519".into(),
                fingerprint: "SHA256:x".into(),
                known_hosts: "/k".into(),
                problem: HostKeyProblem::Changed { line: 3 },
            })),
            DeliveryError::AuthRefused {
                location: "l".into(),
                user: "u".into(),
                key_file: "/k".into(),
            },
        ];
        for e in cases {
            assert!(!e.is_transient(), "{e}");
        }
    }
}
