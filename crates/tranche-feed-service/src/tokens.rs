//! Bearer tokens for the feed, in the tokens-file format of `tranche server` (one entry
//! per line or comma-separated, `#` comments) with the feed's own grants:
//!
//! - `TOKEN core` — a trading core: may post events, may not read.
//! - `TOKEN firm=N` — a client of firm N: may read firm N's orders only (no filter or
//!   `firm=N`; a broker or instrument filter, or another firm, is a 403).
//! - `TOKEN reader` — may read every order with any filter, may not post.
//!
//! Tokens are compared in constant time; no error or `Debug` output shows one.

use std::path::Path;

use subtle::ConstantTimeEq;
use tranche_feed::FirmId;

/// What a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Post events only.
    Core,
    /// Read one firm's orders only.
    Firm(FirmId),
    /// Read every order.
    Reader,
}

/// The accepted tokens. `Debug` never prints them.
#[derive(Clone, Default)]
pub struct FeedTokens {
    tokens: Vec<(Vec<u8>, Grant)>,
}

impl std::fmt::Debug for FeedTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FeedTokens({} configured)", self.tokens.len())
    }
}

impl FeedTokens {
    /// Parses tokens text; `source` names it in errors (a file's path). Errors never
    /// contain a token.
    pub fn parse(text: &str, source: &str) -> Result<FeedTokens, String> {
        let mut tokens = Vec::new();
        for (i, entry) in text.split(['\n', ',']).enumerate() {
            let entry = entry.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let mut words = entry.split_whitespace();
            let token = words.next().unwrap_or_default();
            let grant = match (words.next(), words.next()) {
                (Some("core"), None) => Grant::Core,
                (Some("reader"), None) => Grant::Reader,
                (Some(word), None) if word.starts_with("firm=") => {
                    match word["firm=".len()..].parse() {
                        Ok(n) => Grant::Firm(FirmId(n)),
                        Err(_) => return Err(syntax(source, i, &format!("{word:?}"))),
                    }
                }
                (None, _) => return Err(syntax(source, i, "a token alone")),
                (Some(word), _) => {
                    return Err(syntax(source, i, &format!("a token followed by {word:?}")))
                }
            };
            tokens.push((token.as_bytes().to_vec(), grant));
        }
        Ok(FeedTokens { tokens })
    }

    /// [`FeedTokens::parse`] on a file's contents.
    pub fn from_file(path: &Path) -> Result<FeedTokens, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("could not read tokens from {}: {e}", path.display()))?;
        FeedTokens::parse(&text, &path.display().to_string())
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The grant of `presented` (a token as sent, without `Bearer `), comparing
    /// against every token in constant time; `None` for an unknown one. Every protocol
    /// serving the feed checks the same tokens through it.
    pub fn check(&self, presented: &[u8]) -> Option<Grant> {
        let mut found = None;
        for (token, grant) in &self.tokens {
            if bool::from(token.as_slice().ct_eq(presented)) {
                found = found.or(Some(*grant));
            }
        }
        found
    }
}

fn syntax(source: &str, index: usize, got: &str) -> String {
    format!(
        "{source} line {}: expected `TOKEN core`, `TOKEN reader` or `TOKEN firm=N`, got {got}",
        index + 1
    )
}
