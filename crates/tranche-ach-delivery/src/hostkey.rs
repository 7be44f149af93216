//! Whether a server's host key is the one a known_hosts file trusts for it, by
//! OpenSSH's rules for the parts a bank connection uses: plain and `[host]:port`
//! names, `*`/`?` patterns and `!` negations, hashed names (`|1|salt|hash`), and
//! `@revoked`. `@cert-authority` lines are ignored: host certificates are refused.
//! Unknown keys are never learnt: a person adds the bank's key to the file.

use hmac::{Hmac, KeyInit, Mac};
use russh::keys::ssh_key::known_hosts::{Entry, HostPatterns, Marker};
use russh::keys::ssh_key::{Algorithm, PublicKey};
use sha1::Sha1;

use crate::HostKeyProblem;

/// The name a host is looked up by in known_hosts: `host` on port 22, `[host]:port`
/// elsewhere, lower-case (as `ssh` writes and matches it).
pub(crate) fn lookup_name(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    if port == 22 {
        host
    } else {
        format!("[{host}]:{port}")
    }
}

/// Whether `key` is trusted for `host` (a [`lookup_name`]) by the known_hosts `text`.
/// A key listed for the host is trusted unless some line revokes it; another key of
/// the same algorithm listed for the host means the key changed.
pub(crate) fn check(text: &str, host: &str, key: &PublicKey) -> Result<(), HostKeyProblem> {
    let mut trusted = false;
    let mut changed = None;
    for (line, entry) in entries(text) {
        if !matches_host(entry.host_patterns(), host) {
            continue;
        }
        let listed = entry.public_key();
        let same = listed.key_data() == key.key_data();
        match entry.marker() {
            Some(Marker::Revoked) if same => return Err(HostKeyProblem::Revoked { line }),
            Some(_) => {}
            None if same => trusted = true,
            None if listed.algorithm() == key.algorithm() => {
                changed.get_or_insert(line);
            }
            None => {}
        }
    }
    match (trusted, changed) {
        (true, _) => Ok(()),
        (false, Some(line)) => Err(HostKeyProblem::Changed { line }),
        (false, None) => Err(HostKeyProblem::Unknown),
    }
}

/// The host key algorithms to offer, most preferred first: those known_hosts lists for
/// `host` ahead of the others (as `ssh` orders them, so a server with several host
/// keys shows the one we can check), and never RSA, which this build cannot verify.
pub(crate) fn preferred(text: &str, host: &str, defaults: &[Algorithm]) -> Vec<Algorithm> {
    let usable: Vec<&Algorithm> = defaults
        .iter()
        .filter(|a| !matches!(a, Algorithm::Rsa { .. }))
        .collect();
    let mut known: Vec<Algorithm> = vec![];
    for (_, entry) in entries(text) {
        if entry.marker().is_none() && matches_host(entry.host_patterns(), host) {
            let algorithm = entry.public_key().algorithm();
            if usable.contains(&&algorithm) && !known.contains(&algorithm) {
                known.push(algorithm);
            }
        }
    }
    let rest: Vec<Algorithm> = usable
        .into_iter()
        .filter(|a| !known.contains(a))
        .cloned()
        .collect();
    known.into_iter().chain(rest).collect()
}

/// The lines that parse, numbered from 1. A line that does not parse (an unknown key
/// type, a typo) is skipped, as `ssh` skips it: it can trust nothing.
fn entries(text: &str) -> impl Iterator<Item = (usize, Entry)> + '_ {
    text.lines().enumerate().filter_map(|(i, raw)| {
        let fields: Vec<&str> = raw.split_whitespace().collect();
        if fields.first().is_none_or(|f| f.starts_with('#')) {
            return None;
        }
        // ssh-key splits fields on single spaces; known_hosts allows any blanks.
        fields.join(" ").parse().ok().map(|entry| (i + 1, entry))
    })
}

fn matches_host(patterns: &HostPatterns, host: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = <Hmac<Sha1> as KeyInit>::new_from_slice(salt) else {
                return false;
            };
            mac.update(host.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(patterns) => {
            let mut matched = false;
            for pattern in patterns {
                let pattern = pattern.to_ascii_lowercase();
                match pattern.strip_prefix('!') {
                    // A negated match rules the line out whatever else matches.
                    Some(negated) if glob(negated.as_bytes(), host.as_bytes()) => return false,
                    Some(_) => {}
                    None => matched |= glob(pattern.as_bytes(), host.as_bytes()),
                }
            }
            matched
        }
    }
}

