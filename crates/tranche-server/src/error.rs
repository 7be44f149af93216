//! The one error type every handler, extractor and middleware answers with, as
//! `{"error": {"code", "message", "field"?}}`.
//!
//! A client error (4xx) tells the client what to change, so its message is sent. A
//! server error (5xx) is the server's business: what failed inside (a SQLite message, a
//! Redis address, a file path) is logged with its whole chain of causes under a fresh
//! request id, and the client gets only its stable code, a fixed sentence and that id
//! to quote to an operator. This holds for every 5xx however it was built, so no
//! handler can leak internals by mistake.

use std::error::Error;
use std::fmt;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tranche_types::BackendError;
use utoipa::ToSchema;

pub type Cause = Box<dyn Error + Send + Sync>;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    /// Sent to the client for a 4xx; for a 5xx only logged (see [`ApiError::server`]).
    pub message: String,
    /// Where in the request body the problem is, e.g. `items[3].job.kind`.
    pub field: Option<String>,
    pub retry_after_secs: Option<u64>,
    /// Why the server failed: logged with its sources, never sent.
    pub cause: Option<Cause>,
}

/// What went wrong, for programs: stable across releases, unlike the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A field is well-formed JSON but not acceptable (400).
    InvalidRequest,
    /// The body is not JSON of the expected shape (400).
    InvalidJson,
    /// The body could not be read (400).
    UnreadableBody,
    /// The bearer token is missing or not valid (401).
    Unauthorized,
    /// A worker token used an endpoint outside `/v1/workers/` (403).
    Forbidden,
    /// No such run or job (404).
    NotFound,
    /// The server has no ACH entry ledger configured: `/v1/ach/*` is off (404).
    NoLedger,
    /// Too late: the entry's file has begun its submission to the bank (409).
    TooLate,
    /// The thing is not in a state that allows the call (a workflow already ended),
    /// or it changed while the call ran (409).
    Conflict,
    /// The body did not arrive within the server's body timeout (408).
    BodyTimeout,
    /// The body is over the server's size limit (413).
    TooLarge,
    /// A queue holds its limit of waiting jobs; retry after Retry-After (429).
    QueueFull,
    /// The server failed; the message names a request id to find it in the log (500).
    Internal,
    /// The backend cannot be reached now; retry later (503).
    Unavailable,
    /// The backend's disk is full; retry once an operator has freed space (507).
    StorageFull,
}

/// The body of every error answer, 4xx and 5xx.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    error: ErrorDetail<'a>,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail<'a> {
    /// Stable: branch on this, not on `message`.
    code: ErrorCode,
    /// For people: what to change (4xx), or a fixed sentence with a request id to quote
    /// to an operator (5xx).
    message: &'a str,
    /// Path of the offending field, e.g. `items[3].job.kind`.
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ApiError {
    /// A client error: `message` is sent as is.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after_secs: None,
            cause: None,
        }
    }

    /// A server error: `what` (what was being done) and `cause` go to the log only.
    pub fn server(
        status: StatusCode,
        code: ErrorCode,
        what: impl Into<String>,
        cause: impl Into<Cause>,
    ) -> Self {
        ApiError {
            cause: Some(cause.into()),
            ..ApiError::new(status, code, what)
        }
    }

    /// 400 for a request field that is well-formed JSON but not acceptable.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            field: Some(field.into()),
            ..ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, message)
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        match &e {
            // The caller's mistakes: their text is about the request, not the store.
            BackendError::Invalid { field, .. } => ApiError::invalid(*field, e.to_string()),
            BackendError::NotFound { .. } => ApiError::not_found(e.to_string()),
            BackendError::Conflict { .. } => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, e.to_string())
            }
            // A broker outage is transient: 503 tells clients to try again.
            BackendError::Closed | BackendError::Unavailable { .. } => ApiError::server(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                "backend unavailable",
                e,
            ),
            // 507 Insufficient Storage: the server cannot store what was asked until
            // an operator frees space; clients may retry later.
            BackendError::Full { .. } => ApiError::server(
                StatusCode::INSUFFICIENT_STORAGE,
                ErrorCode::StorageFull,
                "backend's disk is full",
                e,
            ),
            BackendError::Store { .. } => ApiError::server(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::Internal,
                "backend failed",
                e,
            ),
        }
    }
}

