//! SFTP against a real OpenSSH server on loopback: the conformance suite, where files
//! land, refused keys and host keys, and a server killed and restarted.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tranche_ach_delivery::{
    conformance, sha256_hex, Delivery, DeliveryError, HostKeyProblem, HostKeyRefusal, Sftp,
    SftpTarget,
};
use tranche_test_support::Sshd;

fn target(sshd: &Sshd, remote_dir: &Path) -> SftpTarget {
    SftpTarget {
        host: "127.0.0.1".into(),
        port: sshd.port(),
        user: sshd.user().into(),
        key_file: sshd.client_key(),
        known_hosts: sshd.known_hosts(),
        remote_dir: remote_dir.display().to_string(),
    }
}

async fn connect(sshd: &Sshd, remote_dir: &Path) -> Sftp {
    Sftp::connect(target(sshd, remote_dir))
        .await
        .unwrap_or_else(|e| panic!("connecting: {e:?}\nsshd log:\n{}", sshd.log()))
}

/// A known_hosts file in its own directory holding `lines`.
fn known_hosts(lines: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("known_hosts");
    std::fs::write(&path, lines).unwrap();
    (dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sftp_passes_the_suite() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir();
    let sftp = connect(&sshd, &remote).await;
    conformance::exercise(&sftp, &remote).await;
}

#[tokio::test]
async fn files_land_in_the_remote_directory_as_sent() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir();
    let sftp = connect(&sshd, &remote).await;
    assert_eq!(
        sftp.location(),
        format!(
            "sftp://{}@127.0.0.1:{}{}",
            sshd.user(),
            sshd.port(),
            remote.display()
        )
    );
    let bytes = conformance::sample_file(9, 9_400);
    sftp.deliver("ACH-1.ach", &bytes).await.unwrap();
    assert_eq!(std::fs::read(remote.join("ACH-1.ach")).unwrap(), bytes);
    let names: Vec<_> = std::fs::read_dir(&remote)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["ACH-1.ach"], "only the file, no temporary");
    // A trailing slash names the same directory.
    let mut t = target(&sshd, &remote);
    t.remote_dir.push('/');
    let again = Sftp::connect(t).await.unwrap();
    assert_eq!(again.location(), sftp.location());
    assert_eq!(
        again.find("ACH-1.ach").await.unwrap(),
        Some(sha256_hex(&bytes))
    );
    sftp.close().await;
    // Closed, it opens a connection again when used.
    assert_eq!(
        sftp.find("ACH-1.ach").await.unwrap(),
        Some(sha256_hex(&bytes))
    );
}

