use std::path::PathBuf;

/// An error from one of the crypto crates (rsa, der, x509-cert, p12-keystore), which
/// have no error type in common.
pub type CryptoError = Box<dyn std::error::Error + Send + Sync>;

/// Why a PDF could not be protected or a signing identity not loaded. Messages never
/// contain a password, a key or the document's text. Each message leaves its cause to
/// the error's `source()`: print the whole chain to see why.
#[derive(thiserror::Error, Debug)]
pub enum SignError {
    /// lopdf could not parse the input: not a PDF, truncated, or damaged beyond repair.
    #[error("cannot read the input PDF")]
    Pdf(#[source] lopdf::Error),
    /// The input already has an `/Encrypt` dictionary: pass the PDF as rendered.
    #[error("the input PDF is already encrypted: expected a plain PDF")]
    AlreadyEncrypted,
    /// The signature's widget needs a page to sit on.
    #[error("the input PDF has no page to hold the signature field")]
    NoPage,
    /// Something the signature needs is missing or of the wrong type (our words: the
    /// parser found nothing wrong).
    #[error("the input PDF is malformed: {0}")]
    Structure(String),
    /// A password refused before encrypting anything.
    #[error("the {which} password is not usable with {cipher}: {reason}")]
    Password {
        /// `user` or `owner`.
        which: &'static str,
        /// The cipher asked for: AES-128 takes printable ASCII only.
        cipher: crate::Cipher,
        /// What is wrong with the password, never the password itself.
        reason: String,
    },
    /// lopdf's security handler refused the passwords (e.g. SASLprep for AES-256).
    #[error("the user or owner password is not usable with {cipher}")]
    PasswordRejected {
        /// The cipher asked for.
        cipher: crate::Cipher,
        /// lopdf's refusal.
        #[source]
        source: lopdf::Error,
    },
    /// lopdf failed to encrypt an object, of the input or of the signature's update.
    #[error("cannot encrypt the PDF")]
    Encrypt(#[source] lopdf::Error),
    /// The PKCS#12 integrity check (MAC) failed: almost always the wrong password.
    #[error("cannot read the PKCS#12 data: wrong password or damaged file")]
    Pkcs12Password,
    /// The PKCS#12 data is damaged or uses an algorithm p12-keystore does not read.
    #[error("cannot read the PKCS#12 data")]
    Pkcs12(#[source] p12_keystore::error::Error),
    /// The PKCS#12 data holds no key with its certificate chain (e.g. certificates only).
    #[error("cannot read the PKCS#12 data: no private key with a matching certificate in it")]
    Pkcs12NoKey,
    /// A certificate in the PKCS#12 data is not a valid DER X.509 certificate.
    #[error("cannot read a certificate in the PKCS#12 data")]
    Pkcs12Certificate(#[source] der::Error),
    /// [`Pkcs12Signer::to_pkcs12`](crate::Pkcs12Signer::to_pkcs12) could not encode the
    /// key or the chain.
    #[error("cannot write the PKCS#12 data")]
    Pkcs12Write(#[source] CryptoError),
    /// Only RSA keys of 2048 bits or more sign; the text says what was found instead.
    #[error("unsupported signing key: {0}")]
    UnsupportedKey(String),
    /// The key's public half could not be encoded to compare it with the certificate's.
    #[error("cannot encode the signing key's public key")]
    PublicKey(#[source] x509_cert::spki::Error),
    /// The certificate chain given with the key is empty.
    #[error("no certificate for the signing key")]
    NoCertificate,
    /// The chain's first certificate is for another key than the one that signs.
    #[error("the certificate in the PKCS#12 data does not belong to its private key")]
    KeyMismatch,
    /// The demo certificate could not be made, or the signing certificate not written as
    /// PEM.
    #[error("cannot make the certificate")]
    Certificate(#[source] CryptoError),
    /// RSA signing of the CMS signed attributes failed.
    #[error("cannot make the signature")]
    Signature(#[source] rsa::signature::Error),
    /// The CMS structure (or a certificate in it) could not be DER-encoded.
    #[error("cannot encode the signature")]
    SignatureEncoding(#[source] der::Error),
    #[error("cannot make the signature: it is {len} bytes, larger than the {reserved} reserved")]
    /// The CMS signature outgrew the `/Contents` placeholder sized when the signer was
    /// made; a bug, since its length is fixed for a key and chain.
    SignatureTooLarge {
        /// Bytes of DER the signature took.
        len: usize,
        /// Bytes the placeholder holds.
        reserved: usize,
    },
    #[error("cannot {op} {}", .path.display())]
    /// Reading or writing the demo identity's files
    /// ([`Pkcs12Signer::demo_in`](crate::Pkcs12Signer::demo_in)) failed.
    Io {
        /// What was being done, e.g. `read`, `write`, `rename into place`.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// Why, as the OS said it (e.g. permission denied, no space left).
        #[source]
        source: std::io::Error,
    },
}
