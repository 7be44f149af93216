//! The sshd fixture starts a real OpenSSH server that OpenSSH's own sftp client logs
//! into with the fixture's key, checking the host key against the fixture's known_hosts,
//! and that comes back on the same port after a kill.

use std::path::Path;
use std::process::Command;

use tranche_test_support::Sshd;

/// Run an `sftp -b` batch as OpenSSH's client would, trusting only `known_hosts`.
fn sftp(sshd: &Sshd, key: &Path, known_hosts: &Path, batch: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("batch");
    std::fs::write(&file, batch).unwrap();
    Command::new("sftp")
        .arg("-i")
        .arg(key)
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .args(["-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"])
        .args(["-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10"])
        .args(["-P", &sshd.port().to_string(), "-b"])
        .arg(&file)
        .arg(format!("{}@127.0.0.1", sshd.user()))
        .output()
        .expect("run sftp (openssh-client)")
}

#[test]
fn openssh_uploads_with_the_fixture_key_and_survives_a_restart() {
    let Some(sshd) = Sshd::start() else { return };
    let remote = sshd.remote_dir();
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("PAY.ach");
    std::fs::write(&file, b"101 test").unwrap();
    let put = format!("put {} {}/PAY.ach\n", file.display(), remote.display());

    let out = sftp(&sshd, &sshd.client_key(), &sshd.known_hosts(), &put);
    assert!(
        out.status.success(),
        "sftp: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        sshd.log()
    );
    assert_eq!(std::fs::read(remote.join("PAY.ach")).unwrap(), b"101 test");

    // A key it was not given is refused, and so is a host key not in known_hosts.
    let stranger = sshd.new_key("stranger");
    let out = sftp(&sshd, &stranger, &sshd.known_hosts(), &put);
    assert!(!out.status.success(), "a stranger's key was accepted");
    let empty = local.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let out = sftp(&sshd, &sshd.client_key(), &empty, &put);
    assert!(!out.status.success(), "an unknown host key was accepted");

    sshd.kill();
    let out = sftp(&sshd, &sshd.client_key(), &sshd.known_hosts(), &put);
    assert!(!out.status.success(), "it is down");
    sshd.restart();
    let out = sftp(&sshd, &sshd.client_key(), &sshd.known_hosts(), &put);
    assert!(
        out.status.success(),
        "after a restart: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sshd.host_key_fingerprint().starts_with("SHA256:"));
    assert!(std::fs::read_to_string(sshd.known_hosts())
        .unwrap()
        .starts_with(&format!("[127.0.0.1]:{} ssh-ed25519 ", sshd.port())));
}
