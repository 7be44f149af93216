//! Bearer-token tables: the one tokens-file format every Tranche API reads, each API
//! with its own grants.
//!
//! A tokens file has one entry per line, or entries separated by commas (so the same
//! text fits in an environment variable): a token, then the words that say what it may
//! do, which each API defines as its [`Grant`] (`tranche server`: nothing, `pii` or
//! `worker`; the feed: `core`, `reader` or `firm=N`). Blank entries and `#` comments are
//! skipped.
//!
//! Two things hold for every API, and are why the table is one type rather than one per
//! API: a presented token is compared with every configured one in constant time (no
//! early exit that would time how much of a guess was right), and no token ever
//! appears in an error, a log line or `Debug` output — an error names the file and the
//! entry, and shows only the words after the token.

use std::fmt;
use std::path::Path;

use subtle::ConstantTimeEq;

/// What a token may do in one API: parsed from the words after the token.
pub trait Grant: Copy {
    /// The entries this API accepts, for errors: e.g. "`TOKEN`, `TOKEN pii` or
    /// `TOKEN worker`".
    const EXPECTED: &'static str;

    /// The grant of the word after a token (`None`: the token stands alone), or `None`
    /// when the word grants nothing in this API.
    fn from_word(word: Option<&str>) -> Option<Self>;
}

/// The accepted tokens of one API and each one's grant. `Debug` never prints them.
#[derive(Clone)]
pub struct TokenTable<G> {
    tokens: Vec<(Vec<u8>, G)>,
}

impl<G> Default for TokenTable<G> {
    fn default() -> Self {
        TokenTable { tokens: Vec::new() }
    }
}

impl<G> fmt::Debug for TokenTable<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenTable({} configured)", self.tokens.len())
    }
}

/// Why tokens could not be loaded. Never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The tokens file could not be read, or is open to others than its owner.
    #[error("could not read tokens from {path}")]
    Read {
        /// The file, as given.
        path: String,
        /// Why: an I/O error, or a file others may read (refused, naming the fix).
        #[source]
        source: tranche_types::secret::SecretError,
    },
    /// An entry is not one the API accepts.
    #[error("{source_name} line {line}: expected {expected}, got {got}")]
    Syntax {
        /// The file's path, or the name the text was given under.
        source_name: String,
        /// Which entry, from 1. Lines and comma-separated entries count alike, so in a
        /// file without commas it is the line number.
        line: usize,
        /// The entries the API accepts ([`Grant::EXPECTED`]).
        expected: &'static str,
        /// What was found, with the token itself left out.
        got: String,
    },
}

impl<G: Grant> TokenTable<G> {
    /// The tokens in `text`; `source_name` names it in errors (a file's path, an
    /// environment variable).
    pub fn parse(text: &str, source_name: &str) -> Result<Self, TokenError> {
        let mut tokens = Vec::new();
        for (i, entry) in text.split(['\n', ',']).enumerate() {
            let entry = entry.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let mut words = entry.split_whitespace();
            let token = words.next().unwrap_or_default();
            let (word, extra) = (words.next(), words.next());
            let grant = match extra {
                None => G::from_word(word),
                Some(_) => None,
            };
            let Some(grant) = grant else {
                // The token itself is never echoed.
                let got = match (word, extra) {
                    (None, _) => "a token alone".to_string(),
                    (Some(word), None) => format!("a token followed by {word:?}"),
                    (Some(word), Some(extra)) => {
                        format!(
                            "a token followed by {word:?} and then {extra:?}, one word too many"
                        )
                    }
                };
                return Err(TokenError::Syntax {
                    source_name: source_name.to_string(),
                    line: i + 1,
                    expected: G::EXPECTED,
                    got,
                });
            };
            tokens.push((token.as_bytes().to_vec(), grant));
        }
        Ok(TokenTable { tokens })
    }

