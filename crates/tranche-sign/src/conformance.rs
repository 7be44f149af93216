//! The conformance suite every [`Signer`] must pass, judged by real external verifiers:
//! poppler's `pdfsig`, `qpdf` and pyHanko (`pyhanko sign validate`).
//!
//! [`exercise`] protects three inputs — a small lopdf-made PDF with a classic
//! cross-reference table, the same with cross-reference and object streams, and a real
//! Typst-rendered contract note — with AES-256 (R6) and AES-128 (R4), and checks that:
//! qpdf opens each file with the user and the owner password, reports the expected
//! revision and AES method, finds no error, and refuses to open it without a password;
//! pdfsig finds a valid signature covering the whole document; pyHanko finds it intact
//! and trusted against `trust_pem`. A byte flipped inside the signed range must be caught
//! by pdfsig and pyHanko (qpdf checks structure, which such a flip need not break). It also protects notes from several threads at once.
//!
//! A verifier that is not installed is skipped with a message, unless the environment
//! variable `CI` or `TRANCHE_REQUIRE_TOOLS=1` is set: then its absence fails the suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use lopdf::{dictionary, Document, Object, Stream};

use crate::{Cipher, Protection, Signer};

/// A contract note rendered by Typst 0.15 through `tranche-notes` (synthetic client).
pub const TYPST_NOTE: &[u8] = include_bytes!("../tests/fixtures/typst-note.pdf");

/// User password of the protected test files (the shape of a PAN).
pub const USER_PASSWORD: &str = "ABCDE1234F";
/// Owner password of the protected test files.
pub const OWNER_PASSWORD: &str = "owner-Secret-42";

/// The inputs [`exercise`] protects, by name.
pub fn samples() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("lopdf-xref-table", sample_pdf(false)),
        ("lopdf-xref-stream", sample_pdf(true)),
        ("typst-note", TYPST_NOTE.to_vec()),
    ]
}

/// A one-page PDF with a compressed content stream; with `modern`, written with object
/// streams and a cross-reference stream.
pub fn sample_pdf(modern: bool) -> Vec<u8> {
    let mut doc = Document::with_version("1.7");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
    });
    let text: String = (0..40)
        .map(|i| {
            format!(
                "BT /F1 12 Tf 72 {} Td (Contract note line {i}) Tj ET\n",
                800 - i * 18
            )
        })
        .collect();
    let mut content = Stream::new(dictionary! {}, text.into_bytes());
    content.compress().expect("compressing a small stream");
    let content_id = doc.add_object(content);
    let page_id = doc.add_object(dictionary! {
        "Type" => "Page",
        "Parent" => pages_id,
        "Contents" => content_id,
        "Resources" => dictionary! { "Font" => dictionary! { "F1" => font_id } },
        "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => vec![page_id.into()], "Count" => 1,
        }),
    );
    let catalog_id = doc.add_object(dictionary! {
        "Type" => "Catalog", "Pages" => pages_id, "Lang" => Object::string_literal("en-IN"),
    });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    if modern {
        doc.save_modern(&mut out)
    } else {
        doc.save_to(&mut out)
    }
    .expect("writing to a Vec cannot fail");
    out
}

