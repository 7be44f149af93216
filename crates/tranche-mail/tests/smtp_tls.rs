//! STARTTLS, implicit TLS and AUTH against aiosmtpd (tests/smtp_server/tls_auth_server.py)
//! with a certificate from a CA made for the test.

use crate::smtp_server;

use std::path::{Path, PathBuf};
use std::time::Duration;

use smtp_server::Aiosmtpd;
use tranche_mail::{conformance, MailError, Mailer, SmtpConfig, SmtpMailer};

const USER: &str = "notes@broker.example";
const PASSWORD: &str = "correct horse battery staple";

struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// A CA and a server certificate for 127.0.0.1 signed by it.
fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let write = |name: &str, text: String| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    Pki {
        ca: write("ca.pem", ca_cert.pem()),
        cert: write("cert.pem", cert.pem()),
        key: write("key.pem", key.serialize_pem()),
        _dir: dir,
    }
}

fn mailer(url: String, password: &str) -> Result<SmtpMailer, MailError> {
    // The password travels as a config value (from the environment in production).
    let config = SmtpConfig::from_vars(url, |name| {
        (name == SmtpConfig::PASSWORD_VAR).then(|| password.to_string())
    })?;
    Ok(SmtpMailer::new(SmtpConfig {
        max_attempts: 2,
        timeout: Duration::from_secs(10),
        ..config
    })?
    .with_retry_backoff(Duration::from_millis(10)))
}

fn url(scheme: &str, port: u16, query: &str, ca: &Path) -> String {
    let user = USER.replace('@', "%40");
    let sep = if query.is_empty() { "?" } else { "&" };
    format!(
        "{scheme}://{user}@127.0.0.1:{port}{query}{sep}ca={}",
        ca.display()
    )
}

#[tokio::test]
async fn starttls_with_auth_passes_the_suite() {
    let pki = pki();
    let Some(server) = Aiosmtpd::with_tls("starttls", &pki.cert, &pki.key, USER, PASSWORD) else {
        return;
    };
    let smtp = mailer(url("smtp", server.port, "?tls=starttls", &pki.ca), PASSWORD).unwrap();
    conformance::exercise(&smtp, &|id| server.read_back(id)).await;
}

#[tokio::test]
async fn implicit_tls_with_auth_delivers() {
    let pki = pki();
    let Some(server) = Aiosmtpd::with_tls("implicit", &pki.cert, &pki.key, USER, PASSWORD) else {
        return;
    };
    let smtp = mailer(url("smtps", server.port, "", &pki.ca), PASSWORD).unwrap();
    let mail = conformance::sample_mail("CN-1@broker.example", "client@client.example", 150_000);
    smtp.send(&mail).await.unwrap();
    assert!(server.read_back("CN-1@broker.example").is_some());
}

#[tokio::test]
async fn a_wrong_password_is_permanent_and_not_echoed() {
    let pki = pki();
    let Some(server) = Aiosmtpd::with_tls("starttls", &pki.cert, &pki.key, USER, PASSWORD) else {
        return;
    };
    let smtp = mailer(
        url("smtp", server.port, "?tls=starttls", &pki.ca),
        "wrong-password",
    )
    .unwrap();
    match smtp
        .send(&conformance::sample_mail(
            "CN-1@broker.example",
            "c@client.example",
            10,
        ))
        .await
    {
        Err(MailError::Permanent(m)) => {
            assert!(m.starts_with("535"), "{m}");
            assert!(!m.contains("wrong-password") && !m.contains(USER), "{m}");
        }
        other => panic!("expected Permanent, got {other:?}"),
    }
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let pki = pki();
    let Some(server) = Aiosmtpd::with_tls("starttls", &pki.cert, &pki.key, USER, PASSWORD) else {
        return;
    };
    let plain_url = format!(
        "smtp://{}@127.0.0.1:{}?tls=starttls",
        USER.replace('@', "%40"),
        server.port
    );
    let smtp = mailer(plain_url, PASSWORD).unwrap();
    let err = smtp
        .send(&conformance::sample_mail(
            "CN-1@broker.example",
            "c@client.example",
            10,
        ))
        .await
        .unwrap_err();
    assert!(
        err.is_temporary() && err.to_string().contains("certificate"),
        "{err}"
    );
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn starttls_required_but_not_offered_is_permanent() {
    let Some(server) = Aiosmtpd::start() else {
        return;
    };
    let smtp = SmtpMailer::new(SmtpConfig::new(format!(
        "smtp://127.0.0.1:{}?tls=starttls",
        server.port
    )))
    .unwrap();
    let err = smtp
        .send(&conformance::sample_mail(
            "CN-1@broker.example",
            "c@client.example",
            10,
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, MailError::Permanent(m) if m.contains("STARTTLS")),
        "{err}"
    );
    assert!(server.messages().is_empty());
}
