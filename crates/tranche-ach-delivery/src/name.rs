//! Which file names a delivery accepts, and the temporary names files are written under.

use crate::DeliveryError;

/// The longest name accepted: the temporary name adds 22 characters and most
/// filesystems (and SFTP servers) stop at 255.
pub const MAX_NAME_LEN: usize = 200;

/// Check that `name` is a plain file name: ASCII letters, digits, `-`, `_` and `.`, not
/// starting with `.`, at most [`MAX_NAME_LEN`] characters. Nothing else reaches a
/// filesystem or a server: no `/`, no `..`, no spaces or control characters, and no
/// hidden names, which are reserved for temporaries (so a temporary never takes a real
/// file's name, and a real file never looks like a temporary).
pub fn check(name: &str) -> Result<(), DeliveryError> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.starts_with('.') {
        "it starts with '.' (reserved for temporary files)"
    } else if name.len() > MAX_NAME_LEN {
        "it is longer than 200 characters"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        "only ASCII letters, digits, '-', '_' and '.' are allowed"
    } else {
        return Ok(());
    };
    Err(DeliveryError::BadName {
        name: name.to_string(),
        why,
    })
}

/// A fresh temporary name for writing `name`: hidden (a leading `.`, which
/// [`check`] refuses for real names) and unique per attempt, so two deliveries of the
/// same name never write into one temporary and a leftover from a crash never blocks
/// a later delivery. `.part` says what it is to whoever lists the directory.
pub(crate) fn temporary(name: &str) -> String {
    format!(".{name}.{:016x}.part", fastrand::u64(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_anything_else_is_refused() {
        for ok in [
            "a",
            "ACH-20261120-021000021-1.ach",
            "PAY_2026.11.20.txt",
            "x..y",
            &"n".repeat(MAX_NAME_LEN),
        ] {
            assert!(check(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "../x",
            "a/b",
            "/abs",
            "a\\b",
            "a b",
            "tab\t",
            "nul\0",
            "line\n",
            "naïve.ach",
            "a:b",
            "*.ach",
            "~x",
            &"n".repeat(MAX_NAME_LEN + 1),
        ] {
            match check(bad) {
                Err(DeliveryError::BadName { name, .. }) => assert_eq!(name, bad),
                other => panic!("{bad:?}: expected BadName, got {other:?}"),
            }
        }
    }

    #[test]
    fn temporaries_are_hidden_unique_and_fit() {
        let long = "n".repeat(MAX_NAME_LEN);
        let (a, b) = (temporary(&long), temporary(&long));
        assert_ne!(a, b);
        assert!(a.starts_with(&format!(".{long}.")) && a.ends_with(".part"));
        assert!(a.len() <= 255, "{}", a.len());
        assert!(
            check(&a).is_err(),
            "a temporary is never a deliverable name"
        );
    }
}