/// Runs the suite against `signer`, whose certificate chains to `trust_pem`. Panics with
/// every failure found.
pub fn exercise(signer: &dyn Signer, trust_pem: &str) {
    let tools = Tools::find();
    let dir = tempfile::tempdir().expect("temporary directory");
    let trust = dir.path().join("trust.pem");
    std::fs::write(&trust, trust_pem).expect("writing the trust anchor");
    let mut checks: Vec<Check> = Vec::new();

    for (name, pdf) in samples() {
        for cipher in [Cipher::Aes256, Cipher::Aes128] {
            let protection = Protection {
                user_password: USER_PASSWORD.into(),
                owner_password: OWNER_PASSWORD.into(),
                cipher,
            };
            let protected = signer
                .protect(&pdf, &protection)
                .unwrap_or_else(|e| panic!("{name}, {cipher}: protect failed: {e}"));
            let file = dir
                .path()
                .join(format!("{name}-r{}.pdf", cipher.revision()));
            std::fs::write(&file, &protected).expect("writing a protected file");
            checks.push(Check::Intact {
                file: file.clone(),
                cipher,
                pyhanko: true,
            });

            let tampered = dir
                .path()
                .join(format!("{name}-r{}-tampered.pdf", cipher.revision()));
            let at = content_stream_byte(&pdf, &protected)
                .unwrap_or_else(|| panic!("{name}: no page content stream to tamper with"));
            let mut bytes = protected;
            bytes[at] ^= 0x01;
            std::fs::write(&tampered, &bytes).expect("writing a tampered file");
            checks.push(Check::Tampered {
                file: tampered,
                // pyHanko takes seconds per file; once per cipher is enough.
                pyhanko: name == "typst-note",
            });
        }
    }

    // Several threads at once, each with its own passwords.
    let concurrent: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                scope.spawn(move || {
                    let protection = Protection {
                        user_password: format!("ABCDE{i:04}F"),
                        owner_password: OWNER_PASSWORD.into(),
                        cipher: Cipher::Aes256,
                    };
                    (0..2)
                        .map(|_| signer.protect(TYPST_NOTE, &protection))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a protecting thread panicked"))
            .map(|r| r.unwrap_or_else(|e| panic!("concurrent protect failed: {e}")))
            .collect()
    });
    for (i, pdf) in concurrent.iter().enumerate() {
        let file = dir.path().join(format!("concurrent-{i}.pdf"));
        std::fs::write(&file, pdf).expect("writing a protected file");
        checks.push(Check::Concurrent {
            file,
            user_password: format!("ABCDE{:04}F", i / 2),
        });
    }

    let failures = run_all(&checks, &tools, &trust);
    assert!(
        failures.is_empty(),
        "{} conformance failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// One file and what the verifiers must say about it.
enum Check {
    Intact {
        file: PathBuf,
        cipher: Cipher,
        pyhanko: bool,
    },
    Tampered {
        file: PathBuf,
        pyhanko: bool,
    },
    Concurrent {
        file: PathBuf,
        user_password: String,
    },
}

/// Runs the checks on two threads (the verifiers are separate processes) and returns
/// the failures.
fn run_all(checks: &[Check], tools: &Tools, trust: &Path) -> Vec<String> {
    let next = Mutex::new(checks.iter());
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let Some(check) = next.lock().expect("queue lock").next() else {
                    break;
                };
                let found = run_one(check, tools, trust);
                failures.lock().expect("failure lock").extend(found);
            });
        }
    });
    failures.into_inner().expect("failure lock")
}

fn run_one(check: &Check, tools: &Tools, trust: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };
    match check {
        Check::Intact {
            file,
            cipher,
            pyhanko,
        } => {
            let f = file.display();
            if tools.qpdf {
                let out = run("qpdf", &["--check", &pw(USER_PASSWORD)], file);
                expect(
                    out.ok && out.text.contains("No syntax or stream encoding errors"),
                    format!("{f}: qpdf --check with the user password: {}", out.text),
                );
                let out = run("qpdf", &["--show-encryption", &pw(USER_PASSWORD)], file);
                let (revision, method) = match cipher {
                    Cipher::Aes256 => ("R = 6", "stream encryption method: AESv3"),
                    Cipher::Aes128 => ("R = 4", "stream encryption method: AESv2"),
                };
                expect(
                    out.ok
                        && out.text.contains(revision)
                        && out.text.contains(method)
                        && out.text.contains("Supplied password is user password"),
                    format!(
                        "{f}: qpdf --show-encryption: expected {revision}, {method}: {}",
                        out.text
                    ),
                );
                let out = run("qpdf", &["--show-encryption", &pw(OWNER_PASSWORD)], file);
                expect(
                    out.ok && out.text.contains("Supplied password is owner password"),
                    format!("{f}: qpdf with the owner password: {}", out.text),
                );
                let out = run("qpdf", &["--check"], file);
                expect(
                    !out.ok && out.text.contains("invalid password"),
                    format!("{f}: qpdf opened it without a password: {}", out.text),
                );
            }
            if tools.pdfsig {
                let out = run("pdfsig", &["-upw", USER_PASSWORD], file);
                expect(
                    signature_valid(&out.text),
                    format!("{f}: pdfsig: {}", out.text),
                );
            }
            if tools.pyhanko && *pyhanko {
                let out = pyhanko_validate(file, USER_PASSWORD, trust);
                expect(
                    out.ok && out.text.contains(":INTACT:TRUSTED"),
                    format!("{f}: pyhanko sign validate: {}", out.text),
                );
            }
        }
        Check::Tampered { file, pyhanko: py } => {
            let f = file.display();
            // qpdf is not asked: it checks structure, not signatures. A flipped ciphertext
            // byte garbles one AES block of the stream, which qpdf notices only when the
            // garbage happens to break the stream's filter or its tokens (CI saw it pass an
            // uncompressed sample), so only the signature verifiers must catch it.
            if tools.pdfsig {
                let out = run("pdfsig", &["-upw", USER_PASSWORD], file);
                expect(
                    !out.text.contains("Signature is Valid") && out.text.contains("Signature #1"),
                    format!("{f}: pdfsig missed the flipped byte: {}", out.text),
                );
            }
            if tools.pyhanko && *py {
                let out = pyhanko_validate(file, USER_PASSWORD, trust);
                expect(
                    !out.ok && out.text.contains("INVALID"),
                    format!("{f}: pyhanko missed the flipped byte: {}", out.text),
                );
            }
        }
        Check::Concurrent {
            file,
            user_password,
        } => {
            let f = file.display();
            if tools.qpdf {
                let out = run("qpdf", &["--check", &pw(user_password)], file);
                expect(out.ok, format!("{f}: qpdf --check: {}", out.text));
            }
            if tools.pdfsig {
                let out = run("pdfsig", &["-upw", user_password], file);
                expect(
                    signature_valid(&out.text),
                    format!("{f}: pdfsig: {}", out.text),
                );
            }
        }
    }
    failures
}

