//! Password-encrypt a PDF and add a PAdES signature, for the contract-note pipeline (a
//! broker e-mails each client a note encrypted with the client's PAN and signed with the
//! broker's key).
//!
//! Design, in the order [`Signer::protect`] runs:
//!
//! 1. **Encrypt** ([`encrypt`]): lopdf parses the plain PDF once, encrypts every string and
//!    stream with a fresh random file key — AES-256, security handler revision 6 (PDF 2.0)
//!    by default, AES-128 revision 4 as an option — and writes it with a classic
//!    cross-reference table. lopdf's own R6 handler is used (Algorithm 2.B and friends); its
//!    output is checked by qpdf, poppler and pyHanko in the tests.
//! 2. **Sign** as an incremental update appended to those bytes, *without* re-opening the
//!    encrypted file: the parsed document and the encryption state are still in memory, so
//!    the new objects (signature dictionary, signature field/widget, the first page and the
//!    catalog with an `/AcroForm`) are encrypted with the same file key, except the
//!    signature's `/Contents`, which the standard keeps in clear. `/ByteRange` covers the
//!    whole file but `/Contents`; the CMS signature (`ETSI.CAdES.detached` with
//!    signing-certificate-v2 by default, or `adbe.pkcs7.detached`) signs its SHA-256 digest
//!    with RSA (2048 bits or more). The placeholder for `/Contents` is sized once per signer:
//!    for a given key and certificate chain the DER signature has a fixed length.
//!
//! Cost (`examples/bench_sign.rs`, 150 KB note, one core): most of it is R6's deliberately
//! slow password hashing — four runs of Algorithm 2.B, about 10–15 ms of CPU on the shared
//! 2-core machine, against about 1 ms to parse, encrypt and write the whole note with R4;
//! the RSA-2048 signature (the `rsa` crate) is about 3 ms. Keys come from a PKCS#12 file ([`Pkcs12Signer::from_pkcs12`]); with
//! none, [`Pkcs12Signer::demo`] makes a self-signed certificate that says it is a demo.
//! `conformance::exercise` (feature `conformance`) checks any [`Signer`] with the
//! external verifiers.

#![deny(missing_docs)]

mod cades;
#[cfg(feature = "conformance")]
pub mod conformance;
mod demo;
mod encrypt;
mod error;
mod pkcs12_signer;
mod revision;

pub use encrypt::encrypt;
pub use error::SignError;
pub use pkcs12_signer::{Pkcs12Signer, DEMO_SUBJECT_CN};

use std::fmt;

/// The security handler used for the password encryption.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// AES-256, standard security handler revision 6 (PDF 2.0). The default.
    #[default]
    Aes256,
    /// AES-128, standard security handler revision 4 (PDF 1.6), for old readers.
    Aes128,
}

impl Cipher {
    /// The standard security handler revision this cipher writes (`/R`).
    pub fn revision(self) -> u8 {
        match self {
            Cipher::Aes256 => 6,
            Cipher::Aes128 => 4,
        }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cipher::Aes256 => f.write_str("AES-256 (R6)"),
            Cipher::Aes128 => f.write_str("AES-128 (R4)"),
        }
    }
}

/// How a PDF is password-protected. `Debug` hides both passwords.
#[derive(Clone)]
pub struct Protection {
    /// Needed to open the file (the pipeline passes the client's PAN in upper case).
    pub user_password: String,
    /// Grants full access (from configuration).
    pub owner_password: String,
    /// AES-256 (R6) unless the recipients' readers need AES-128 (R4).
    pub cipher: Cipher,
}

impl fmt::Debug for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Protection")
            .field("user_password", &"***")
            .field("owner_password", &"***")
            .field("cipher", &self.cipher)
            .finish()
    }
}

/// Optional metadata written into the signature dictionary; empty strings are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignatureInfo {
    /// `/Reason`, e.g. `Contract note`.
    pub reason: String,
    /// `/Location`, e.g. the broker's city.
    pub location: String,
    /// `/ContactInfo`, e.g. a compliance desk's address; `None` leaves it out.
    pub contact: Option<String>,
}

/// Which CMS flavour goes into the signature (`/SubFilter`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SubFilter {
    /// `ETSI.CAdES.detached`: PAdES baseline, with the signing-certificate-v2 attribute and
    /// no signing-time attribute (the time is the dictionary's `/M`). The default.
    #[default]
    CadesDetached,
    /// `adbe.pkcs7.detached`: the older PDF 1.x form, with a signing-time attribute.
    Pkcs7Detached,
}

impl SubFilter {
    pub(crate) fn pdf_name(self) -> &'static [u8] {
        match self {
            SubFilter::CadesDetached => b"ETSI.CAdES.detached",
            SubFilter::Pkcs7Detached => b"adbe.pkcs7.detached",
        }
    }
}

/// Encrypts a PDF and signs it: the seam between the pipeline and a signing identity.
/// Implementations are checked by `conformance::exercise` (feature `conformance`).
pub trait Signer: Send + Sync {
    /// Returns `pdf` encrypted as `protection` says, with a PAdES signature appended as an
    /// incremental update. Callable from several threads at once.
    fn protect(&self, pdf: &[u8], protection: &Protection) -> Result<Vec<u8>, SignError>;

    /// The signing certificate, PEM-encoded (what a verifier is told to trust).
    fn certificate_pem(&self) -> String;
}
