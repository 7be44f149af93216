//! Whether a request may see the personal data in job text (arguments, input, result,
//! errors, unique keys): decided once per request by the auth middleware from the
//! token's scope, read by the handlers that return job text.
//!
//! - `TOKEN pii`: shown. `TOKEN` (full access) and everything else: masked (see
//!   [`crate::mask`]).
//! - Without tokens (loopback only): masked, unless the server was started with
//!   `--show-personal-data`.
//! - `/v1/workers/poll` always hands out the real arguments and input: a worker cannot
//!   do the work on masked ones (mail a note to `r***@example.com`). So a token that
//!   may poll can read them by leasing jobs; the masking keeps personal data off the
//!   screens and logs of people reading runs, not from a worker fleet.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde_json::value::RawValue;

use crate::mask;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersonalData {
    Masked,
    Shown,
}

impl PersonalData {
    pub fn text(self, text: String) -> String {
        match self {
            PersonalData::Shown => text,
            PersonalData::Masked => match mask::text(&text) {
                std::borrow::Cow::Borrowed(_) => text,
                std::borrow::Cow::Owned(masked) => masked,
            },
        }
    }

    pub fn json(self, value: Box<RawValue>) -> Box<RawValue> {
        match self {
            PersonalData::Shown => value,
            PersonalData::Masked => match mask::json(value.get()) {
                std::borrow::Cow::Borrowed(_) => value,
                // Masking replaces letters and digits inside strings only, so this is
                // still JSON; were it not, nothing is shown rather than the original.
                std::borrow::Cow::Owned(masked) => {
                    RawValue::from_string(masked).unwrap_or_else(|e| {
                        tracing::error!(error = %e, "masking broke a JSON payload; shown as null");
                        RawValue::from_string("null".into()).expect("null is JSON")
                    })
                }
            },
        }
    }
}

/// Masked unless the auth middleware said otherwise: a route it did not see shows
/// nothing personal by mistake.
impl<S: Send + Sync> FromRequestParts<S> for PersonalData {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<PersonalData>()
            .copied()
            .unwrap_or(PersonalData::Masked))
    }
}