/// What a client is told of a server error: nothing from inside the server.
fn public_message(status: StatusCode) -> &'static str {
    match status {
        StatusCode::SERVICE_UNAVAILABLE => "the backend is unavailable, retry later",
        StatusCode::INSUFFICIENT_STORAGE => {
            "the server's storage is full, retry once an operator has freed space"
        }
        _ => "internal error, see server log",
    }
}

/// An error and its sources, `outer: inner: innermost`, none said twice.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&tranche_types::one_line(self.0))
    }
}

/// Names one failed request in the log and in its answer; random, so ids from
/// several servers or restarts do not collide.
pub fn request_id() -> String {
    format!("{:016x}", fastrand::u64(..))
}

impl ApiError {
    /// Logs a server error and returns the message the client gets instead.
    fn log_server_error(&self) -> String {
        let request_id = request_id();
        let status = self.status.as_u16();
        let cause = self
            .cause
            .as_deref()
            .map(|c| Chain(c).to_string())
            .unwrap_or_default();
        let what = &self.message;
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(%request_id, status, code = ?self.code, error = %cause, "{what}");
        } else {
            tracing::error!(%request_id, status, code = ?self.code, error = %cause, "{what}");
        }
        format!("{} (request id {request_id})", public_message(self.status))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let sent = if self.status.is_server_error() {
            self.log_server_error()
        } else {
            self.message.clone()
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: &sent,
                field: self.field.as_deref(),
            },
        };
        let mut resp = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use axum::body::to_bytes;

    use super::*;

    /// Collects what the fmt subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn answer_and_log(e: ApiError) -> (StatusCode, serde_json::Value, String) {
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let resp = tracing::subscriber::with_default(subscriber, || e.into_response());
        let status = resp.status();
        let body = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(to_bytes(resp.into_body(), usize::MAX))
            .unwrap();
        let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        (status, serde_json::from_slice(&body).unwrap(), log)
    }

    #[test]
    fn a_server_error_is_logged_with_its_cause_and_answered_without_it() {
        let inner = io::Error::other("disk I/O error at /srv/tranche/tranche.db");
        let (status, body, log) = answer_and_log(BackendError::store("enqueue", inner).into());
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body["error"]["code"], "internal");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(!message.contains("/srv"), "{message}");
        assert!(!message.contains("enqueue"), "{message}");
        let id = message
            .strip_prefix("internal error, see server log (request id ")
            .and_then(|m| m.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{message}"));
        assert!(log.contains(id), "{log}");
        assert!(log.contains("enqueue"), "{log}");
        assert!(
            log.contains("disk I/O error at /srv/tranche/tranche.db"),
            "{log}"
        );
    }

    #[test]
    fn unavailable_and_full_backends_say_what_to_do_and_nothing_more() {
        let unavailable = BackendError::Unavailable {
            op: "reserve",
            source: "connection refused (10.1.2.3:6379)".into(),
            maybe_applied: false,
        };
        let (status, body, log) = answer_and_log(unavailable.into());
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "unavailable");
        assert!(!body.to_string().contains("10.1.2.3"), "{body}");
        assert!(log.contains("10.1.2.3"), "{log}");

        let full = BackendError::Full {
            op: "enqueue",
            path: "/srv/tranche/tranche.db".into(),
            source: "database or disk is full".into(),
        };
        let (status, body, log) = answer_and_log(full.into());
        assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE);
        assert_eq!(body["error"]["code"], "storage_full");
        assert!(!body.to_string().contains("/srv"), "{body}");
        assert!(log.contains("/srv/tranche/tranche.db"), "{log}");
    }

    #[test]
    fn a_client_error_is_answered_as_is_and_not_logged() {
        let (status, body, log) = answer_and_log(ApiError::invalid("max", "expected 1 to 10"));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(
            body,
            serde_json::json!({"error": {"code": "invalid_request", "message": "expected 1 to 10", "field": "max"}})
        );
        assert!(log.is_empty(), "{log}");
    }
}
