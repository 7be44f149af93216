//! SMTP configuration: a URL without secrets, the password from the environment or a
//! file, validated into an [`Endpoint`] before any connection is made.

use std::net::IpAddr;
use std::time::Duration;

use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, TlsParameters};
use url::{Host, Url};

use crate::error::WholeMessage;
use crate::{MailError, Reason};

/// Where and how to send mail over SMTP.
///
/// `url` is one of:
/// - `smtp://[user@]host[:port]` — plain, for a local sink (port 25);
/// - `smtp://[user@]host[:port]?tls=starttls` — STARTTLS required (port 587);
///   `tls=opportunistic` upgrades only if the server offers it;
/// - `smtps://[user@]host[:port]` — implicit TLS (port 465).
///
/// `&ca=/path/ca.pem` adds a trusted root (PEM) to the built-in Mozilla roots, for a
/// relay with a private CA. A user in the URL is percent-decoded (`notes%40broker.example`).
/// The URL must not hold a password: it comes from [`SmtpConfig::password`], filled by
/// [`SmtpConfig::from_env`] from `TRANCHE_SMTP_PASSWORD` or the file named by
/// `TRANCHE_SMTP_PASSWORD_FILE`, so it never appears on a command line.
#[derive(Clone)]
pub struct SmtpConfig {
    /// The server and how to reach it, in the form above; never holds the password.
    pub url: String,
    /// At most this many connections are open at once; sends beyond wait for one.
    pub pool_size: u32,
    /// For one attempt, from connecting to the server's reply to the message.
    pub timeout: Duration,
    /// For AUTH as the URL's user (a user without a password, or the reverse, is
    /// refused). `Debug` shows only whether it is set.
    pub password: Option<String>,
    /// Attempts within one `send` for 4xx replies, connection failures and timeouts,
    /// with doubling backoff between them; then the failure is reported as temporary.
    pub max_attempts: u32,
}

impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("url", &self.url)
            .field("pool_size", &self.pool_size)
            .field("timeout", &self.timeout)
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

impl SmtpConfig {
    /// The variable holding the SMTP password.
    pub const PASSWORD_VAR: &'static str = "TRANCHE_SMTP_PASSWORD";
    /// The variable naming a file whose content (less a final newline) is the password.
    pub const PASSWORD_FILE_VAR: &'static str = "TRANCHE_SMTP_PASSWORD_FILE";

    /// Defaults: 4 connections, 60 s per attempt, 3 attempts, no password.
    pub fn new(url: impl Into<String>) -> SmtpConfig {
        SmtpConfig {
            url: url.into(),
            pool_size: 4,
            timeout: Duration::from_secs(60),
            password: None,
            max_attempts: 3,
        }
    }

    /// [`SmtpConfig::new`] with the password from `TRANCHE_SMTP_PASSWORD` or
    /// `TRANCHE_SMTP_PASSWORD_FILE` (setting both is an error).
    pub fn from_env(url: impl Into<String>) -> Result<SmtpConfig, MailError> {
        SmtpConfig::from_vars(url, |name| std::env::var(name).ok())
    }

    /// [`SmtpConfig::from_env`] reading variables through `var`, for callers (and
    /// tests) that keep their own environment.
    pub fn from_vars(
        url: impl Into<String>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<SmtpConfig, MailError> {
        let mut config = SmtpConfig::new(url);
        config.password = tranche_types::secret::from_vars(Self::PASSWORD_VAR, var)
            .map_err(|e| MailError::Invalid(tranche_types::one_line(&e).into()))?;
        Ok(config)
    }
}

/// How a connection is secured.
#[derive(Clone)]
pub(crate) enum Security {
    Plain,
    StartTls(TlsParameters),
    Opportunistic(TlsParameters),
    Implicit(TlsParameters),
}

/// A validated [`SmtpConfig`]: everything needed to open a connection.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub host: String,
    pub port: u16,
    pub security: Security,
    pub credentials: Option<Credentials>,
    pub timeout: Duration,
}

