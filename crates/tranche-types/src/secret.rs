//! Secrets (passwords, tokens) from the environment or a private file, never from the
//! command line, where any user of the machine can read them: `NAME` holds the value,
//! or `NAME_FILE` names a file holding it.
//!
//! A secret file readable by others than its owner is refused, as OpenSSH refuses such
//! a private key: whoever else can read it has the secret, and the one who set it up
//! rarely knows. The error names the file, its mode and the fix (`chmod 600`).

use std::path::Path;

/// Why a secret could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// Both `NAME` and `NAME_FILE` are set.
    #[error("expected one of {name} and {name}_FILE, got both")]
    Both {
        /// The variable's name.
        name: String,
    },
    /// The file cannot be read.
    #[error("{path}: cannot read the secret file")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is readable (or writable) by its group or others.
    #[error(
        "{path}: the secret file is open to others than its owner (mode {mode:04o}); \
         make it private: chmod 600 {path}"
    )]
    NotPrivate {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The file holds nothing.
    #[error("{path}: the secret file is empty")]
    Empty {
        /// The file.
        path: String,
    },
}

/// The secret in variable `name` or in the file named by `{name}_FILE`, as `var` reads
/// variables (`std::env::var(..).ok()` in a program); `None` when neither is set. An
/// empty variable counts as unset.
pub fn from_vars(
    name: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, SecretError> {
    let direct = var(name).filter(|v| !v.is_empty());
    let file = var(&format!("{name}_FILE")).filter(|v| !v.is_empty());
    match (direct, file) {
        (Some(_), Some(_)) => Err(SecretError::Both {
            name: name.to_string(),
        }),
        (Some(v), None) => Ok(Some(v)),
        (None, Some(path)) => read_file(Path::new(&path)).map(Some),
        (None, None) => Ok(None),
    }
}

/// [`from_vars`] on the process's environment.
pub fn from_env(name: &str) -> Result<Option<String>, SecretError> {
    from_vars(name, |n| std::env::var(n).ok())
}

/// The secret in the file `path`: its first line, which must not be empty. Refused
/// when the file is open to its group or others.
pub fn read_file(path: &Path) -> Result<String, SecretError> {
    let text = read_private(path)?;
    let value = text.lines().next().unwrap_or("");
    if value.is_empty() {
        return Err(SecretError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(value.to_string())
}

/// The whole of the file `path` (a token table), refused as [`read_file`] refuses.
pub fn read_private(path: &Path) -> Result<String, SecretError> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let shown = || path.display().to_string();
    let read = |source| SecretError::Read {
        path: shown(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read)?;
    let mode = file.metadata().map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::NotPrivate {
            path: shown(),
            mode,
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(text: &str, mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn a_private_file_gives_its_first_line() {
        let (_d, path) = file("hunter2\nignored\n", 0o600);
        assert_eq!(read_file(&path).unwrap(), "hunter2");
        let (_d, path) = file("\n", 0o400);
        assert!(matches!(read_file(&path), Err(SecretError::Empty { .. })));
    }

    #[test]
    fn a_file_others_can_read_is_refused_naming_the_fix() {
        for mode in [0o644, 0o640, 0o604, 0o660] {
            let (_d, path) = file("hunter2\n", mode);
            let e = read_file(&path).unwrap_err();
            let said = e.to_string();
            assert!(
                said.contains(&path.display().to_string())
                    && said.contains(&format!("chmod 600 {}", path.display()))
                    && !said.contains("hunter2"),
                "{said}"
            );
        }
    }

    #[test]
    fn a_variable_or_its_file_not_both() {
        let (_d, path) = file("from-file\n", 0o600);
        let path = path.display().to_string();
        let vars = |pairs: Vec<(&'static str, String)>| {
            move |n: &str| pairs.iter().find(|(k, _)| *k == n).map(|(_, v)| v.clone())
        };
        assert_eq!(
            from_vars("PW", vars(vec![("PW", "direct".into())])).unwrap(),
            Some("direct".into())
        );
        assert_eq!(
            from_vars("PW", vars(vec![("PW_FILE", path.clone())])).unwrap(),
            Some("from-file".into())
        );
        assert!(matches!(
            from_vars("PW", vars(vec![("PW", "x".into()), ("PW_FILE", path)])),
            Err(SecretError::Both { .. })
        ));
        assert_eq!(
            from_vars("PW", vars(vec![("PW", String::new())])).unwrap(),
            None
        );
    }
}
