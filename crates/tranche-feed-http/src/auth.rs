//! Bearer tokens on HTTP: the `Authorization` header checked against the feed's
//! [`FeedTokens`], and the 401 and 403 answers.

use axum::http::{header, HeaderMap, StatusCode};
use tranche_feed_service::{FeedTokens, Grant};

use crate::ApiError;

/// The grant of the request's bearer token, or a 401.
pub(crate) fn grant(tokens: &FeedTokens, headers: &HeaderMap) -> Result<Grant, ApiError> {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .ok_or_else(|| unauthorized("expected an Authorization: Bearer TOKEN header"))?;
    tokens
        .check(presented)
        .ok_or_else(|| unauthorized("the bearer token is not valid"))
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

pub(crate) fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
}