impl Endpoint {
    /// `host:port`, for error messages (no user, no password).
    pub fn server(&self) -> String {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{}]:{}", self.host, self.port),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

const URL_FORMS: &str =
    "smtp://[user@]host[:port][?tls=starttls|opportunistic] or smtps://[user@]host[:port]";

fn bad_url(what: &str) -> MailError {
    MailError::Invalid(url_problem(what).into())
}

fn url_problem(what: &str) -> String {
    format!("SMTP URL: {what} (expected {URL_FORMS})")
}

pub(crate) fn endpoint(config: &SmtpConfig) -> Result<Endpoint, MailError> {
    if config.pool_size == 0 {
        return Err(MailError::Invalid(
            "SMTP pool_size: expected at least 1, got 0".into(),
        ));
    }
    if config.max_attempts == 0 {
        return Err(MailError::Invalid(
            "SMTP max_attempts: expected at least 1, got 0".into(),
        ));
    }
    if config.timeout.is_zero() {
        return Err(MailError::Invalid(
            "SMTP timeout: expected more than 0 s".into(),
        ));
    }
    // The URL's text is not echoed: its user part is often an e-mail address.
    let url = Url::parse(&config.url)
        .map_err(|e| MailError::Invalid(Reason::because(url_problem("cannot parse it"), e)))?;
    if url.password().is_some() {
        return Err(bad_url(&format!(
            "it holds a password; remove it and set {} or {}",
            SmtpConfig::PASSWORD_VAR,
            SmtpConfig::PASSWORD_FILE_VAR
        )));
    }
    if !matches!(url.path(), "" | "/") || url.fragment().is_some() {
        return Err(bad_url("it has a path or fragment"));
    }
    let host = match url.host() {
        Some(Host::Domain(d)) => d.to_string(),
        Some(Host::Ipv4(a)) => a.to_string(),
        Some(Host::Ipv6(a)) => a.to_string(),
        None => return Err(bad_url("it has no host")),
    };

    let mut tls_mode = None;
    let mut ca = None;
    for (key, value) in url.query_pairs() {
        match &*key {
            "tls" => tls_mode = Some(value.into_owned()),
            "ca" => ca = Some(value.into_owned()),
            other => return Err(bad_url(&format!("unknown parameter `{other}`"))),
        }
    }
    let tls = |host: &str| -> Result<TlsParameters, MailError> {
        let mut builder = TlsParameters::builder(host.to_string());
        if let Some(path) = &ca {
            let pem = std::fs::read(path).map_err(|e| {
                MailError::Invalid(Reason::because(
                    format!("SMTP URL ca = {path}: cannot read it"),
                    e,
                ))
            })?;
            let cert = Certificate::from_pem(&pem).map_err(|e| {
                MailError::Invalid(Reason::because(
                    format!("SMTP URL ca = {path}: expected a PEM certificate"),
                    WholeMessage(e),
                ))
            })?;
            builder = builder.add_root_certificate(cert);
        }
        builder
            .build_rustls()
            .map_err(|e| MailError::Invalid(Reason::because("SMTP TLS settings", WholeMessage(e))))
    };
    let (security, default_port) = match (url.scheme(), tls_mode.as_deref()) {
        ("smtp", None | Some("none")) => (Security::Plain, 25),
        ("smtp", Some("starttls")) => (Security::StartTls(tls(&host)?), 587),
        ("smtp", Some("opportunistic")) => (Security::Opportunistic(tls(&host)?), 587),
        ("smtps", None | Some("implicit")) => (Security::Implicit(tls(&host)?), 465),
        ("smtp" | "smtps", Some(other)) => {
            return Err(bad_url(&format!("unknown tls mode `{other}`")))
        }
        (other, _) => return Err(bad_url(&format!("unknown scheme `{other}`"))),
    };
    if matches!(security, Security::Plain) && ca.is_some() {
        return Err(bad_url("`ca` given for a plain connection"));
    }

    let user = percent_encoding::percent_decode_str(url.username())
        .decode_utf8()
        .map_err(|_| bad_url("the user is not UTF-8"))?
        .into_owned();
    let credentials = match (user.is_empty(), &config.password) {
        (true, None) => None,
        (false, Some(password)) => Some(Credentials::new(user, password.clone())),
        (false, None) => {
            return Err(MailError::Invalid(
                format!(
                    "the SMTP URL names a user but no password is set: set {} or {}",
                    SmtpConfig::PASSWORD_VAR,
                    SmtpConfig::PASSWORD_FILE_VAR
                )
                .into(),
            ))
        }
        (true, Some(_)) => {
            return Err(bad_url(
                "a password is set but the URL names no user (smtp://user@host)",
            ))
        }
    };
    // A password in clear text is only acceptable to a sink on this machine.
    if credentials.is_some() && matches!(security, Security::Plain) && !is_loopback(&url) {
        return Err(bad_url(
            "credentials over an unencrypted connection to another host; use ?tls=starttls or smtps://",
        ));
    }

    Ok(Endpoint {
        port: url.port().unwrap_or(default_port),
        host,
        security,
        credentials,
        timeout: config.timeout,
    })
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        // `smtp:` is not a special scheme to the URL parser: IPv4 hosts come as domains.
        Some(Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost")
                || d.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
        }
        Some(Host::Ipv4(a)) => a.is_loopback(),
        Some(Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, password: Option<&str>) -> SmtpConfig {
        SmtpConfig {
            password: password.map(str::to_string),
            ..SmtpConfig::new(url)
        }
    }

    fn err(url: &str, password: Option<&str>) -> String {
        match endpoint(&config(url, password)) {
            Err(MailError::Invalid(m)) => m.to_string(),
            Err(e) => panic!("{url}: expected Invalid, got {e}"),
            Ok(_) => panic!("{url}: accepted"),
        }
    }

    #[test]
    fn urls_pick_security_and_default_ports() {
        let e = endpoint(&config("smtp://127.0.0.1:2525", None)).unwrap();
        assert!(matches!(e.security, Security::Plain));
        assert_eq!(e.server(), "127.0.0.1:2525");
        let e = endpoint(&config("smtp://mail.example?tls=starttls", None)).unwrap();
        assert!(matches!(e.security, Security::StartTls(_)));
        assert_eq!(e.port, 587);
        let e = endpoint(&config(
            "smtps://notes%40broker.example@mail.example",
            Some("pw"),
        ))
        .unwrap();
        assert!(matches!(e.security, Security::Implicit(_)));
        assert_eq!(e.port, 465);
        assert!(e.credentials.is_some());
        let e = endpoint(&config("smtp://[::1]:25", None)).unwrap();
        assert_eq!(e.server(), "[::1]:25");
    }

    #[test]
    fn secrets_stay_out_of_urls_and_clear_text() {
        let m = err("smtp://user:secret@mail.example?tls=starttls", None);
        assert!(m.contains("TRANCHE_SMTP_PASSWORD"), "{m}");
        assert!(!m.contains("secret"), "{m}");
        let m = err("smtp://user@mail.example?tls=starttls", None);
        assert!(m.contains("no password"), "{m}");
        let m = err("smtp://user@mail.example", Some("pw"));
        assert!(m.contains("unencrypted"), "{m}");
        // A local sink may take a password in clear.
        endpoint(&config("smtp://user@127.0.0.1:2525", Some("pw"))).unwrap();
        err("smtp://mail.example", Some("pw"));
        err("smtp://mail.example?tls=bogus", None);
        err("smtp://mail.example?tsl=starttls", None);
        err("http://mail.example", None);
        err("not a url", None);
    }

    #[test]
    fn password_from_variable_or_file_not_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let file = file.display().to_string();
        let vars = |pairs: Vec<(&'static str, String)>| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.clone())
            }
        };
        let c = SmtpConfig::from_vars(
            "smtp://h",
            vars(vec![(SmtpConfig::PASSWORD_VAR, "pw".into())]),
        )
        .unwrap();
        assert_eq!(c.password.as_deref(), Some("pw"));
        let c = SmtpConfig::from_vars(
            "smtp://h",
            vars(vec![(SmtpConfig::PASSWORD_FILE_VAR, file.clone())]),
        )
        .unwrap();
        assert_eq!(c.password.as_deref(), Some("s3cret"));
        assert!(!format!("{c:?}").contains("s3cret"));
        let both = vars(vec![
            (SmtpConfig::PASSWORD_VAR, "pw".into()),
            (SmtpConfig::PASSWORD_FILE_VAR, file),
        ]);
        assert!(SmtpConfig::from_vars("smtp://h", both).is_err());
        let c = SmtpConfig::from_vars("smtp://h", vars(vec![])).unwrap();
        assert_eq!(c.password, None);
    }
}
