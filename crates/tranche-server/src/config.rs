use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tranche_http_door::{Limits, LimitsError};

use crate::auth::Tokens;

/// How the server runs. Build one, then [`ServerConfig::validate`] before serving.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where it listens; without tokens only a loopback address is accepted.
    pub listen: SocketAddr,
    /// Who may call the API; none means no auth, allowed only on loopback.
    pub tokens: Tokens,
    /// Per-queue caps on waiting jobs, past which submissions are answered 429.
    pub queue_limits: QueueLimits,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Most jobs in one submit request (and results in one complete/fail request).
    pub max_jobs_per_request: usize,
    /// Longest `wait` a poll or an events read may ask for.
    pub max_wait: Duration,
    /// Most jobs one poll may ask for.
    pub max_poll: usize,
    /// Lease given to polled jobs when the worker does not ask for one.
    pub default_lease: Duration,
    /// What the listener tolerates of its clients (`tranche-http-door`, shared with the
    /// order-state feed's listener): header, idle and body timeouts and a connection
    /// cap. A body later than its timeout is answered 408 `body_timeout`. Only reading
    /// a request is timed, never the answer, so long-polls still wait their whole
    /// `wait`.
    pub door: Limits,
    /// Show personal data (PANs, e-mail addresses) in job text to every caller of a
    /// server without tokens; masked otherwise. With tokens, `TOKEN pii` entries decide.
    pub show_personal_data: bool,
    /// The ACH entry ledger behind `/v1/ach/*`; without one those routes answer 404
    /// `no_ledger`.
    pub ledger: Option<crate::ach::LedgerHandle>,
    /// The ACH rules whose banks and windows `/v1/ach/status` lists, with the windows'
    /// times; without them it lists the banks and windows the day's entries and files
    /// name, without times.
    pub ach_rules: Option<Arc<tranche_ach_rules::Rules>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 7070)),
            tokens: Tokens::default(),
            queue_limits: QueueLimits::default(),
            body_limit: 64 << 20,
            max_jobs_per_request: 10_000,
            max_wait: Duration::from_secs(60),
            max_poll: 1000,
            default_lease: Duration::from_secs(30),
            door: Limits::default(),
            show_personal_data: false,
            ledger: None,
            ach_rules: None,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A non-loopback address without tokens would open the API to the network.
    #[error("refusing to listen on {0} without tokens: bind a loopback address, or pass --tokens FILE or set TRANCHE_TOKENS")]
    OpenWithoutTokens(SocketAddr),
    /// A setting is out of range, or a queue limit could not be parsed.
    #[error("invalid {field}: expected {expected}, got {got}")]
    Invalid {
        /// The setting, named as in [`ServerConfig`] (or `queue limit`).
        field: &'static str,
        /// What would be accepted, for the message.
        expected: &'static str,
        /// The value given.
        got: String,
    },
}

impl From<LimitsError> for ConfigError {
    fn from(e: LimitsError) -> ConfigError {
        ConfigError::Invalid {
            field: e.field,
            expected: e.expected,
            got: e.got,
        }
    }
}

