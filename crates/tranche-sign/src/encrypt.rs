//! Password encryption with lopdf's standard security handler.

use std::collections::BTreeMap;
use std::sync::Arc;

use lopdf::encryption::crypt_filters::{Aes128CryptFilter, Aes256CryptFilter, CryptFilter};
use lopdf::xref::XrefType;
use lopdf::{Dictionary, Document, EncryptionState, EncryptionVersion, Object, Permissions};
use rand::RngExt as _;

use crate::{Cipher, Protection, SignError};

/// A freshly encrypted PDF with what is needed to append objects to it without parsing
/// it again: the document as written (objects already encrypted) and the file key.
pub(crate) struct Encrypted {
    pub bytes: Vec<u8>,
    pub doc: Document,
    pub state: EncryptionState,
}

/// Encrypts a plain PDF with the passwords and cipher of `protection` (no signature).
pub fn encrypt(pdf: &[u8], protection: &Protection) -> Result<Vec<u8>, SignError> {
    encrypt_parsed(crate::revision::parse(pdf)?, protection).map(|e| e.bytes)
}

pub(crate) fn encrypt_parsed(
    mut doc: Document,
    protection: &Protection,
) -> Result<Encrypted, SignError> {
    if doc.is_encrypted() {
        return Err(SignError::AlreadyEncrypted);
    }
    check_passwords(protection)?;

    // The trailer is rewritten from scratch: a loaded one may carry `/Prev`, `/XRefStm` or
    // cross-reference stream entries that point into the original file's layout.
    let mut trailer = Dictionary::new();
    for key in [&b"Root"[..], b"Info"] {
        if let Ok(value) = doc.trailer.get(key) {
            trailer.set(key, value.clone());
        }
    }
    trailer.set("ID", file_id(&doc));
    doc.trailer = trailer;
    doc.reference_table.cross_reference_type = XrefType::CrossReferenceTable;

    // Printing and copying stay allowed: the password keeps strangers out, not the client.
    let permissions = Permissions::PRINTABLE
        | Permissions::PRINTABLE_IN_HIGH_QUALITY
        | Permissions::COPYABLE
        | Permissions::COPYABLE_FOR_ACCESSIBILITY;
    let key: [u8; 32] = rand::rng().random();
    let version = match protection.cipher {
        Cipher::Aes256 => {
            let filter: Arc<dyn CryptFilter> = Arc::new(Aes256CryptFilter);
            EncryptionVersion::V5 {
                encrypt_metadata: true,
                crypt_filters: BTreeMap::from([(b"StdCF".to_vec(), filter)]),
                file_encryption_key: &key,
                stream_filter: b"StdCF".to_vec(),
                string_filter: b"StdCF".to_vec(),
                owner_password: &protection.owner_password,
                user_password: &protection.user_password,
                permissions,
            }
        }
        Cipher::Aes128 => {
            let filter: Arc<dyn CryptFilter> = Arc::new(Aes128CryptFilter);
            EncryptionVersion::V4 {
                document: &doc,
                encrypt_metadata: true,
                crypt_filters: BTreeMap::from([(b"StdCF".to_vec(), filter)]),
                stream_filter: b"StdCF".to_vec(),
                string_filter: b"StdCF".to_vec(),
                owner_password: &protection.owner_password,
                user_password: &protection.user_password,
                permissions,
            }
        }
    };
    let state =
        EncryptionState::try_from(version).map_err(|source| SignError::PasswordRejected {
            cipher: protection.cipher,
            source,
        })?;
    doc.encrypt(&state).map_err(SignError::Encrypt)?;
    // R6 is PDF 2.0; AES-128 crypt filters arrived in PDF 1.6.
    let min_version = match protection.cipher {
        Cipher::Aes256 => "2.0",
        Cipher::Aes128 => "1.6",
    };
    if doc.version.as_str() < min_version {
        doc.version = min_version.to_string();
    }

    let mut bytes = Vec::with_capacity(doc_size_hint(&doc));
    doc.save_to(&mut bytes)
        .map_err(|e| SignError::Encrypt(e.into()))?;
    Ok(Encrypted { bytes, doc, state })
}

fn check_passwords(protection: &Protection) -> Result<(), SignError> {
    if protection.user_password.is_empty() {
        return Err(SignError::Password {
            which: "user",
            cipher: protection.cipher,
            reason: "it is empty, so the file would open without one".into(),
        });
    }
    if protection.owner_password.is_empty() {
        return Err(SignError::Password {
            which: "owner",
            cipher: protection.cipher,
            reason: "it is empty".into(),
        });
    }
    // Revision 4 hashes PDFDocEncoding bytes; anything outside printable ASCII would be
    // encoded differently by different readers (or dropped), so it is refused outright.
    if protection.cipher == Cipher::Aes128 {
        for (which, password) in [
            ("user", &protection.user_password),
            ("owner", &protection.owner_password),
        ] {
            if !password.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                return Err(SignError::Password {
                    which,
                    cipher: protection.cipher,
                    reason: "only printable ASCII characters are allowed with AES-128".into(),
                });
            }
        }
    }
    Ok(())
}

/// The document's `/ID`, or a random one: revision 4 keys depend on it and readers expect it.
fn file_id(doc: &Document) -> Object {
    match doc.trailer.get(b"ID") {
        Ok(id @ Object::Array(parts)) if parts.len() == 2 => id.clone(),
        _ => {
            let id: [u8; 16] = rand::rng().random();
            Object::Array(vec![
                Object::String(id.to_vec(), lopdf::StringFormat::Hexadecimal),
                Object::String(id.to_vec(), lopdf::StringFormat::Hexadecimal),
            ])
        }
    }
}

fn doc_size_hint(doc: &Document) -> usize {
    doc.objects
        .values()
        .map(|o| match o {
            Object::Stream(s) => s.content.len() + 200,
            _ => 100,
        })
        .sum::<usize>()
        + 16 * 1024
}