/// `*` matches any run of characters, `?` any one.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` swallow one more character and try again.
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJdD7y3aLq454yWBdwLWbieU1ebz9/cu7/QEXn9OIeZJ";
    const KEY_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA6rWI3G2sz07DnfFlrouTcysQlj2P+jpNSOEWD9OJ3X";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBF0T0dVJS3ujOVYbHoPjT8384eT3j/UMx1FVMc6LPfuifr0+ixcuA3pDakifBCrFZutyPgA1QRGxEmowNv+zCMk=";

    fn key(s: &str) -> PublicKey {
        s.parse().unwrap()
    }

    #[test]
    fn lookup_names_bracket_other_ports() {
        assert_eq!(lookup_name("SFTP.Bank.example", 22), "sftp.bank.example");
        assert_eq!(lookup_name("127.0.0.1", 2222), "[127.0.0.1]:2222");
    }

    #[test]
    fn a_listed_key_is_trusted_for_its_host_only() {
        let text = format!("# the bank\n\n[127.0.0.1]:2222 {KEY_A} bank\n");
        assert_eq!(check(&text, "[127.0.0.1]:2222", &key(KEY_A)), Ok(()));
        assert_eq!(
            check(&text, "127.0.0.1", &key(KEY_A)),
            Err(HostKeyProblem::Unknown),
            "port 22 is another entry"
        );
        assert_eq!(
            check(&text, "[127.0.0.1]:2223", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
        assert_eq!(
            check("", "[127.0.0.1]:2222", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
    }

    #[test]
    fn another_key_of_the_same_algorithm_is_a_change_and_names_its_line() {
        let text = format!("other.example {KEY_A}\nbank.example {KEY_B}\n");
        assert_eq!(
            check(&text, "bank.example", &key(KEY_A)),
            Err(HostKeyProblem::Changed { line: 2 })
        );
        // Another algorithm listed is not a change: the key is just unknown.
        let text = format!("bank.example {ECDSA}\n");
        assert_eq!(
            check(&text, "bank.example", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
        // One matching line is enough, as in ssh.
        let text = format!("bank.example {KEY_B}\nbank.example {KEY_A}\n");
        assert_eq!(check(&text, "bank.example", &key(KEY_A)), Ok(()));
    }

    #[test]
    fn revoked_wins_over_listed() {
        let text = format!("bank.example {KEY_A}\n@revoked * {KEY_A}\n");
        assert_eq!(
            check(&text, "bank.example", &key(KEY_A)),
            Err(HostKeyProblem::Revoked { line: 2 })
        );
        let text = format!("@cert-authority *.example {KEY_A}\n");
        assert_eq!(
            check(&text, "bank.example", &key(KEY_A)),
            Err(HostKeyProblem::Unknown),
            "a CA key is not a host key"
        );
    }

    #[test]
    fn patterns_negations_tabs_and_bad_lines() {
        let text = format!("garbage line\n*.bank.example,!evil.bank.example\t{KEY_A}\n");
        assert_eq!(check(&text, "sftp.bank.example", &key(KEY_A)), Ok(()));
        assert_eq!(
            check(&text, "evil.bank.example", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
        let text = format!("[10.0.0.?]:22?? {KEY_A}\n");
        assert_eq!(check(&text, "[10.0.0.7]:2222", &key(KEY_A)), Ok(()));
        assert_eq!(
            check(&text, "[10.0.0.17]:2222", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
        assert_eq!(
            check(
                &format!("SFTP.BANK.example {KEY_A}"),
                "sftp.bank.example",
                &key(KEY_A)
            ),
            Ok(())
        );
    }

    #[test]
    fn hashed_names_match() {
        // From `ssh-keygen -H`: HMAC-SHA1 of "[127.0.0.1]:2222" under the salt.
        let salt = [7u8; 20];
        let mut mac = <Hmac<Sha1> as KeyInit>::new_from_slice(&salt).unwrap();
        mac.update(b"[127.0.0.1]:2222");
        let hash = mac.finalize().into_bytes();
        let b64 = |b: &[u8]| {
            use russh::keys::ssh_encoding::base64::{Base64, Encoding};
            Base64::encode_string(b)
        };
        let text = format!("|1|{}|{} {KEY_A}\n", b64(&salt), b64(&hash));
        assert_eq!(check(&text, "[127.0.0.1]:2222", &key(KEY_A)), Ok(()));
        assert_eq!(
            check(&text, "[127.0.0.1]:2223", &key(KEY_A)),
            Err(HostKeyProblem::Unknown)
        );
    }

    #[test]
    fn known_algorithms_are_offered_first_and_rsa_never() {
        let defaults = russh::Preferred::DEFAULT.key.to_vec();
        let text = format!("bank.example {ECDSA}\n");
        let got = preferred(&text, "bank.example", &defaults);
        assert_eq!(got[0], key(ECDSA).algorithm());
        assert!(got.contains(&Algorithm::Ed25519));
        assert!(!got.iter().any(|a| matches!(a, Algorithm::Rsa { .. })));
        assert_eq!(
            preferred("", "bank.example", &defaults)[0],
            Algorithm::Ed25519
        );
    }

    #[test]
    fn glob_matches_like_ssh() {
        assert!(glob(b"*", b""));
        assert!(glob(b"a*c", b"abbbc"));
        assert!(glob(b"a?c", b"abc"));
        assert!(!glob(b"a?c", b"ac"));
        assert!(glob(b"*.example", b"x.y.example"));
        assert!(!glob(b"*.example", b"example"));
        assert!(glob(b"a*b*c", b"aXbYbZc"));
    }
}