    /// [`TokenTable::parse`] on the contents of `path`, which must be private to its
    /// owner (tokens are secrets); errors name the file.
    pub fn from_file(path: &Path) -> Result<Self, TokenError> {
        let text =
            tranche_types::secret::read_private(path).map_err(|source| TokenError::Read {
                path: path.display().to_string(),
                source,
            })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The grant of `presented` (a token as sent, without `Bearer `), comparing it with
    /// every configured token in constant time; `None` for an unknown one. A token
    /// listed twice has its first grant.
    pub fn check(&self, presented: &[u8]) -> Option<G> {
        let mut found = None;
        for (token, grant) in &self.tokens {
            if bool::from(token.as_slice().ct_eq(presented)) {
                found = found.or(Some(*grant));
            }
        }
        found
    }
}

impl<G> TokenTable<G> {
    /// Accept `other`'s tokens as well, e.g. a file's and an environment variable's.
    pub fn extend(&mut self, other: TokenTable<G>) {
        self.tokens.extend(other.tokens);
    }

    /// How many tokens are accepted, as listed (a duplicate counts twice).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// No tokens: an API then asks for none, and may only listen on loopback.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{Grant, TokenError, TokenTable};

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Role {
        Admin,
        Reader,
    }

    impl Grant for Role {
        const EXPECTED: &'static str = "`TOKEN` or `TOKEN reader`";
        fn from_word(word: Option<&str>) -> Option<Self> {
            match word {
                None => Some(Role::Admin),
                Some("reader") => Some(Role::Reader),
                Some(_) => None,
            }
        }
    }

    #[test]
    fn entries_by_line_or_comma_with_comments_and_blanks() {
        let table = TokenTable::<Role>::parse(
            "# admins\nadmin-1\n\n  read-1 reader , read-2 reader\n",
            "t",
        )
        .unwrap();
        assert_eq!(table.len(), 3);
        assert_eq!(table.check(b"admin-1"), Some(Role::Admin));
        assert_eq!(table.check(b"read-2"), Some(Role::Reader));
        assert_eq!(table.check(b"read-"), None, "a prefix is not the token");
        assert_eq!(table.check(b"read-22"), None);
        assert_eq!(table.check(b""), None);
    }

    #[test]
    fn a_token_listed_twice_keeps_its_first_grant() {
        let table = TokenTable::<Role>::parse("same reader\nsame", "t").unwrap();
        assert_eq!(table.check(b"same"), Some(Role::Reader));
    }

    #[test]
    fn errors_name_the_source_and_entry_and_never_the_token() {
        for (text, line, got) in [
            ("ok\nsecret-abc writer", 2, "a token followed by \"writer\""),
            (
                "ok, secret-abc reader extra",
                2,
                "a token followed by \"reader\" and then \"extra\", one word too many",
            ),
        ] {
            let err = TokenTable::<Role>::parse(text, "tokens.txt").unwrap_err();
            let shown = err.to_string();
            assert_eq!(
                shown,
                format!("tokens.txt line {line}: expected `TOKEN` or `TOKEN reader`, got {got}")
            );
            assert!(!shown.contains("secret"), "{shown}");
            assert!(!format!("{err:?}").contains("secret"), "{err:?}");
        }
    }

    #[test]
    fn debug_shows_how_many_not_which() {
        let table = TokenTable::<Role>::parse("secret-1, secret-2 reader", "t").unwrap();
        assert_eq!(format!("{table:?}"), "TokenTable(2 configured)");
    }

    #[test]
    fn a_file_is_read_and_a_missing_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, "file-token reader\n").unwrap();
        let open = TokenTable::<Role>::from_file(&path).unwrap_err();
        assert!(
            matches!(
                open,
                TokenError::Read {
                    source: tranche_types::secret::SecretError::NotPrivate { mode: 0o644, .. },
                    ..
                }
            ),
            "a tokens file others can read is refused: {open:?}"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut table = TokenTable::<Role>::from_file(&path).unwrap();
        table.extend(TokenTable::parse("env-token", "TOKENS").unwrap());
        assert_eq!(table.check(b"file-token"), Some(Role::Reader));
        assert_eq!(table.check(b"env-token"), Some(Role::Admin));

        let missing = dir.path().join("none");
        let err = TokenTable::<Role>::from_file(&missing).unwrap_err();
        assert!(matches!(err, TokenError::Read { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("could not read tokens from {}", missing.display())
        );
    }
}
