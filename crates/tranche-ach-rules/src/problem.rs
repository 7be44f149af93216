//! What is wrong with a rules file: every problem, each where it was written.

use std::fmt;
use std::path::PathBuf;

/// One problem in a rules file: where (file, line, column of the value or key), which
/// field (a dotted path such as `bank[1].window[0].submission_end`, indices from 0),
/// what was expected, what was got (the text as written), and what was probably meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The rules file, as given.
    pub file: PathBuf,
    /// Its line, from 1.
    pub line: u32,
    /// Its column (in characters), from 1.
    pub column: u32,
    /// The field, e.g. `bank[1].window[0].submission_end`; empty for TOML syntax.
    pub field: String,
    /// What the field must be.
    pub expected: String,
    /// What it is, as written (quotes included), or `nothing` when missing.
    pub got: String,
    /// What was probably meant, or how to fix it (`did you mean "same-day"?`).
    pub hint: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "expected {}, got {}", self.expected, self.got)?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// Why rules could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The file could not be read. Said whole (the file tried, as an absolute path,
    /// and the OS's reason), since callers print this error alone: a new user's first
    /// run has no ach.toml, and must learn where it looked and how to make one.
    #[error("{}", read_failure(path, source))]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file was read and is not valid: every problem, in the order of the file.
    #[error("{}", lines(problems))]
    Invalid {
        /// At least one.
        problems: Vec<Problem>,
    },
}

impl RulesError {
    /// The problems found (none when the file could not be read).
    pub fn problems(&self) -> &[Problem] {
        match self {
            RulesError::Read { .. } => &[],
            RulesError::Invalid { problems } => problems,
        }
    }
}

fn read_failure(path: &std::path::Path, source: &std::io::Error) -> String {
    let tried = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    if source.kind() == std::io::ErrorKind::NotFound {
        format!(
            "{}: no ACH rules there (looked for {}); `tranche ach generate --out DIR` \
             writes a commented DIR/ach.toml to start from, or give --rules FILE",
            path.display(),
            tried.display()
        )
    } else {
        format!(
            "{}: cannot read the ACH rules ({}): {source}",
            path.display(),
            tried.display()
        )
    }
}

fn lines(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_reads_file_line_column_field_expected_got_hint() {
        let mut p = Problem {
            file: "ach.toml".into(),
            line: 12,
            column: 5,
            field: "bank[1].window[0].submission_end".into(),
            expected: "a time HH:MM".into(),
            got: "\"25:00\"".into(),
            hint: None,
        };
        assert_eq!(
            p.to_string(),
            "ach.toml:12:5: bank[1].window[0].submission_end: expected a time HH:MM, got \"25:00\""
        );
        p.hint = Some("did you mean \"submission_begin\"?".into());
        let e = RulesError::Invalid {
            problems: vec![p.clone(), p],
        };
        let text = e.to_string();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.lines()
                .all(|l| l.ends_with(" (did you mean \"submission_begin\"?)")),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_says_where_it_looked_and_how_to_make_one() {
        let e = RulesError::Read {
            path: "nope/ach.toml".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let said = e.to_string();
        let absolute = std::env::current_dir().unwrap().join("nope/ach.toml");
        assert!(said.contains(&absolute.display().to_string()), "{said}");
        assert!(said.contains("tranche ach generate --out DIR"), "{said}");
        let denied = RulesError::Read {
            path: "ach.toml".into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert!(denied.to_string().contains("Permission denied"), "{denied}");
    }
}
