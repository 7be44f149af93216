use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tranche_types::BackendError;

/// An error answered as `{"error": {"code", "message", "field"?}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Where in the request body the problem is, e.g. `items[3].job.kind`.
    pub field: Option<String>,
    pub retry_after_secs: Option<u64>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after_secs: None,
        }
    }

    /// 400 for a request field that is well-formed JSON but not acceptable.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            field: Some(field.into()),
            ..ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        match &e {
            BackendError::Invalid { field, .. } => ApiError::invalid(*field, e.to_string()),
            BackendError::NotFound { .. } => ApiError::not_found(e.to_string()),
            // A broker outage is transient: 503 tells clients to try again.
            BackendError::Closed | BackendError::Unavailable { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                e.to_string(),
            ),
            // 507 Insufficient Storage: the server cannot store what was asked until
            // an operator frees space; clients may retry later.
            BackendError::Full { .. } => {
                tracing::error!(error = %e, "backend's disk is full");
                ApiError::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "storage_full",
                    e.to_string(),
                )
            }
            BackendError::Store { .. } => {
                tracing::error!(error = %e, "backend failed");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "backend", e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Detail {
                code: self.code,
                message: &self.message,
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
