//! The signing identities against the external verifiers (the conformance suite for the
//! demo identity and an OpenSSL-made one), and the API's other promises.

use std::path::Path;
use std::process::Command;

use tranche_sign::conformance::{
    exercise, samples, verifier_available, OWNER_PASSWORD, TYPST_NOTE, USER_PASSWORD,
};
use tranche_sign::{
    encrypt, Cipher, Pkcs12Signer, Protection, SignError, SignatureInfo, Signer, SubFilter,
    DEMO_SUBJECT_CN,
};

fn info() -> SignatureInfo {
    SignatureInfo {
        reason: "Contract note".into(),
        location: "Mumbai".into(),
        contact: Some("Compliance officer".into()),
    }
}

/// A self-signed RSA key and certificate made by `openssl req -x509`, exported with
/// `openssl pkcs12 -export`; the password goes through the environment.
fn openssl_identity(dir: &Path, bits: u32, password: &str) -> (Vec<u8>, String) {
    let key = dir.join("key.pem");
    let cert = dir.join("cert.pem");
    let p12 = dir.join("identity.p12");
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            &format!("rsa:{bits}"),
            "-nodes",
            "-days",
            "30",
        ])
        .args(["-subj", "/CN=Test Broker Signing/O=Test Broker Ltd/C=IN"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("running openssl req");
    assert!(status.status.success(), "openssl req: {status:?}");
    let status = Command::new("openssl")
        .args(["pkcs12", "-export", "-passout", "env:P12_PASSWORD"])
        .env("P12_PASSWORD", password)
        .arg("-inkey")
        .arg(&key)
        .arg("-in")
        .arg(&cert)
        .arg("-out")
        .arg(&p12)
        .output()
        .expect("running openssl pkcs12");
    assert!(status.status.success(), "openssl pkcs12: {status:?}");
    (
        std::fs::read(&p12).expect("reading the PKCS#12 file"),
        std::fs::read_to_string(&cert).expect("reading the certificate"),
    )
}

#[test]
fn demo_identity_passes_the_conformance_suite() {
    let signer = Pkcs12Signer::demo(info()).expect("demo identity");
    exercise(&signer, &signer.certificate_pem());
}

#[test]
fn openssl_pkcs12_identity_passes_the_conformance_suite() {
    if !verifier_available("openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (p12, cert_pem) = openssl_identity(dir.path(), 2048, "p12-Secret");
    let signer = Pkcs12Signer::from_pkcs12(&p12, "p12-Secret", info()).expect("reading it");
    assert_eq!(
        signer.certificate_pem().trim(),
        cert_pem.trim(),
        "the signer's certificate is the one in the PKCS#12 file"
    );
    exercise(&signer, &cert_pem);
}

fn protection(cipher: Cipher) -> Protection {
    Protection {
        user_password: USER_PASSWORD.into(),
        owner_password: OWNER_PASSWORD.into(),
        cipher,
    }
}

fn pdfsig(file: &Path, password: Option<&str>) -> String {
    let mut command = Command::new("pdfsig");
    if let Some(password) = password {
        command.args(["-upw", password]);
    }
    let out = command.arg(file).output().expect("running pdfsig");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn pyhanko_validate(file: &Path, password: Option<&str>, trust: &Path) -> (bool, String) {
    let mut command = Command::new("pyhanko");
    command
        .args(["sign", "validate", "--trust-replace", "--trust"])
        .arg(trust);
    if let Some(password) = password {
        command.args(["--password", password]);
    }
    let out = command.arg(file).output().expect("running pyhanko");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn sign_only_appends_a_valid_signature_to_plain_pdfs_in_their_xref_format() {
    let signer = Pkcs12Signer::demo(info()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trust = dir.path().join("trust.pem");
    std::fs::write(&trust, signer.certificate_pem()).unwrap();
    for (name, pdf) in samples() {
        let signed = signer.sign(&pdf).unwrap();
        assert_eq!(
            &signed[..pdf.len()],
            &pdf[..],
            "{name}: the original bytes are kept"
        );
        let update = String::from_utf8_lossy(&signed[pdf.len()..]);
        let original_uses_xref_stream = !String::from_utf8_lossy(&pdf).contains("\ntrailer");
        assert_eq!(
            update.contains("/Type/XRef"),
            original_uses_xref_stream,
            "{name}: the update's cross-reference section is of the original's kind"
        );
        let file = dir.path().join(format!("{name}-signed.pdf"));
        std::fs::write(&file, &signed).unwrap();
        if verifier_available("pdfsig") {
            let out = pdfsig(&file, None);
            assert!(
                out.contains("Signature is Valid.") && out.contains("Total document signed"),
                "{name}: {out}"
            );
        }
        if verifier_available("qpdf") {
            let out = Command::new("qpdf")
                .arg("--check")
                .arg(&file)
                .output()
                .unwrap();
            assert!(out.status.success(), "{name}: {out:?}");
        }
        if name == "typst-note" && verifier_available("pyhanko") {
            let (ok, out) = pyhanko_validate(&file, None, &trust);
            assert!(ok && out.contains(":INTACT:TRUSTED"), "{name}: {out}");
        }
    }
}

#[test]
fn pkcs7_detached_signatures_verify_too() {
    let signer = Pkcs12Signer::demo(info())
        .unwrap()
        .with_sub_filter(SubFilter::Pkcs7Detached)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trust = dir.path().join("trust.pem");
    std::fs::write(&trust, signer.certificate_pem()).unwrap();
    let file = dir.path().join("pkcs7.pdf");
    std::fs::write(
        &file,
        signer
            .protect(TYPST_NOTE, &protection(Cipher::Aes256))
            .unwrap(),
    )
    .unwrap();
    if verifier_available("pdfsig") {
        let out = pdfsig(&file, Some(USER_PASSWORD));
        assert!(
            out.contains("Signature Type: adbe.pkcs7.detached")
                && out.contains("Signature is Valid.")
                && out.contains("Total document signed"),
            "{out}"
        );
    }
    if verifier_available("pyhanko") {
        let (ok, out) = pyhanko_validate(&file, Some(USER_PASSWORD), &trust);
        assert!(ok && out.contains(":INTACT:TRUSTED"), "{out}");
    }
}

#[test]
fn encrypt_only_needs_the_password_and_carries_no_signature() {
    let dir = tempfile::tempdir().unwrap();
    for cipher in [Cipher::Aes256, Cipher::Aes128] {
        let encrypted = encrypt(TYPST_NOTE, &protection(cipher)).unwrap();
        let file = dir.path().join(format!("r{}.pdf", cipher.revision()));
        std::fs::write(&file, &encrypted).unwrap();
        if verifier_available("qpdf") {
            let out = Command::new("qpdf")
                .args(["--show-encryption", &format!("--password={USER_PASSWORD}")])
                .arg(&file)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{out:?}");
            assert!(
                text.contains(&format!("R = {}", cipher.revision())),
                "{text}"
            );
            let without = Command::new("qpdf")
                .arg("--check")
                .arg(&file)
                .output()
                .unwrap();
            assert!(!without.status.success(), "opened without a password");
        }
        if verifier_available("pdfsig") {
            let out = pdfsig(&file, Some(USER_PASSWORD));
            assert!(out.contains("does not contain any signatures"), "{out}");
        }
    }
}

#[test]
fn demo_identity_is_written_once_and_reused_and_openssl_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let first = Pkcs12Signer::demo_in(dir.path(), "demo-Pass", info()).unwrap();
    let pem = std::fs::read_to_string(dir.path().join("demo-signer.pem")).unwrap();
    assert_eq!(pem, first.certificate_pem());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |name: &str| {
            std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("demo-signer.p12"), 0o600, "the key store is private");
        assert_eq!(mode("demo-signer.pem"), 0o644, "the certificate is public");
    }
    let second = Pkcs12Signer::demo_in(dir.path(), "demo-Pass", info()).unwrap();
    assert_eq!(
        second.certificate_pem(),
        first.certificate_pem(),
        "reused, not regenerated"
    );
    assert!(matches!(
        Pkcs12Signer::demo_in(dir.path(), "wrong", info()),
        Err(SignError::Pkcs12Password)
    ));
    if verifier_available("openssl") {
        let out = Command::new("openssl")
            .args(["pkcs12", "-nokeys", "-passin", "env:P12_PASSWORD", "-in"])
            .arg(dir.path().join("demo-signer.p12"))
            .env("P12_PASSWORD", "demo-Pass")
            .output()
            .unwrap();
        assert!(out.status.success(), "openssl cannot read it: {out:?}");
        let subject = Command::new("openssl")
            .args(["x509", "-noout", "-subject", "-nameopt", "utf8", "-in"])
            .arg(dir.path().join("demo-signer.pem"))
            .output()
            .unwrap();
        let subject = String::from_utf8_lossy(&subject.stdout).to_string();
        assert!(subject.contains(DEMO_SUBJECT_CN), "{subject}");
    }
}

#[test]
fn errors_are_clear_and_never_contain_a_password() {
    let signer = Pkcs12Signer::demo(info()).unwrap();
    let p12 = signer.to_pkcs12("right-Pass").unwrap();
    let err = Pkcs12Signer::from_pkcs12(&p12, "wrong-Pass", info()).unwrap_err();
    assert!(matches!(err, SignError::Pkcs12Password), "{err}");
    assert!(!err.to_string().contains("wrong-Pass"));
    assert!(Pkcs12Signer::from_pkcs12(&p12, "right-Pass", info()).is_ok());
    assert!(matches!(
        Pkcs12Signer::from_pkcs12(b"not a pkcs12 file", "x", info()),
        Err(SignError::Pkcs12(_))
    ));

    let protected = signer
        .protect(TYPST_NOTE, &protection(Cipher::Aes256))
        .unwrap();
    let err = signer
        .protect(&protected, &protection(Cipher::Aes256))
        .unwrap_err();
    assert!(matches!(err, SignError::AlreadyEncrypted), "{err}");
    assert!(matches!(
        signer.protect(b"%PDF-1.7\nnot really", &protection(Cipher::Aes256)),
        Err(SignError::Pdf(_))
    ));

    let mut empty = protection(Cipher::Aes256);
    empty.user_password.clear();
    let err = signer.protect(TYPST_NOTE, &empty).unwrap_err();
    assert!(
        matches!(err, SignError::Password { which: "user", .. }),
        "{err}"
    );
    let mut non_ascii = protection(Cipher::Aes128);
    non_ascii.owner_password = "pässwörd-Secret".into();
    let err = signer.protect(TYPST_NOTE, &non_ascii).unwrap_err();
    assert!(
        matches!(err, SignError::Password { which: "owner", .. }),
        "{err}"
    );
    assert!(!err.to_string().contains("pässwörd"), "{err}");
    // Unicode passwords are fine with AES-256 (SASLprep).
    let mut unicode = protection(Cipher::Aes256);
    unicode.owner_password = "pässwörd-Secret".into();
    assert!(signer.protect(TYPST_NOTE, &unicode).is_ok());

    let debug = format!("{:?} {:?}", protection(Cipher::Aes256), signer);
    assert!(
        !debug.contains(USER_PASSWORD) && !debug.contains(OWNER_PASSWORD),
        "{debug}"
    );

    if verifier_available("openssl") {
        let dir = tempfile::tempdir().unwrap();
        let (weak, _) = openssl_identity(dir.path(), 1024, "weak-Pass");
        let err = Pkcs12Signer::from_pkcs12(&weak, "weak-Pass", info()).unwrap_err();
        assert!(
            matches!(err, SignError::UnsupportedKey(ref m) if m.contains("1024")),
            "{err}"
        );
    }
}

#[test]
fn signers_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + ?Sized>() {}
    assert_send_sync::<dyn Signer>();
    assert_send_sync::<Pkcs12Signer>();
    let signer: std::sync::Arc<dyn Signer> =
        std::sync::Arc::new(Pkcs12Signer::demo(info()).unwrap());
    let outputs: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let signer = signer.clone();
                scope.spawn(move || {
                    signer
                        .protect(TYPST_NOTE, &protection(Cipher::Aes256))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // A fresh file key and IVs every time.
    assert_ne!(outputs[0], outputs[1]);
    assert_ne!(outputs[1], outputs[2]);
}
