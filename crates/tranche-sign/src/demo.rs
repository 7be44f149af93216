//! A self-signed RSA-2048 identity that says in its name that it is a demo, for runs
//! without the broker's real signing key.

use std::str::FromStr;
use std::time::Duration;

use rsa::pkcs1v15::SigningKey;
use rsa::RsaPrivateKey;
use sha2::Sha256;
use x509_cert::builder::profile::BuilderProfile;
use x509_cert::builder::{Builder, CertificateBuilder};
use x509_cert::certificate::TbsCertificate;
use x509_cert::ext::pkix::{BasicConstraints, KeyUsage, KeyUsages, SubjectKeyIdentifier};
use x509_cert::ext::{Extension, ToExtension};
use x509_cert::name::Name;
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{SubjectPublicKeyInfoOwned, SubjectPublicKeyInfoRef};
use x509_cert::time::Validity;
use x509_cert::Certificate;

use crate::SignError;

/// Common name of the demo certificate: anyone inspecting a signature sees it is no
/// real broker's.
pub const DEMO_SUBJECT_CN: &str = "Tranche DEMO signer \u{2014} not a real certificate";

/// How long a demo certificate is valid: long enough to be written once and reused.
const DEMO_VALIDITY: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// An end-entity profile: self-issued, not a CA, for signing documents.
struct DemoSigner {
    subject: Name,
}

impl BuilderProfile for DemoSigner {
    fn get_issuer(&self, subject: &Name) -> Name {
        subject.clone()
    }

    fn get_subject(&self) -> Name {
        self.subject.clone()
    }

    fn build_extensions(
        &self,
        spk: SubjectPublicKeyInfoRef<'_>,
        _issuer_spk: SubjectPublicKeyInfoRef<'_>,
        tbs: &TbsCertificate,
    ) -> x509_cert::builder::Result<Vec<Extension>> {
        let mut extensions = Vec::new();
        let basic = BasicConstraints {
            ca: false,
            path_len_constraint: None,
        };
        extensions.push(basic.to_extension(tbs.subject(), &extensions)?);
        let usage = KeyUsage(KeyUsages::DigitalSignature | KeyUsages::NonRepudiation);
        extensions.push(usage.to_extension(tbs.subject(), &extensions)?);
        let ski = SubjectKeyIdentifier::try_from(spk)?;
        extensions.push(ski.to_extension(tbs.subject(), &extensions)?);
        Ok(extensions)
    }
}

/// A fresh RSA-2048 key and a self-signed certificate for it named [`DEMO_SUBJECT_CN`].
pub(crate) fn generate() -> Result<(RsaPrivateKey, Certificate), SignError> {
    let mut rng = rand::rng();
    let key = RsaPrivateKey::new(&mut rng, 2048).map_err(cert_error)?;
    let subject =
        Name::from_str(&format!("CN={DEMO_SUBJECT_CN},O=Tranche (demo)")).map_err(cert_error)?;
    let spki = SubjectPublicKeyInfoOwned::from_key(&key.to_public_key()).map_err(cert_error)?;
    let builder = CertificateBuilder::new(
        DemoSigner { subject },
        SerialNumber::generate(&mut rng),
        Validity::from_now(DEMO_VALIDITY).map_err(cert_error)?,
        spki,
    )
    .map_err(cert_error)?;
    let cert = builder
        .build::<_, rsa::pkcs1v15::Signature>(&SigningKey::<Sha256>::new(key.clone()))
        .map_err(cert_error)?;
    Ok((key, cert))
}

fn cert_error(e: impl std::error::Error + Send + Sync + 'static) -> SignError {
    SignError::Certificate(Box::new(e))
}
