//! The CMS `SignedData` that goes into a signature's `/Contents`: detached, over the
//! SHA-256 digest of the signed byte ranges, RSA PKCS#1 v1.5.

use std::time::SystemTime;

use cms::cert::{CertificateChoices, IssuerAndSerialNumber};
use cms::content_info::{CmsVersion, ContentInfo};
use cms::signed_data::{
    CertificateSet, EncapsulatedContentInfo, SignedData, SignerIdentifier, SignerInfo, SignerInfos,
};
use der::asn1::{OctetString, SetOfVec, UtcTime};
use der::oid::ObjectIdentifier;
use der::{Any, Encode, Sequence};
use rsa::pkcs1v15::SigningKey;
use rsa::RsaPrivateKey;
use sha2::{Digest, Sha256};
use x509_cert::attr::Attribute;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::AlgorithmIdentifierOwned;
use x509_cert::Certificate;

use crate::{SignError, SubFilter};

const ID_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.1");
const ID_SIGNED_DATA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.7.2");
const ID_CONTENT_TYPE: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.3");
const ID_MESSAGE_DIGEST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.4");
const ID_SIGNING_TIME: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.5");
const ID_AA_SIGNING_CERTIFICATE_V2: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.2.47");
const ID_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.4.2.1");
const RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// RFC 5035 `SigningCertificateV2` (the policies field is not used).
#[derive(Sequence)]
struct SigningCertificateV2 {
    certs: Vec<EssCertIdV2>,
}

/// RFC 5035 `ESSCertIDv2`; the hash algorithm is left at its default, SHA-256.
#[derive(Sequence)]
struct EssCertIdV2 {
    cert_hash: OctetString,
    issuer_serial: IssuerSerial,
}

#[derive(Sequence)]
struct IssuerSerial {
    issuer: Vec<GeneralName>,
    serial_number: SerialNumber,
}

/// A signing key with its certificate chain, ready to sign digests.
pub(crate) struct CmsSigner {
    key: SigningKey<Sha256>,
    /// Leaf first.
    chain: Vec<Certificate>,
    signing_certificate_v2: Attribute,
    sub_filter: SubFilter,
    /// Upper bound of the DER length of any signature this signer makes.
    max_len: usize,
}

impl CmsSigner {
    pub fn new(
        key: RsaPrivateKey,
        chain: Vec<Certificate>,
        sub_filter: SubFilter,
    ) -> Result<Self, SignError> {
        let leaf = chain.first().ok_or(SignError::NoCertificate)?;
        let leaf_der = leaf.to_der().map_err(der_error)?;
        let ess = SigningCertificateV2 {
            certs: vec![EssCertIdV2 {
                cert_hash: OctetString::new(Sha256::digest(&leaf_der).to_vec())
                    .map_err(der_error)?,
                issuer_serial: IssuerSerial {
                    issuer: vec![GeneralName::DirectoryName(
                        leaf.tbs_certificate().issuer().clone(),
                    )],
                    serial_number: leaf.tbs_certificate().serial_number().clone(),
                },
            }],
        };
        let signing_certificate_v2 = attribute(ID_AA_SIGNING_CERTIFICATE_V2, &ess)?;
        let mut signer = CmsSigner {
            key: SigningKey::new(key),
            chain,
            signing_certificate_v2,
            sub_filter,
            max_len: 0,
        };
        // Every length in the structure is fixed for a given key and chain (the digest,
        // the signature and the UTCTime all have fixed sizes); the slack covers a signing
        // time encoded as GeneralizedTime after 2049.
        signer.max_len = signer.sign_digest(&[0; 32], SystemTime::now())?.len() + 16;
        Ok(signer)
    }

    pub fn max_len(&self) -> usize {
        self.max_len
    }

    pub fn sub_filter(&self) -> SubFilter {
        self.sub_filter
    }

    pub fn chain(&self) -> &[Certificate] {
        &self.chain
    }

    /// DER `ContentInfo` holding a detached `SignedData` over `digest` (SHA-256 of the
    /// signed content).
    pub fn sign_digest(&self, digest: &[u8; 32], time: SystemTime) -> Result<Vec<u8>, SignError> {
        let mut attrs = vec![
            attribute(ID_CONTENT_TYPE, &ID_DATA)?,
            attribute(
                ID_MESSAGE_DIGEST,
                &OctetString::new(digest.to_vec()).map_err(der_error)?,
            )?,
            self.signing_certificate_v2.clone(),
        ];
        // PAdES forbids the signing-time attribute (the time is `/M`); PKCS#7 signatures
        // conventionally carry it.
        if self.sub_filter == SubFilter::Pkcs7Detached {
            let time = UtcTime::from_system_time(time).map_err(der_error)?;
            attrs.push(attribute(ID_SIGNING_TIME, &time)?);
        }
        let signed_attrs = SetOfVec::try_from(attrs).map_err(der_error)?;
        // The signature covers the attributes' DER as a SET OF (RFC 5652, 5.4).
        let to_sign = signed_attrs.to_der().map_err(der_error)?;
        let signature = rsa::signature::RandomizedSigner::try_sign_with_rng(
            &self.key,
            &mut rand::rng(),
            &to_sign,
        )
        .map_err(SignError::Signature)?;
        let signature: Box<[u8]> = signature.into();

        let leaf = &self.chain[0];
        let sha256 = AlgorithmIdentifierOwned {
            oid: ID_SHA256,
            parameters: None,
        };
        let signer_info = SignerInfo {
            version: CmsVersion::V1,
            sid: SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
                issuer: leaf.tbs_certificate().issuer().clone(),
                serial_number: leaf.tbs_certificate().serial_number().clone(),
            }),
            digest_alg: sha256.clone(),
            signed_attrs: Some(signed_attrs),
            signature_algorithm: AlgorithmIdentifierOwned {
                oid: RSA_ENCRYPTION,
                parameters: Some(Any::null()),
            },
            signature: OctetString::new(signature.into_vec()).map_err(der_error)?,
            unsigned_attrs: None,
        };
        let certificates = CertificateSet::try_from(
            self.chain
                .iter()
                .cloned()
                .map(CertificateChoices::Certificate)
                .collect::<Vec<_>>(),
        )
        .map_err(der_error)?;
        let signed_data = SignedData {
            version: CmsVersion::V1,
            digest_algorithms: SetOfVec::try_from(vec![sha256]).map_err(der_error)?,
            // Detached: the content type is id-data with no content (pyHanko insists on it).
            encap_content_info: EncapsulatedContentInfo {
                econtent_type: ID_DATA,
                econtent: None,
            },
            certificates: Some(certificates),
            crls: None,
            signer_infos: SignerInfos::try_from(vec![signer_info]).map_err(der_error)?,
        };
        ContentInfo {
            content_type: ID_SIGNED_DATA,
            content: Any::encode_from(&signed_data).map_err(der_error)?,
        }
        .to_der()
        .map_err(der_error)
    }
}

fn attribute<T: der::Tagged + der::EncodeValue>(
    oid: ObjectIdentifier,
    value: &T,
) -> Result<Attribute, SignError> {
    Ok(Attribute {
        oid,
        values: SetOfVec::try_from(vec![Any::encode_from(value).map_err(der_error)?])
            .map_err(der_error)?,
    })
}

fn der_error(e: der::Error) -> SignError {
    SignError::SignatureEncoding(e)
}
