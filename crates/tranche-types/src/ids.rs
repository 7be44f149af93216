use std::fmt;

use serde::{Deserialize, Serialize};

/// A job's identity, unique within one backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The name of a run, e.g. `contract-notes/2026-11-20`. Every job belongs to one.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(
        description = "Run name: at most 200 bytes of letters, digits and - _ . / : # @ +.",
        pattern = "^[A-Za-z0-9_./:#@+-]{1,200}$"
    )
)]
pub struct RunName(String);

/// Why a string is not a [`RunName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run name {}: {reason}", shown(.name))]
pub struct InvalidName {
    /// The name refused, whole (the message shows only its length when it is long).
    pub name: String,
    /// What a name must be, e.g. "expected at most 200 bytes".
    pub reason: &'static str,
}

/// The name quoted, or only its length when it is too long to echo back in an error.
fn shown(name: &str) -> String {
    if name.len() > RunName::MAX_LEN {
        format!("of {} bytes", name.len())
    } else {
        format!("{name:?}")
    }
}

impl RunName {
    /// Longest run name, in bytes.
    pub const MAX_LEN: usize = 200;

    /// Run names are shown in URLs, Redis keys and file paths, so they are restricted to
    /// a safe alphabet rather than escaped everywhere.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidName> {
        let name = name.into();
        let reason = if name.is_empty() {
            Some("expected a non-empty name")
        } else if name.len() > Self::MAX_LEN {
            Some("expected at most 200 bytes")
        } else if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:#@+".contains(&b))
        {
            Some("expected only letters, digits and - _ . / : # @ +")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(InvalidName { name, reason }),
            None => Ok(RunName(name)),
        }
    }

    /// The name as given.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RunName {
    type Error = InvalidName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        RunName::new(s)
    }
}

impl From<RunName> for String {
    fn from(r: RunName) -> String {
        r.0
    }
}

impl fmt::Display for RunName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for RunName {
    type Err = InvalidName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunName::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_are_checked() {
        assert!(RunName::new("contract-notes/2026-11-20").is_ok());
        assert_eq!(
            RunName::new("").unwrap_err().reason,
            "expected a non-empty name"
        );
        assert!(RunName::new("a b").is_err());
        let long = RunName::new("x".repeat(1 << 20)).unwrap_err().to_string();
        assert_eq!(
            long,
            "invalid run name of 1048576 bytes: expected at most 200 bytes"
        );
        assert!(RunName::new("x".repeat(RunName::MAX_LEN)).is_ok());
    }
}
