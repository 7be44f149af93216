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

/// The most of a path or a message a 400 answer says: a body's keys and values are
/// the caller's, and may be megabytes.
const MAX_SAID: usize = 300;

/// `s` cut to [`MAX_SAID`] bytes (at a character boundary), `…` marking a cut.
fn bounded(s: &str) -> String {
    if s.len() <= MAX_SAID {
        return s.to_string();
    }
    let mut end = MAX_SAID;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// serde's message without the value it echoes: `invalid type: integer `123456789`,
/// expected a string` is `invalid type: integer, expected a string`. The value may be
/// an account number sent as a number, or a name: never said back.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_SAID));
    let mut rest = message;
    for marker in ["invalid type: ", "invalid value: "] {
        let Some(at) = rest.find(marker) else {
            continue;
        };
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        // `kind `value``, or `string "value"` (escaped as Rust's Debug).
        let kind_end = rest.find([' ', ',']).unwrap_or(rest.len());
        let mut kind_end = kind_end;
        if rest.starts_with("floating point ") {
            kind_end = "floating point".len();
        }
        out.push_str(&rest[..kind_end]);
        let after = rest[kind_end..].trim_start_matches(' ');
        rest = if let Some(v) = after.strip_prefix('`') {
            v.find('`').map_or("", |e| &v[e + 1..])
        } else if let Some(v) = after.strip_prefix('"') {
            let mut escaped = false;
            let end = v
                .char_indices()
                .find(|&(_, c)| {
                    let close = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    close
                })
                .map_or(v.len(), |(i, _)| i + 1);
            &v[end..]
        } else {
            &rest[kind_end..]
        };
    }
    out.push_str(rest);
    out
}

pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = bounded(&e.path().to_string());
        let inner = e.into_inner();
        ApiError {
            field: Some(path),
            ..ApiError::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidJson,
                bounded(&without_values(&inner.to_string())),
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
    fn errors_never_say_the_value_back_and_are_bounded() {
        for (body, said) in [
            (
                r#"{"items": [{"n": "123456789"}]}"#,
                "invalid type: string, expected u32",
            ),
            (
                r#"{"items": [{"n": "a \"quoted\" `name`"}]}"#,
                "invalid type: string, expected u32",
            ),
            (
                r#"{"items": [{"n": true}]}"#,
                "invalid type: boolean, expected u32",
            ),
            (
                r#"{"items": [{"n": 1.5}]}"#,
                "invalid type: floating point, expected u32",
            ),
            (
                r#"{"items": [{"n": -4001234567}]}"#,
                "invalid value: integer, expected u32",
            ),
        ] {
            let e = parse::<Outer>(body.as_bytes()).unwrap_err();
            let message = e.message.split(" at line").next().unwrap();
            assert_eq!(message, said, "{body}");
        }
        let long = format!(r#"{{"items": [{{"n": "{}"}}]}}"#, "9".repeat(50 << 20));
        let e = parse::<Outer>(long.as_bytes()).unwrap_err();
        assert!(!e.message.contains("999"), "{}", e.message);
        let key = format!(r#"{{"items": [{{"n": 1, "{}": 1}}]}}"#, "k".repeat(1 << 20));
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Strict {
            n: u32,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Items {
            items: Vec<Strict>,
        }
        let e = parse::<Items>(key.as_bytes()).unwrap_err();
        assert!(e.message.len() <= MAX_SAID + 3, "{} bytes", e.message.len());
        assert!(e.message.starts_with("unknown field `kkk"), "{}", e.message);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<Outer>(br#"{"items": [{"n": 1}, {"n": "x"}]}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.field.as_deref(), Some("items[1].n"));
        assert!(e.message.contains("expected u32"), "{}", e.message);
    }
}
