//! The signing identity from a PKCS#12 file (or a generated demo one).

use std::path::Path;
use std::time::SystemTime;

use der::{Decode, Encode, EncodePem};
use lopdf::xref::XrefType;
use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy, PrivateKeyChain};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use rsa::traits::PublicKeyParts;
use rsa::RsaPrivateKey;
use sha2::{Digest, Sha256};
use x509_cert::spki::SubjectPublicKeyInfoOwned;
use x509_cert::Certificate;

use crate::cades::CmsSigner;
use crate::encrypt::encrypt_parsed;
use crate::revision::{self, append_signature, Base};
use crate::{Protection, SignError, SignatureInfo, Signer, SubFilter};

pub use crate::demo::DEMO_SUBJECT_CN;

/// File names [`Pkcs12Signer::demo_in`] keeps the demo identity under.
const DEMO_P12: &str = "demo-signer.p12";
const DEMO_PEM: &str = "demo-signer.pem";

/// Signs with an RSA key (2048 bits or more) and its certificate chain.
pub struct Pkcs12Signer {
    key: RsaPrivateKey,
    cms: CmsSigner,
    info: SignatureInfo,
    certificate_pem: String,
}

impl std::fmt::Debug for Pkcs12Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs12Signer")
            .field("key", &"***")
            .field("key_bits", &(self.key.size() * 8))
            .field("certificates", &self.cms.chain().len())
            .field("sub_filter", &self.cms.sub_filter())
            .field("info", &self.info)
            .finish()
    }
}

impl Pkcs12Signer {
    /// Reads the first private key and its certificate chain from PKCS#12 bytes (as
    /// written by `openssl pkcs12 -export` or [`Pkcs12Signer::to_pkcs12`]).
    pub fn from_pkcs12(der: &[u8], password: &str, info: SignatureInfo) -> Result<Self, SignError> {
        let store = KeyStore::from_pkcs12(der, password, Pkcs12ImportPolicy::Strict).map_err(
            |e| match e {
                p12_keystore::error::Error::MacError(_) => SignError::Pkcs12Password,
                other => SignError::Pkcs12(other),
            },
        )?;
        let (_, chain) = store.private_key_chain().ok_or(SignError::Pkcs12NoKey)?;
        let key = RsaPrivateKey::from_pkcs8_der(chain.key().as_der()).map_err(|_| {
            SignError::UnsupportedKey(format!(
                "expected an RSA private key, got algorithm {}",
                chain.key().oid()
            ))
        })?;
        let certs = chain
            .certs()
            .iter()
            .map(|c| Certificate::from_der(c.as_der()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(SignError::Pkcs12Certificate)?;
        Self::new(key, certs, info, SubFilter::default())
    }

    /// A fresh self-signed RSA-2048 identity named [`DEMO_SUBJECT_CN`]. Key generation
    /// takes a fraction of a second to a few seconds; save it with
    /// [`to_pkcs12`](Self::to_pkcs12) (or use [`demo_in`](Self::demo_in)) to reuse it.
    pub fn demo(info: SignatureInfo) -> Result<Self, SignError> {
        let (key, cert) = crate::demo::generate()?;
        Self::new(key, vec![cert], info, SubFilter::default())
    }

    /// The demo identity kept in `dir`: read from `demo-signer.p12` if it is there,
    /// otherwise made with [`demo`](Self::demo) and written there with its certificate as
    /// `demo-signer.pem` (what verifiers are told to trust).
    pub fn demo_in(dir: &Path, password: &str, info: SignatureInfo) -> Result<Self, SignError> {
        let p12_path = dir.join(DEMO_P12);
        let io = |op: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| SignError::Io { op, path, source }
        };
        match std::fs::read(&p12_path) {
            Ok(bytes) => return Self::from_pkcs12(&bytes, password, info),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("read", &p12_path)(e)),
        }
        let signer = Self::demo(info)?;
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        // Written under a temporary name and renamed, so a concurrent or killed run never
        // leaves half a key store behind. The key store stays readable by its owner only
        // (the temporary file's mode); the certificate is public.
        for (name, bytes, public) in [
            (DEMO_PEM, signer.certificate_pem().into_bytes(), true),
            (DEMO_P12, signer.to_pkcs12(password)?, false),
        ] {
            let path = dir.join(name);
            let mut tmp =
                tempfile::NamedTempFile::new_in(dir).map_err(io("create a file in", dir))?;
            std::io::Write::write_all(&mut tmp, &bytes).map_err(io("write", &path))?;
            #[cfg(unix)]
            if public {
                use std::os::unix::fs::PermissionsExt as _;
                let readable = std::fs::Permissions::from_mode(0o644);
                let set = tmp.as_file().set_permissions(readable);
                set.map_err(io("set the permissions of", &path))?;
            }
            #[cfg(not(unix))]
            let _ = public;
            tmp.persist(&path)
                .map_err(|e| io("rename into place", &path)(e.error))?;
        }
        Ok(signer)
    }

