use std::path::PathBuf;

/// An error from one of the crypto crates (rsa, der, x509-cert, p12-keystore), which
/// have no error type in common.
pub type CryptoError = Box<dyn std::error::Error + Send + Sync>;

/// Why a PDF could not be protected or a signing identity not loaded. Messages never
/// contain a password, a key or the document's text. Each message leaves its cause to
/// the error's `source()`: print the whole chain to see why.
#[derive(thiserror::Error, Debug)]
pub enum SignError {
    #[error("cannot read the input PDF")]
    Pdf(#[source] lopdf::Error),
    #[error("the input PDF is already encrypted: expected a plain PDF")]
    AlreadyEncrypted,
    #[error("the input PDF has no page to hold the signature field")]
    NoPage,
    /// Something the signature needs is missing or of the wrong type (our words: the
    /// parser found nothing wrong).
    #[error("the input PDF is malformed: {0}")]
    Structure(String),
    /// A password refused before encrypting anything.
    #[error("the {which} password is not usable with {cipher}: {reason}")]
    Password {
        which: &'static str,
        cipher: crate::Cipher,
        reason: String,
    },
    /// lopdf's security handler refused the passwords (e.g. SASLprep for AES-256).
    #[error("the user or owner password is not usable with {cipher}")]
    PasswordRejected {
        cipher: crate::Cipher,
        #[source]
        source: lopdf::Error,
    },
    #[error("cannot encrypt the PDF")]
    Encrypt(#[source] lopdf::Error),
    #[error("cannot read the PKCS#12 data: wrong password or damaged file")]
    Pkcs12Password,
    #[error("cannot read the PKCS#12 data")]
    Pkcs12(#[source] p12_keystore::error::Error),
    #[error("cannot read the PKCS#12 data: no private key with a matching certificate in it")]
    Pkcs12NoKey,
    #[error("cannot read a certificate in the PKCS#12 data")]
    Pkcs12Certificate(#[source] der::Error),
    #[error("cannot write the PKCS#12 data")]
    Pkcs12Write(#[source] CryptoError),
    #[error("unsupported signing key: {0}")]
    UnsupportedKey(String),
    #[error("cannot encode the signing key's public key")]
    PublicKey(#[source] x509_cert::spki::Error),
    #[error("no certificate for the signing key")]
    NoCertificate,
    #[error("the certificate in the PKCS#12 data does not belong to its private key")]
    KeyMismatch,
    #[error("cannot make the certificate")]
    Certificate(#[source] CryptoError),
    #[error("cannot make the signature")]
    Signature(#[source] rsa::signature::Error),
    #[error("cannot encode the signature")]
    SignatureEncoding(#[source] der::Error),
    #[error("cannot make the signature: it is {len} bytes, larger than the {reserved} reserved")]
    SignatureTooLarge { len: usize, reserved: usize },
    #[error("cannot {op} {}", .path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
