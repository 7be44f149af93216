//! Bearer tokens. Each token is full (every endpoint), full with personal data shown
//! (see [`crate::personal_data`]), or limited to the worker endpoints
//! (`/v1/workers/...`), so a fleet of remote workers can poll and report without being
//! able to cancel runs. Tokens are compared in constant time.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ErrorCode};
use crate::personal_data::PersonalData;
use crate::state::AppState;

/// What a token may do, from the word after it in the tokens file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every endpoint; personal data in job text is masked (`TOKEN`).
    All,
    /// Every endpoint, personal data shown (`TOKEN pii`).
    AllWithPersonalData,
    /// The worker endpoints only (`TOKEN worker`).
    Worker,
}

/// The accepted tokens. `Debug` never prints them.
#[derive(Clone, Default)]
pub struct Tokens {
    tokens: Vec<(Vec<u8>, Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokens({} configured)", self.tokens.len())
    }
}

/// Why tokens could not be loaded. Never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The tokens file could not be read.
    #[error("could not read tokens from {path}")]
    Read {
        /// The file, as given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An entry is not `TOKEN`, `TOKEN pii` or `TOKEN worker`.
    #[error(
        "{source_name} line {line}: expected `TOKEN`, `TOKEN pii` or `TOKEN worker`, got {got}"
    )]
    Syntax {
        /// The file's path, or `tokens` for text given to [`Tokens::parse`].
        source_name: String,
        /// Which entry, from 1. Lines and comma-separated entries count alike, so in a
        /// file without commas it is the line number.
        line: usize,
        /// What was found, with the token itself left out.
        got: String,
    },
}

impl Tokens {
    /// No tokens: the server then needs none, and may only listen on loopback.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// How many tokens are accepted, as listed (a duplicate counts twice).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// One token per line (or comma-separated, for an environment variable):
    /// `TOKEN` for full access with personal data masked, `TOKEN pii` for full access
    /// with personal data shown, `TOKEN worker` for the worker endpoints only. Blank
    /// lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Tokens, TokenError> {
        Self::parse_named(text, "tokens")
    }

    fn parse_named(text: &str, source_name: &str) -> Result<Tokens, TokenError> {
        let mut tokens = Vec::new();
        for (i, entry) in text.split(['\n', ',']).enumerate() {
            let entry = entry.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let mut words = entry.split_whitespace();
            let token = words.next().unwrap_or_default();
            let scope = match (words.next(), words.next()) {
                (None, _) => Scope::All,
                (Some("worker"), None) => Scope::Worker,
                (Some("pii"), None) => Scope::AllWithPersonalData,
                (Some(other), _) => {
                    // The token itself is never echoed.
                    return Err(TokenError::Syntax {
                        source_name: source_name.to_string(),
                        line: i + 1,
                        got: format!("a token followed by {other:?}"),
                    });
                }
            };
            tokens.push((token.as_bytes().to_vec(), scope));
        }
        Ok(Tokens { tokens })
    }

    /// [`Tokens::parse`] on the contents of `path`; errors name the file.
    pub fn from_file(path: &Path) -> Result<Tokens, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_named(&text, &path.display().to_string())
    }

    /// Accept `other`'s tokens as well, e.g. a file's and an environment variable's.
    pub fn extend(&mut self, other: Tokens) {
        self.tokens.extend(other.tokens);
    }

    /// The scope of `presented`, comparing against every token in constant time.
    pub(crate) fn check(&self, presented: &[u8]) -> Option<Scope> {
        let mut found = None;
        for (token, scope) in &self.tokens {
            if bool::from(token.as_slice().ct_eq(presented)) {
                found = found.or(Some(*scope));
            }
        }
        found
    }
}

/// Endpoints anyone may read: liveness, readiness, the API description, and the
/// dashboard's page (which holds no data: it asks for a token to call the API).
pub fn is_open(path: &str) -> bool {
    matches!(path, "/" | "/healthz" | "/readyz" | "/v1/openapi.json")
}

pub fn is_worker_endpoint(path: &str) -> bool {
    path.starts_with("/v1/workers/")
}

pub async fn require_token(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let tokens = &app.config().tokens;
    let path = req.uri().path();
    if is_open(path) {
        return next.run(req).await;
    }
    if !app.config().auth_required() {
        let shown = app.config().show_personal_data;
        req.extensions_mut().insert(if shown {
            PersonalData::Shown
        } else {
            PersonalData::Masked
        });
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let scope = match presented {
        None => {
            return unauthorized("expected an Authorization: Bearer TOKEN header");
        }
        Some(t) => tokens.check(t),
    };
    match scope {
        None => unauthorized("the bearer token is not valid"),
        Some(Scope::Worker) if !is_worker_endpoint(path) => ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "this token may only use the worker endpoints (/v1/workers/...)",
        )
        .into_response(),
        Some(scope) => {
            req.extensions_mut().insert(match scope {
                Scope::AllWithPersonalData => PersonalData::Shown,
                Scope::All | Scope::Worker => PersonalData::Masked,
            });
            next.run(req).await
        }
    }
}

fn unauthorized(message: &str) -> Response {
    let mut resp =
        ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message).into_response();
    resp.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_and_check() {
        let t = Tokens::parse("# ops\nadmin-secret\n\nworker-secret worker\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.check(b"admin-secret"), Some(Scope::All));
        assert_eq!(t.check(b"worker-secret"), Some(Scope::Worker));
        assert_eq!(t.check(b"admin-secre"), None);
        assert_eq!(t.check(b""), None);
        let env = Tokens::parse("a1, b2 worker, c3 pii").unwrap();
        assert_eq!(env.check(b"b2"), Some(Scope::Worker));
        assert_eq!(env.check(b"c3"), Some(Scope::AllWithPersonalData));
        assert_eq!(
            env.check(b"a1"),
            Some(Scope::All),
            "a plain token stays full"
        );
        assert!(Tokens::parse("t pii worker").is_err());
        assert!(Tokens::parse("t PII").is_err(), "scopes are lower case");
        let err = Tokens::parse("s3cret admin").unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "never echo a token: {err}");
        assert!(format!("{t:?}").contains("2 configured"));
    }
}
