use std::path::PathBuf;

/// Why a PDF could not be protected or a signing identity not loaded. Messages never
/// contain a password, a key or the document's text.
#[derive(thiserror::Error, Debug)]
pub enum SignError {
    #[error("cannot read the input PDF: {0}")]
    Pdf(String),
    #[error("the input PDF is already encrypted: expected a plain PDF")]
    AlreadyEncrypted,
    #[error("the input PDF has no page to hold the signature field")]
    NoPage,
    #[error("the input PDF is malformed: {0}")]
    Structure(String),
    #[error("the {which} password is not usable with {cipher}: {reason}")]
    Password {
        which: &'static str,
        cipher: crate::Cipher,
        reason: String,
    },
    #[error("cannot encrypt the PDF: {0}")]
    Encrypt(String),
    #[error("cannot read the PKCS#12 data: wrong password or damaged file")]
    Pkcs12Password,
    #[error("cannot read the PKCS#12 data: {0}")]
    Pkcs12(String),
    #[error("cannot write the PKCS#12 data: {0}")]
    Pkcs12Write(String),
    #[error("unsupported signing key: {0}")]
    UnsupportedKey(String),
    #[error("the certificate in the PKCS#12 data does not belong to its private key")]
    KeyMismatch,
    #[error("cannot make the certificate: {0}")]
    Certificate(String),
    #[error("cannot make the signature: {0}")]
    Signature(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}
