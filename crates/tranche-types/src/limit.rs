//! Rate limits and fleet-wide concurrency caps: what a backend stores per scope (a
//! queue or a task kind) and enforces in `reserve`, for every process sharing it.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{BackendError, JobSpec, TooLong};

/// What a limit applies to: every job of a queue, or every job of a task kind (in
/// whatever queue it is).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// The jobs of this queue.
    Queue(String),
    /// The jobs of this task kind, in every queue.
    Kind(String),
}

impl LimitScope {
    /// `"queue"` or `"kind"`: how the scope is named in paths, tables and keys.
    pub fn scope_type(&self) -> &'static str {
        match self {
            LimitScope::Queue(_) => "queue",
            LimitScope::Kind(_) => "kind",
        }
    }

    /// The queue's or kind's name.
    pub fn name(&self) -> &str {
        match self {
            LimitScope::Queue(n) | LimitScope::Kind(n) => n,
        }
    }

    /// The scope from its type (`"queue"` or `"kind"`) and name.
    pub fn parse(scope_type: &str, name: &str) -> Result<Self, BackendError> {
        let scope = match scope_type {
            "queue" => LimitScope::Queue(name.to_string()),
            "kind" => LimitScope::Kind(name.to_string()),
            other => {
                return Err(BackendError::Invalid {
                    field: "scope",
                    expected: "\"queue\" or \"kind\"".into(),
                    got: format!("{other:?}"),
                })
            }
        };
        scope.check()?;
        Ok(scope)
    }

    /// A name an enqueue would accept for a queue or a kind.
    pub fn check(&self) -> Result<(), BackendError> {
        let (field, max) = match self {
            LimitScope::Queue(_) => ("queue", JobSpec::MAX_QUEUE_LEN),
            LimitScope::Kind(_) => ("kind", JobSpec::MAX_KIND_LEN),
        };
        let name = self.name();
        if name.is_empty() {
            return Err(BackendError::Invalid {
                field,
                expected: format!("a non-empty {field} name"),
                got: "\"\"".into(),
            });
        }
        if name.len() > max {
            return Err(TooLong {
                field,
                max,
                got: name.len(),
            }
            .into());
        }
        Ok(())
    }
}

impl fmt::Display for LimitScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.scope_type(), self.name())
    }
}

/// At most `count` starts in any window of `per_ms` milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StartRate {
    /// Starts allowed per window (1 ..= [`StartRate::MAX_COUNT`]).
    pub count: u32,
    /// The window's length in milliseconds (1 ..= [`StartRate::MAX_PER_MS`]).
    pub per_ms: u64,
}

impl StartRate {
    /// Backends keep one entry per granting reserve of the last window; this bounds it.
    pub const MAX_COUNT: u32 = 1_000_000;
    /// A week: longer windows are schedules, not rates.
    pub const MAX_PER_MS: u64 = 7 * 24 * 3600 * 1000;

    /// The window as a duration.
    pub fn per(&self) -> Duration {
        Duration::from_millis(self.per_ms)
    }

    /// The window in µs, the backends' unit of time.
    pub fn per_us(&self) -> i64 {
        (self.per_ms as i64) * 1000
    }
}

/// A limit on a scope's jobs, enforced by the backend across every process sharing it.
///
/// - `starts`: a strict sliding window: within any interval of `per_ms` (half-open, as
///   `[t, t + per)`) at most `count` of the scope's jobs start. A start is a reserve
///   of an attempt: retries count, a snooze or release gives nothing back.
/// - `running`: at most this many of the scope's jobs are running (leased) at once.
///
/// A job is subject to its queue's limit and its kind's limit, both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Limit {
    /// What it applies to.
    pub scope: LimitScope,
    /// At most this many starts per window, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts: Option<StartRate>,
    /// At most this many running at once, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<u32>,
}

impl Limit {
    /// The scope's name is one an enqueue accepts, at least one of `starts` and
    /// `running` is set, and each is in range.
    pub fn check(&self) -> Result<(), BackendError> {
        self.scope.check()?;
        if self.starts.is_none() && self.running.is_none() {
            return Err(BackendError::Invalid {
                field: "limit",
                expected: "starts per window, a running cap, or both".into(),
                got: "neither".into(),
            });
        }
        if let Some(rate) = self.starts {
            if rate.count == 0 || rate.count > StartRate::MAX_COUNT {
                return Err(BackendError::Invalid {
                    field: "starts.count",
                    expected: format!("1 to {}", StartRate::MAX_COUNT),
                    got: rate.count.to_string(),
                });
            }
            if rate.per_ms == 0 || rate.per_ms > StartRate::MAX_PER_MS {
                return Err(BackendError::Invalid {
                    field: "starts.per_ms",
                    expected: format!("1 to {} (a week)", StartRate::MAX_PER_MS),
                    got: rate.per_ms.to_string(),
                });
            }
        }
        if self.running == Some(0) {
            return Err(BackendError::Invalid {
                field: "running",
                expected: "at least 1 (pause the queue to run none)".into(),
                got: "0".into(),
            });
        }
        Ok(())
    }
}

/// A stored limit and how much of it is in use now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LimitStatus {
    /// The limit as declared.
    pub limit: Limit,
    /// The scope's jobs running now.
    pub running_now: u64,
    /// Starts within the last window (0 without a start rate).
    pub starts_in_window: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(starts: Option<(u32, u64)>, running: Option<u32>) -> Limit {
        Limit {
            scope: LimitScope::Queue("bank".into()),
            starts: starts.map(|(count, per_ms)| StartRate { count, per_ms }),
            running,
        }
    }

    fn field_of(l: &Limit) -> &'static str {
        match l.check() {
            Err(BackendError::Invalid { field, .. }) => field,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn out_of_range_limits_name_their_field() {
        assert!(limit(Some((1, 15_000)), None).check().is_ok());
        assert!(limit(None, Some(2)).check().is_ok());
        assert_eq!(field_of(&limit(None, None)), "limit");
        assert_eq!(field_of(&limit(Some((0, 1000)), None)), "starts.count");
        assert_eq!(field_of(&limit(Some((1, 0)), None)), "starts.per_ms");
        assert_eq!(field_of(&limit(None, Some(0))), "running");
        let empty = Limit {
            scope: LimitScope::Kind(String::new()),
            ..limit(None, Some(1))
        };
        assert_eq!(field_of(&empty), "kind");
    }

    #[test]
    fn the_wire_form_names_the_scope() {
        let json = serde_json::to_string(&limit(Some((5, 1000)), Some(2))).unwrap();
        assert_eq!(
            json,
            r#"{"scope":{"queue":"bank"},"starts":{"count":5,"per_ms":1000},"running":2}"#
        );
        assert!(LimitScope::parse("shelf", "x").is_err());
    }
}
