//! Where job state lives: the embedded SQLite file in `--data DIR` (the default), or a
//! Redis server given by `--broker redis://…` (a fleet sharing it).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tranche_core::{Client, Outage};
use tranche_redis::{redacted_url, RedisBackend, RedisOptions};
use tranche_sqlite::{SqliteBackend, SqliteOptions};
use tranche_types::{Clock, RunName, SystemClock};

use crate::cli::DataArgs;
use crate::output::{duration, server_address, when};
use crate::secrets;

/// The Redis password comes from here (or the file named by `…_FILE`), never the URL.
pub const REDIS_PASSWORD_VAR: &str = "TRANCHE_REDIS_PASSWORD";

impl DataArgs {
    /// Where the state is, for messages: the directory, or the broker without secrets.
    pub fn describe(&self) -> String {
        match &self.broker {
            Some(url) => format!(
                "Redis at {} (prefix {})",
                server_address(url, 6379),
                self.prefix
            ),
            None => self.data.display().to_string(),
        }
    }

    /// The `--data DIR` or `--broker URL` arguments that name this state, for commands
    /// printed for the user to run next.
    pub fn as_args(&self) -> String {
        match &self.broker {
            Some(url) => format!("--broker {}", redacted_url(url)),
            None => format!("--data {}", self.data.display()),
        }
    }
}

/// Open the state, creating it (an embedded database, or nothing to create in Redis).
pub async fn open(at: &DataArgs) -> Result<Client> {
    match &at.broker {
        Some(url) => open_redis(url, &at.prefix).await,
        None => open_with(&at.data, SqliteOptions::default()),
    }
}

pub fn open_with(dir: &Path, options: SqliteOptions) -> Result<Client> {
    let backend = SqliteBackend::open(dir, options)
        .with_context(|| format!("could not open Tranche data in {}", dir.display()))?;
    Ok(Client::new(backend))
}

pub async fn open_redis(url: &str, prefix: &str) -> Result<Client> {
    let options = RedisOptions {
        url: url.to_string(),
        password: secrets::from_env(REDIS_PASSWORD_VAR)?,
        prefix: prefix.to_string(),
        ..RedisOptions::default()
    };
    let backend = RedisBackend::connect(options)
        .await
        .with_context(|| format!("could not use the broker {}", server_address(url, 6379)))?;
    Ok(Client::new(backend))
}

/// For a long-running command: on a broker, calls ride out an outage of up to
/// `--reconnect-for` instead of failing on the first broken connection, and stderr
/// says once when the broker is lost and once when it is back.
pub fn riding_outages(backend: Client, at: &DataArgs) -> Client {
    let Some(url) = &at.broker else {
        return backend;
    };
    let broker = server_address(url, 6379);
    let report = move |outage: Outage<'_>| match outage {
        Outage::Lost { error, retry_for } => eprintln!(
            "lost the broker {broker} at {} ({error}): reconnecting for up to {} s",
            when(Some(SystemClock.now())),
            retry_for.as_secs()
        ),
        Outage::Back { after } => {
            eprintln!("the broker {broker} is back (after {})", duration(after))
        }
        Outage::GaveUp { after } => eprintln!(
            "gave up on the broker {broker}: unreachable for {} (see --reconnect-for)",
            duration(after)
        ),
    };
    backend.riding_outages(Duration::from_secs(at.reconnect_for), report)
}

/// Open state that must already exist: commands that only inspect or steer must not
/// create an empty database by mistake (a typo in --data).
pub async fn open_existing(at: &DataArgs) -> Result<Client> {
    open_existing_with(at, SqliteOptions::default()).await
}

/// [`open_existing`], with these options for the embedded state.
pub async fn open_existing_with(at: &DataArgs, options: SqliteOptions) -> Result<Client> {
    if at.broker.is_none() {
        let file = at.data.join(SqliteBackend::FILE_NAME);
        if !file.exists() {
            bail!(
                "no Tranche data in {} (expected {}): pass --data DIR (or --broker redis://…) to where your runs are",
                at.data.display(),
                file.display()
            );
        }
    }
    match &at.broker {
        Some(url) => open_redis(url, &at.prefix).await,
        None => open_with(&at.data, options),
    }
}

pub fn run_name(name: &str) -> Result<RunName> {
    RunName::new(name).map_err(|e| anyhow::anyhow!("{e}"))
}
