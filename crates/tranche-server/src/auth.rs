//! Bearer tokens. Each token is full (every endpoint), full with personal data shown
//! (see [`crate::personal_data`]), or limited to the worker endpoints
//! (`/v1/workers/...`), so a fleet of remote workers can poll and report without being
//! able to cancel runs. Tokens are compared in constant time.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tranche_tokens::{Grant, TokenTable};

use crate::error::{ApiError, ErrorCode};
use crate::personal_data::PersonalData;
use crate::state::AppState;

/// What a token may do, from the word after it in the tokens file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every endpoint; personal data in job text is masked (`TOKEN`).
    All,
    /// Every endpoint, personal data shown (`TOKEN pii`).
    AllWithPersonalData,
    /// The worker endpoints only (`TOKEN worker`).
    Worker,
}

impl Grant for Scope {
    const EXPECTED: &'static str = "`TOKEN`, `TOKEN pii` or `TOKEN worker`";

    fn from_word(word: Option<&str>) -> Option<Scope> {
        match word {
            None => Some(Scope::All),
            Some("pii") => Some(Scope::AllWithPersonalData),
            Some("worker") => Some(Scope::Worker),
            Some(_) => None,
        }
    }
}

/// The accepted tokens (the tokens-file format of [`tranche_tokens`]): `TOKEN` for
/// full access with personal data masked, `TOKEN pii` for full access with personal
/// data shown, `TOKEN worker` for the worker endpoints only.
pub type Tokens = TokenTable<Scope>;

/// Endpoints anyone may read: liveness, readiness, the API description, and the
/// dashboard's page (which holds no data: it asks for a token to call the API).
pub fn is_open(path: &str) -> bool {
    matches!(path, "/" | "/healthz" | "/readyz" | "/v1/openapi.json")
}

pub fn is_worker_endpoint(path: &str) -> bool {
    path.starts_with("/v1/workers/") || crate::conductor::is_worker_endpoint(path)
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
            "this token may only use the worker endpoints (/v1/workers/... and /api/tasks...)",
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
        let t = Tokens::parse("# ops\nadmin-secret\n\nworker-secret worker\n", "t").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.check(b"admin-secret"), Some(Scope::All));
        assert_eq!(t.check(b"worker-secret"), Some(Scope::Worker));
        assert_eq!(t.check(b"admin-secre"), None);
        assert_eq!(t.check(b""), None);
        let env = Tokens::parse("a1, b2 worker, c3 pii", "t").unwrap();
        assert_eq!(env.check(b"b2"), Some(Scope::Worker));
        assert_eq!(env.check(b"c3"), Some(Scope::AllWithPersonalData));
        assert_eq!(
            env.check(b"a1"),
            Some(Scope::All),
            "a plain token stays full"
        );
        assert!(Tokens::parse("t pii worker", "t").is_err());
        assert!(
            Tokens::parse("t PII", "t").is_err(),
            "scopes are lower case"
        );
        let err = Tokens::parse("s3cret admin", "t").unwrap_err().to_string();
        assert!(!err.contains("s3cret"), "never echo a token: {err}");
        assert!(format!("{t:?}").contains("2 configured"));
    }
}