#[tokio::test]
async fn a_wrong_client_key_is_refused_for_good_naming_the_key_not_showing_it() {
    let Some(sshd) = Sshd::start() else { return };
    let stranger = sshd.new_key("stranger");
    let mut t = target(&sshd, &sshd.remote_dir());
    t.key_file = stranger.clone();
    let err = Sftp::connect(t).await.unwrap_err();
    assert!(
        matches!(err, DeliveryError::AuthRefused { .. }),
        "expected AuthRefused, got {err:?}"
    );
    assert!(!err.is_transient());
    let message = err.to_string();
    assert!(
        message.contains(&stranger.display().to_string()),
        "{message}"
    );
    assert!(message.contains(sshd.user()), "{message}");
    let key = std::fs::read_to_string(&stranger).unwrap();
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(
            !format!("{err:?}").contains(line),
            "the key leaked: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_key_others_can_read_is_refused_before_connecting() {
    let Some(sshd) = Sshd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id");
    std::fs::copy(sshd.client_key(), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut t = target(&sshd, &sshd.remote_dir());
    t.key_file = key.clone();
    sshd.kill(); // nothing is needed from the server to refuse it
    let err = Sftp::connect(t).await.unwrap_err();
    assert!(
        matches!(err, DeliveryError::KeyFile { .. }),
        "expected KeyFile, got {err:?}"
    );
    assert!(!err.is_transient());
    let message = err.to_string();
    assert!(message.contains(&key.display().to_string()), "{message}");
    assert!(message.contains("640"), "{message}");
}

#[tokio::test]
async fn an_unknown_host_key_is_refused_naming_host_and_fingerprint() {
    let Some(sshd) = Sshd::start() else { return };
    let host_key = std::fs::read_to_string(sshd.host_public_key()).unwrap();
    // The right key, but for another port and another host: unknown here.
    let (_d, kh) = known_hosts(&format!(
        "[127.0.0.1]:{} {host_key}bank.example {host_key}",
        sshd.port() + 1
    ));
    let mut t = target(&sshd, &sshd.remote_dir());
    t.known_hosts = kh.clone();
    let err = Sftp::connect(t).await.unwrap_err();
    let DeliveryError::HostKeyRefused(refusal) = &err else {
        panic!("expected HostKeyRefused, got {err:?}")
    };
    let HostKeyRefusal {
        host,
        fingerprint,
        problem,
        ..
    } = &**refusal;
    assert_eq!(host, &format!("[127.0.0.1]:{}", sshd.port()));
    assert_eq!(fingerprint, &sshd.host_key_fingerprint());
    assert_eq!(problem, &HostKeyProblem::Unknown);
    assert!(!err.is_transient());
    let message = err.to_string();
    assert!(message.contains(&sshd.host_key_fingerprint()), "{message}");
    assert!(
        message.contains(&format!("[127.0.0.1]:{}", sshd.port())),
        "{message}"
    );
    assert!(message.contains(&kh.display().to_string()), "{message}");
    // Nothing was learnt: the file is as it was.
    assert_eq!(
        std::fs::read_to_string(&kh).unwrap(),
        format!(
            "[127.0.0.1]:{} {host_key}bank.example {host_key}",
            sshd.port() + 1
        )
    );
}

#[tokio::test]
async fn a_changed_host_key_is_refused_naming_the_line_it_contradicts() {
    let Some(sshd) = Sshd::start() else { return };
    let other = sshd.new_key("impostor");
    let other_pub = std::fs::read_to_string(other.with_extension("pub")).unwrap();
    let (_d, kh) = known_hosts(&format!(
        "# the bank\n[127.0.0.1]:{} {other_pub}",
        sshd.port()
    ));
    let mut t = target(&sshd, &sshd.remote_dir());
    t.known_hosts = kh;
    let err = Sftp::connect(t).await.unwrap_err();
    match &err {
        DeliveryError::HostKeyRefused(r) if r.problem == HostKeyProblem::Changed { line: 2 } => {
            assert_eq!(r.fingerprint, sshd.host_key_fingerprint())
        }
        other => panic!("expected HostKeyRefused(Changed at line 2), got {other:?}"),
    }
    assert!(!err.is_transient());
    assert!(err.to_string().contains("changed"), "{err}");
}

#[tokio::test]
async fn a_missing_known_hosts_file_is_refused() {
    let Some(sshd) = Sshd::start() else { return };
    let mut t = target(&sshd, &sshd.remote_dir());
    t.known_hosts = "/nonexistent/known_hosts".into();
    let err = Sftp::connect(t).await.unwrap_err();
    assert!(
        matches!(err, DeliveryError::KnownHosts { .. }),
        "expected KnownHosts, got {err:?}"
    );
    assert!(!err.is_transient());
    assert!(
        err.to_string().contains("/nonexistent/known_hosts"),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_remote_directory_fails_at_connect() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir().join("not-made");
    let err = Sftp::connect(target(&sshd, &remote)).await.unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("not-made"), "{err}");
}

#[tokio::test]
async fn a_server_that_is_down_is_a_transient_failure_naming_it() {
    let Some(sshd) = Sshd::start() else { return };
    sshd.kill();
    let t = target(&sshd, &sshd.remote_dir());
    let err = Sftp::connect(t).await.unwrap_err();
    assert!(
        matches!(err, DeliveryError::Connection { .. }),
        "expected Connection, got {err:?}"
    );
    assert!(err.is_transient());
    assert!(
        err.to_string()
            .contains(&format!("127.0.0.1:{}", sshd.port())),
        "{err}"
    );
}

#[tokio::test]
async fn a_bad_name_is_refused_without_the_server() {
    let Some(sshd) = Sshd::start() else { return };
    let sftp = connect(&sshd, &sshd.remote_dir()).await;
    sshd.kill();
    for bad in ["../x.ach", ".x", "a/b"] {
        let err = sftp.deliver(bad, b"101").await.unwrap_err();
        assert!(
            matches!(err, DeliveryError::BadName { .. }),
            "{bad:?}: expected BadName, got {err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_restarted_between_calls_is_reconnected_to_unnoticed() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir();
    let sftp = connect(&sshd, &remote).await;
    sftp.deliver("before.ach", b"101 before").await.unwrap();
    sshd.restart();
    // The session died with the server; the call reconnects and succeeds.
    sftp.deliver("after.ach", b"101 after").await.unwrap();
    assert_eq!(
        std::fs::read(remote.join("after.ach")).unwrap(),
        b"101 after"
    );
    assert_eq!(
        sftp.find("before.ach").await.unwrap(),
        Some(sha256_hex(b"101 before"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_upload_fails_transiently_then_the_retry_delivers() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir();
    let sftp = Arc::new(connect(&sshd, &remote).await);
    let bytes = Arc::new(conformance::sample_bytes(11, 64 * 1024 * 1024));
    // The upload races the kill: on a stalled machine it may finish first. Then it is
    // tried again under another name, a few times.
    for attempt in 0..5 {
        let name = format!("big-{attempt}.ach");
        let upload = {
            let (sftp, bytes, name) = (sftp.clone(), bytes.clone(), name.clone());
            tokio::spawn(async move { sftp.deliver(&name, &bytes).await })
        };
        // Wait until part of the file is on the server, then pull the plug.
        tranche_test_support::poll_until(
            "a partial upload on the server",
            Duration::from_secs(30),
            || upload.is_finished() || partial_upload(&remote, &name),
        )
        .await;
        sshd.kill();
        let result = upload.await.unwrap();
        let Err(err) = result else {
            sshd.restart();
            continue;
        };
        assert!(err.is_transient(), "{err:?}");
        assert!(err.to_string().contains(&name), "{err}");
        assert!(!remote.join(&name).exists(), "a partial file got its name");

        // In doubt: find says it is not there; the retry delivers it whole.
        sshd.restart();
        assert_eq!(sftp.find(&name).await.unwrap(), None);
        sftp.deliver(&name, &bytes).await.unwrap();
        assert_eq!(sftp.find(&name).await.unwrap(), Some(sha256_hex(&bytes)));
        assert!(std::fs::read(remote.join(&name)).unwrap() == *bytes);
        return;
    }
    panic!("every upload finished before the server could be killed");
}

/// Whether more than a megabyte of `name` is on the server under a temporary name.
fn partial_upload(remote: &Path, name: &str) -> bool {
    std::fs::read_dir(remote).unwrap().any(|e| {
        let e = e.unwrap();
        e.file_name()
            .to_string_lossy()
            .starts_with(&format!(".{name}."))
            && e.metadata().is_ok_and(|m| m.len() > 1024 * 1024)
    })
}

#[tokio::test]
async fn an_rsa_or_encrypted_key_is_refused_saying_why() {
    let Some(sshd) = Sshd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let keygen = |name: &str, args: &[&str]| {
        let path = dir.path().join(name);
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-C", name, "-f"])
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        path
    };
    for (key, expect) in [
        (keygen("rsa", &["-t", "rsa", "-b", "2048", "-N", ""]), "RSA"),
        (
            keygen("encrypted", &["-t", "ed25519", "-N", "a passphrase"]),
            "without a passphrase",
        ),
    ] {
        let mut t = target(&sshd, &sshd.remote_dir());
        t.key_file = key.clone();
        let err = Sftp::connect(t).await.unwrap_err();
        assert!(
            matches!(err, DeliveryError::KeyFile { .. }),
            "{}: expected KeyFile, got {err:?}",
            key.display()
        );
        assert!(!err.is_transient());
        assert!(err.to_string().contains(expect), "{err}");
    }
}

#[tokio::test]
async fn an_ecdsa_key_logs_in_too() {
    let Some(sshd) = Sshd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id_ecdsa");
    let out = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ecdsa", "-b", "256", "-N", "", "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    sshd.authorize(&key.with_extension("pub"));
    let remote = sshd.remote_dir();
    let mut t = target(&sshd, &remote);
    t.key_file = key;
    let sftp = Sftp::connect(t)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", sshd.log()));
    sftp.deliver("ecdsa.ach", b"101 ecdsa").await.unwrap();
    assert_eq!(
        std::fs::read(remote.join("ecdsa.ach")).unwrap(),
        b"101 ecdsa"
    );
}