    /// The key and certificate chain as PKCS#12 (PBES2 AES-256, HMAC-SHA-256), readable
    /// by OpenSSL 3 and [`from_pkcs12`](Self::from_pkcs12).
    pub fn to_pkcs12(&self, password: &str) -> Result<Vec<u8>, SignError> {
        let key_der = self.key.to_pkcs8_der().map_err(write_error)?;
        let key = p12_keystore::PrivateKey::from_der(key_der.as_bytes()).map_err(write_error)?;
        let mut certs = Vec::with_capacity(self.cms.chain().len());
        for cert in self.cms.chain() {
            let der = cert.to_der().map_err(write_error)?;
            certs.push(p12_keystore::Certificate::from_der(&der).map_err(write_error)?);
        }
        let local_key_id = Sha256::digest(certs[0].as_der())[..20].to_vec();
        let mut store = KeyStore::new();
        store.add_entry(
            "tranche-signer",
            KeyStoreEntry::PrivateKeyChain(PrivateKeyChain::new(local_key_id, key, certs)),
        );
        store.writer(password).write().map_err(write_error)
    }

    /// The same identity writing `sub_filter` signatures instead.
    pub fn with_sub_filter(self, sub_filter: SubFilter) -> Result<Self, SignError> {
        Self::new(self.key, self.cms.chain().to_vec(), self.info, sub_filter)
    }

    /// Signs a plain PDF without encrypting it (an incremental update on the original
    /// bytes, in the same cross-reference format).
    pub fn sign(&self, pdf: &[u8]) -> Result<Vec<u8>, SignError> {
        let doc = revision::parse(pdf)?;
        if doc.is_encrypted() {
            return Err(SignError::AlreadyEncrypted);
        }
        let declared_size = doc
            .trailer
            .get(b"Size")
            .and_then(lopdf::Object::as_i64)
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0);
        let base = Base {
            bytes: pdf.to_vec(),
            doc: &doc,
            state: None,
            xref: doc.reference_table.cross_reference_type,
            next_id: declared_size.max(doc.max_id + 1),
        };
        append_signature(base, &self.cms, &self.info, SystemTime::now())
    }

    fn new(
        key: RsaPrivateKey,
        chain: Vec<Certificate>,
        info: SignatureInfo,
        sub_filter: SubFilter,
    ) -> Result<Self, SignError> {
        let bits = key.size() * 8;
        if bits < 2048 {
            return Err(SignError::UnsupportedKey(format!(
                "expected an RSA key of 2048 bits or more, got {bits}"
            )));
        }
        let leaf = chain.first().ok_or(SignError::NoCertificate)?;
        let key_spki = SubjectPublicKeyInfoOwned::from_key(&key.to_public_key())
            .map_err(SignError::PublicKey)?;
        if &key_spki != leaf.tbs_certificate().subject_public_key_info() {
            return Err(SignError::KeyMismatch);
        }
        let certificate_pem = leaf
            .to_pem(der::pem::LineEnding::LF)
            .map_err(|e| SignError::Certificate(Box::new(e)))?;
        let cms = CmsSigner::new(key.clone(), chain, sub_filter)?;
        Ok(Pkcs12Signer {
            key,
            cms,
            info,
            certificate_pem,
        })
    }
}

impl Signer for Pkcs12Signer {
    fn protect(&self, pdf: &[u8], protection: &Protection) -> Result<Vec<u8>, SignError> {
        let encrypted = encrypt_parsed(revision::parse(pdf)?, protection)?;
        let base = Base {
            bytes: encrypted.bytes,
            doc: &encrypted.doc,
            state: Some(&encrypted.state),
            // lopdf wrote a classic table (see `encrypt_parsed`) and numbered objects up to
            // its max_id, the /Encrypt dictionary included.
            xref: XrefType::CrossReferenceTable,
            next_id: encrypted.doc.max_id + 1,
        };
        append_signature(base, &self.cms, &self.info, SystemTime::now())
    }

    fn certificate_pem(&self) -> String {
        self.certificate_pem.clone()
    }
}

fn write_error(e: impl std::error::Error + Send + Sync + 'static) -> SignError {
    SignError::Pkcs12Write(Box::new(e))
}
