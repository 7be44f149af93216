//! The JSON body extractor: like axum's, but a malformed body is answered 400 with the
//! path of the offending field (`items[2].job.max_attempts`), found by
//! `serde_path_to_error`, an oversized one 413, and one not received within the body
//! timeout 408.
//!
//! The timeout is `tranche-http-door`'s (every request body the listener hands over
//! fails once it is late, a deadline for the whole body); here it is only answered.

use axum::body::Bytes;
use axum::extract::{FromRequest, OptionalFromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        parse(&read(req, state).await?).map(Json)
    }
}

/// An optional body: absent, blank or `null` is `None`.
impl<T: DeserializeOwned> OptionalFromRequest<AppState> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Option<Self>, Self::Rejection> {
        let bytes = read(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        parse::<Option<T>>(&bytes).map(|v| v.map(Json))
    }
}

async fn read(req: Request, app: &AppState) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, app).await.map_err(|e| {
        if let Some(late) = tranche_http_door::body_timed_out(&e) {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::BodyTimeout,
                late.to_string(),
            );
        }
        let status = e.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                status,
                ErrorCode::TooLarge,
                "request body is over the size limit",
            )
        } else {
            ApiError::new(status, ErrorCode::UnreadableBody, e.body_text())
        }
    })
}

pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        ApiError {
            field: Some(path),
            ..ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidJson,
                inner.to_string(),
            )
        }
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<Outer>(br#"{"items": [{"n": 1}, {"n": "x"}]}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.field.as_deref(), Some("items[1].n"));
        assert!(e.message.contains("expected u32"), "{}", e.message);
    }
}