impl ServerConfig {
    /// Refuse an open address without tokens, `show_personal_data` with tokens, and
    /// limits, lease and timeouts that are zero or too small. [`crate::serve`] calls it
    /// too; call it first to report a bad configuration before opening anything.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.tokens.is_empty() && !self.listen.ip().is_loopback() {
            return Err(ConfigError::OpenWithoutTokens(self.listen));
        }
        // One way to grant it: with tokens, a setting for everyone would silently
        // override the per-token choice.
        if self.show_personal_data && !self.tokens.is_empty() {
            return Err(ConfigError::Invalid {
                field: "show_personal_data",
                expected: "only without tokens (with tokens, give `TOKEN pii` to who may see personal data)",
                got: format!("{} token(s)", self.tokens.len()),
            });
        }
        let check = |ok: bool, field, expected, got: String| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::Invalid {
                    field,
                    expected,
                    got,
                })
            }
        };
        check(
            self.max_jobs_per_request > 0,
            "max_jobs_per_request",
            "at least 1",
            self.max_jobs_per_request.to_string(),
        )?;
        check(
            self.max_poll > 0,
            "max_poll",
            "at least 1",
            self.max_poll.to_string(),
        )?;
        check(
            self.body_limit >= 1024,
            "body_limit",
            "at least 1024 bytes",
            self.body_limit.to_string(),
        )?;
        check(
            self.default_lease >= Duration::from_secs(1),
            "default_lease",
            "at least 1 s",
            format!("{:?}", self.default_lease),
        )?;
        Ok(self.door.validate()?)
    }

    /// Requests need a token unless there are none and the server is only reachable
    /// from this machine.
    pub(crate) fn auth_required(&self) -> bool {
        !self.tokens.is_empty()
    }
}

/// Most available jobs a queue may hold before submissions to it are refused (429).
/// Start from `Default` (no limits) and [`QueueLimits::add`] each one.
#[derive(Clone, Debug, Default)]
pub struct QueueLimits {
    /// For queues not in `per_queue`; `None` leaves them unlimited.
    default: Option<u64>,
    per_queue: HashMap<String, u64>,
}

impl QueueLimits {
    pub(crate) fn limit(&self, queue: &str) -> Option<u64> {
        self.per_queue.get(queue).copied().or(self.default)
    }

    /// Add one limit as given on the command line: `N` for every queue without its own,
    /// or `QUEUE=N`. A later limit for the same queue replaces the earlier one.
    pub fn add(&mut self, spec: &str) -> Result<(), ConfigError> {
        let bad = || ConfigError::Invalid {
            field: "queue limit",
            expected: "N or QUEUE=N with N a whole number",
            got: format!("{spec:?}"),
        };
        match spec.split_once('=') {
            Some((queue, n)) if !queue.is_empty() => {
                let n = n.trim().parse().map_err(|_| bad())?;
                self.per_queue.insert(queue.trim().to_string(), n);
            }
            Some(_) => return Err(bad()),
            None => self.default = Some(spec.trim().parse().map_err(|_| bad())?),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_addresses_need_tokens() {
        let mut c = ServerConfig {
            listen: "0.0.0.0:8080".parse().unwrap(),
            ..ServerConfig::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::OpenWithoutTokens(_))
        ));
        c.tokens = Tokens::parse("secret-1", "tokens").unwrap();
        assert!(c.validate().is_ok());
        c.listen = "[::1]:8080".parse().unwrap();
        c.tokens = Tokens::default();
        assert!(c.validate().is_ok(), "loopback needs no token");
    }

    #[test]
    fn personal_data_is_shown_to_all_only_without_tokens() {
        let mut c = ServerConfig {
            show_personal_data: true,
            ..ServerConfig::default()
        };
        assert!(c.validate().is_ok());
        c.tokens = Tokens::parse("secret-1", "tokens").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("TOKEN pii"), "{err}");
    }

    #[test]
    fn timeouts_and_the_connection_cap_must_be_positive() {
        for c in [
            Limits {
                header_timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                idle_timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                body_timeout: Duration::ZERO,
                ..Limits::default()
            },
            Limits {
                max_connections: 0,
                ..Limits::default()
            },
        ]
        .map(|door| ServerConfig {
            door,
            ..ServerConfig::default()
        }) {
            assert!(c.validate().is_err(), "{c:?}");
        }
        assert!(ServerConfig::default().validate().is_ok());
    }

    #[test]
    fn queue_limits_parse() {
        let mut l = QueueLimits::default();
        l.add("1000").unwrap();
        l.add("pdf=10").unwrap();
        assert_eq!((l.limit("pdf"), l.limit("mail")), (Some(10), Some(1000)));
        assert!(l.add("pdf=x").is_err());
        assert!(l.add("=5").is_err());
    }
}
