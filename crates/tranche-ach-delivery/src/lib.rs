//! How a finished NACHA payment file reaches its bank.
//!
//! One [`Delivery`] trait with two implementations: [`Outbox`], a directory (for banks
//! whose own transfer agent collects files, and for runs without a bank), and [`Sftp`],
//! SFTP over SSH with a private-key file, checking the server's host key against a
//! known_hosts file. `conformance::exercise` (feature `conformance`) is the suite
//! both pass unchanged.
//!
//! # Never a partial file
//!
//! A bank's side polls its drop directory and takes whatever it finds. A file being
//! written is a file it may take half of, and a payment file cut short is a wrong
//! payment file (or a rejected one, late). So a file is written under a hidden
//! temporary name (`.NAME.<random>.part`), flushed and fsynced where the destination
//! allows (`fsync@openssh.com` on OpenSSH), its size checked, and only then renamed to
//! its name. A rename within a directory is atomic: a reader sees no file, or all of it.
//!
//! # Never overwriting a different file
//!
//! A file under a name may already have been taken by the bank. Replacing it with other
//! bytes would make what was paid differ from what the records say, silently. So a
//! name that already holds other bytes is [`DeliveryError::Exists`] and the file is
//! left as it is: two different payment files under one name is a bug upstream that a
//! person must look at. The same bytes under the same name are a success and nothing is
//! written: a submitter that crashed after uploading delivers again, harmlessly. The
//! final rename refuses an existing name (a hard link on the outbox; SFTP's own rename,
//! which OpenSSH performs as a link, never clobbering), so two submitters racing for
//! one name cannot both win.
//!
//! # Why [`Delivery::find`]
//!
//! An upload can be cut anywhere: the process killed, the connection dropped after the
//! last byte but before the answer. The submitter records "submitting NAME, sha256 H"
//! in its ledger before the upload and "submitted" after it. On restart, a file left
//! "submitting" is in doubt; the submitter asks the destination with `find(NAME)`:
//! `Some(H)` means it arrived whole (mark it submitted), `None` means it did not (send
//! it again; a temporary left behind never counts and never blocks), and another hash
//! means someone else's file has that name (stop, a person looks). The hash is of the
//! bytes at the destination, read back, not a record of what was sent. A bank that
//! moves files away as it collects them makes `None` ambiguous (never arrived, or
//! arrived and taken): for such a bank the in-doubt answer needs the bank's own
//! acknowledgement, which this crate does not read.
//!
//! # Errors and secrets
//!
//! [`DeliveryError`] names the destination by [`Delivery::location`] (no secret in it)
//! and the file, keeps the cause as its `source()`, and says whether trying again later
//! may help ([`DeliveryError::is_transient`]). A key file is named by its path; its
//! content never leaves it. A private key readable by anyone but its owner is refused,
//! as `ssh` refuses it.

#![deny(missing_docs)]

#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod hostkey;
mod name;
mod outbox;
mod protocol;
mod sftp;

pub use error::{BoxError, DeliveryError, HostKeyProblem, HostKeyRefusal};
pub use name::{check as check_name, MAX_NAME_LEN};
pub use outbox::Outbox;
pub use sftp::{Sftp, SftpTarget, Timeouts};

use async_trait::async_trait;

/// Upload a file so the bank never sees part of it, and tell what is at the
/// destination. Called from many tasks at once. Checked by `conformance::exercise`.
#[async_trait]
pub trait Delivery: Send + Sync + 'static {
    /// Deliver `bytes` as `name` (a plain file name, see [`check_name`]): written under
    /// a temporary name, flushed and fsynced where possible, then renamed into place,
    /// so a reader of the destination never sees a partial file. When a file of that
    /// name is already there with the same content this is a success and writes
    /// nothing; with other content it is [`DeliveryError::Exists`] and that file is left
    /// as it is (never overwrite a file a bank may have picked up).
    async fn deliver(&self, name: &str, bytes: &[u8]) -> Result<(), DeliveryError>;

    /// The SHA-256 (lower-case hex) of the file at the destination under `name`, read
    /// back, or `None` when there is none (a leftover temporary file does not count).
    /// Used after a crash mid-upload to decide whether the file arrived.
    async fn find(&self, name: &str) -> Result<Option<String>, DeliveryError>;

    /// Where files go, for messages and records, with no secret in it:
    /// `outbox:/abs/dir` or `sftp://user@host:port/remote/dir`.
    fn location(&self) -> String;

    /// Bytes a delivery may still use there, when the destination can tell (an
    /// outbox's filesystem); for messages about a full destination.
    fn free_space(&self) -> Option<u64> {
        None
    }
}

/// The SHA-256 of `bytes` in lower-case hex, as [`Delivery::find`] reports it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// The SHA-256 (lower-case hex) of everything `reader` yields, streamed: a delivered
/// file is read back without holding it in memory. Both deliveries read back through
/// this, so the outbox and SFTP report one hash the same way.
pub(crate) async fn sha256_hex_of(
    mut reader: impl tokio::io::AsyncRead + Unpin,
) -> std::io::Result<String> {
    use tokio::io::AsyncReadExt;
    let mut hasher = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf).await? {
            0 => return Ok(hex(hasher.finish().as_ref())),
            n => hasher.update(&buf[..n]),
        }
    }
}

/// Lower-case hex of a digest.
pub(crate) fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha256_hex_is_lower_case_hex() {
        assert_eq!(
            super::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            super::sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
