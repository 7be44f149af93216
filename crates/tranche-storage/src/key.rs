use std::fmt;

/// A validated, partitioned object key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreKey(String);

/// A key part that could escape the store or name a hidden file (`..`, `/`, a leading
/// `.`, an empty part, anything but ASCII letters, digits, `-`, `_` and `.`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid store key part {part:?}: expected letters, digits, '-', '_' or '.', not starting with '.'")]
pub struct InvalidKey {
    /// The offending part, e.g. a client code or a date as given.
    pub part: String,
}

fn check(part: &str) -> Result<(), InvalidKey> {
    let ok = !part.is_empty()
        && !part.starts_with('.')
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(InvalidKey {
            part: part.to_string(),
        })
    }
}

/// FNV-1a: a stable hash (unlike std's, which may change between releases), so an
/// entity's partition never moves.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl StoreKey {
    /// `{d}-{kind}/{date}/{entity}.{ext}`, with `d` the entity's stable hash digit.
    pub fn partitioned(
        kind: &str,
        date: &str,
        entity: &str,
        ext: &str,
    ) -> Result<StoreKey, InvalidKey> {
        for part in [kind, date, entity, ext] {
            check(part)?;
        }
        let digit = fnv1a(entity) % 10;
        Ok(StoreKey(format!("{digit}-{kind}/{date}/{entity}.{ext}")))
    }

    /// A key given as text, checked part by part.
    pub(crate) fn parse(key: &str) -> Result<StoreKey, InvalidKey> {
        for part in key.split('/') {
            check(part)?;
        }
        Ok(StoreKey(key.to_string()))
    }

    /// The key as a relative path with `/` separators, e.g.
    /// `3-signed-pdf/2026-11-20/C0000042.pdf`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_stable_and_spread() {
        let k = StoreKey::partitioned("signed-pdf", "2026-11-20", "C0000001", "pdf").unwrap();
        assert_eq!(
            k.as_str(),
            format!(
                "{}-signed-pdf/2026-11-20/C0000001.pdf",
                fnv1a("C0000001") % 10
            )
        );
        let digits: std::collections::BTreeSet<char> = (0..1000)
            .map(|i| {
                StoreKey::partitioned("tmp-pdf", "d", &format!("C{i:07}"), "pdf")
                    .unwrap()
                    .as_str()
                    .chars()
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(digits.len(), 10, "every partition is used");
    }

    #[test]
    fn keys_cannot_escape_the_store() {
        assert!(StoreKey::partitioned("k", "d", "../etc/passwd", "x").is_err());
        assert!(StoreKey::parse("a/../b").is_err());
        assert!(StoreKey::parse("/abs").is_err());
        assert!(StoreKey::parse("a/.hidden").is_err());
        assert!(StoreKey::parse("1-tmp-pdf/2026-11-20/C1.pdf").is_ok());
    }
}