fn signature_valid(pdfsig: &str) -> bool {
    pdfsig.contains("Signature Validation: Signature is Valid.")
        && pdfsig.contains("Total document signed")
}

fn pw(password: &str) -> String {
    format!("--password={password}")
}

struct Output {
    ok: bool,
    text: String,
}

fn run(program: &str, args: &[&str], file: &Path) -> Output {
    let mut command = Command::new(program);
    command.args(args).arg(file);
    output(command)
}

fn pyhanko_validate(file: &Path, password: &str, trust: &Path) -> Output {
    let mut command = Command::new("pyhanko");
    command
        .args([
            "sign",
            "validate",
            "--trust-replace",
            "--password",
            password,
            "--trust",
        ])
        .arg(trust)
        .arg(file);
    output(command)
}

fn output(mut command: Command) -> Output {
    match command.output() {
        Ok(out) => Output {
            ok: out.status.success(),
            text: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        },
        Err(e) => Output {
            ok: false,
            text: format!("cannot run {:?}: {e}", command.get_program()),
        },
    }
}

/// Which verifiers are installed.
struct Tools {
    qpdf: bool,
    pdfsig: bool,
    pyhanko: bool,
}

impl Tools {
    fn find() -> Tools {
        Tools {
            qpdf: verifier_available("qpdf"),
            pdfsig: verifier_available("pdfsig"),
            pyhanko: verifier_available("pyhanko"),
        }
    }
}

/// Whether `program` (`qpdf`, `pdfsig`, `pyhanko` or `openssl`) can be run. When it
/// cannot, this says so on stderr — or panics if `CI` or `TRANCHE_REQUIRE_TOOLS=1` is set.
pub fn verifier_available(program: &str) -> bool {
    let (version_flag, install) = match program {
        "qpdf" => ("--version", "apt-get install qpdf"),
        "pdfsig" => ("-v", "apt-get install poppler-utils"),
        "pyhanko" => (
            "--version",
            "pip install pyhanko pyhanko-certvalidator pyhanko-cli",
        ),
        "openssl" => ("version", "apt-get install openssl"),
        _ => ("--version", "install it"),
    };
    let found = Command::new(program)
        .arg(version_flag)
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let required = std::env::var_os("CI").is_some_and(|v| !v.is_empty())
            || std::env::var("TRANCHE_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{program} is required (CI or TRANCHE_REQUIRE_TOOLS=1 is set): {install}"
        );
        eprintln!("{program} is not installed, its checks are skipped ({install})");
    }
    found
}

/// A byte in the middle of the first page's (compressed) content stream in `protected`,
/// the output for the plain `pdf`. Flipping it breaks the signature's digest and, once
/// decrypted, the content stream, which `qpdf --check` parses.
pub fn content_stream_byte(pdf: &[u8], protected: &[u8]) -> Option<usize> {
    let doc = Document::load_mem(pdf).ok()?;
    let page_id = *doc.get_pages().values().next()?;
    let contents = doc.get_dictionary(page_id).ok()?.get(b"Contents").ok()?;
    let (id, generation) = match contents {
        Object::Reference(id) => *id,
        Object::Array(items) => items.first()?.as_reference().ok()?,
        _ => return None,
    };
    // The encrypted file keeps the object numbers; its body precedes the signature's update.
    let header = format!("\n{id} {generation} obj");
    let object = find(protected, header.as_bytes())?;
    let keyword = object + find(&protected[object..], b"stream")?;
    let dict = &protected[object..keyword];
    let data = match protected.get(keyword + 6..keyword + 8) {
        Some([b'\r', b'\n']) => keyword + 8,
        Some([b'\n', _]) => keyword + 7,
        _ => return None,
    };
    let at = find(dict, b"/Length")?;
    let digits: String = dict[at + 7..]
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| char::from(b))
        .collect();
    let length: usize = digits.parse().ok()?;
    (length >= 32).then_some(data + length / 2)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
