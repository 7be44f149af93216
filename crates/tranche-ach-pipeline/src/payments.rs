//! [`Payments`]: what every step of the pipeline holds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tranche_ach_delivery::{Delivery, Outbox, Sftp, SftpTarget};
use tranche_ach_ledger::{Ledger, LedgerError};
use tranche_ach_rules::{BankRules, Rules, Window};
use tranche_core::{Client, Registry};
use tranche_storage::{Storage, StorageError};
use tranche_types::{BackendError, Limit, LimitScope, StartRate};

use crate::naming;
use crate::space::{Destinations, FullDestination};
use crate::step_error::StepError;
use crate::tasks::{self, Scope};

/// Why a call of the pipeline (a tick, a status) failed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The ledger failed.
    #[error("the ACH ledger failed")]
    Ledger(#[from] LedgerError),
    /// The engine's backend failed.
    #[error("the engine failed")]
    Backend(#[from] BackendError),
    /// The store failed.
    #[error("the file store failed")]
    Store(#[from] StorageError),
    /// A scope the rules do not know (a bank or window removed from ach.toml while
    /// its files wait).
    #[error("{0}")]
    Rules(String),
}

/// The engine, the ledger, the store and the rules, shared by every step. Cheap to
/// clone.
#[derive(Clone)]
pub struct Payments {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    ledger: Arc<dyn Ledger>,
    store: Arc<dyn Storage>,
    rules: Rules,
    /// Deliveries given by the caller (tests, embedders) by bank, before the rules'.
    given: HashMap<String, Arc<dyn Delivery>>,
    /// Deliveries opened from the rules, on first use (an SFTP server that is down
    /// must not stop the packaging of other banks).
    opened: tokio::sync::Mutex<HashMap<String, Arc<dyn Delivery>>>,
    /// Destinations where the last delivery did not fit.
    destinations: Destinations,
}

impl std::fmt::Debug for Payments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payments")
            .field(
                "banks",
                &self
                    .inner
                    .rules
                    .banks
                    .iter()
                    .map(|b| &b.profile.bank)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Payments {
    /// The pipeline on `client`'s engine, `ledger`, `store` and `rules`.
    pub fn new(
        client: Client,
        ledger: Arc<dyn Ledger>,
        store: Arc<dyn Storage>,
        rules: Rules,
    ) -> Self {
        Self::with_deliveries(client, ledger, store, rules, HashMap::new())
    }

    /// As [`Payments::new`], with some banks' deliveries given instead of opened from
    /// the rules.
    pub fn with_deliveries(
        client: Client,
        ledger: Arc<dyn Ledger>,
        store: Arc<dyn Storage>,
        rules: Rules,
        given: HashMap<String, Arc<dyn Delivery>>,
    ) -> Self {
        Payments {
            inner: Arc::new(Inner {
                client,
                ledger,
                store,
                rules,
                given,
                opened: tokio::sync::Mutex::new(HashMap::new()),
                destinations: Destinations::default(),
            }),
        }
    }

    /// The engine's client.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The destinations whose disk is full now: their banks' uploads wait for space.
    pub fn full_destinations(&self) -> Vec<FullDestination> {
        self.inner.destinations.now_full()
    }

    pub(crate) fn destinations(&self) -> &Destinations {
        &self.inner.destinations
    }

    /// The entry ledger.
    pub fn ledger(&self) -> &Arc<dyn Ledger> {
        &self.inner.ledger
    }

    /// Where files and manifests are kept.
    pub fn store(&self) -> &Arc<dyn Storage> {
        &self.inner.store
    }

    /// The rules.
    pub fn rules(&self) -> &Rules {
        &self.inner.rules
    }

    /// The pipeline's task kinds, for a worker on [`tasks::QUEUE`].
    pub fn registry(&self) -> Registry {
        tasks::registry(self)
    }

    /// Declare each bank's upload pacing as a limit on its upload kind, for every
    /// process sharing the engine: at most one upload starts per `pacing`, and one runs
    /// at a time. A bank with no pacing gets the running cap only.
    pub async fn apply_pacing(&self) -> Result<(), PipelineError> {
        for bank in &self.inner.rules.banks {
            let starts = (bank.pacing >= Duration::from_millis(1)).then_some(StartRate {
                count: 1,
                per_ms: bank.pacing.as_millis() as u64,
            });
            let limit = Limit {
                scope: LimitScope::Kind(naming::upload_kind(&bank.profile.bank)),
                starts,
                running: Some(1),
            };
            self.inner.client.put_limit(&limit).await?;
        }
        Ok(())
    }

    pub(crate) fn bank(&self, name: &str) -> Result<&BankRules, StepError> {
        self.inner.rules.bank(name).ok_or_else(|| {
            StepError::permanent(
                "finding the bank",
                format!("bank {name:?} is not in the rules"),
            )
        })
    }

    pub(crate) fn window(&self, scope: &Scope) -> Result<(&BankRules, &Window), StepError> {
        let bank = self.bank(&scope.bank)?;
        let window = bank
            .windows
            .iter()
            .find(|w| w.name == scope.window)
            .ok_or_else(|| {
                StepError::permanent(
                    "finding the window",
                    format!(
                        "bank {:?} has no window {:?} in the rules",
                        scope.bank, scope.window
                    ),
                )
            })?;
        Ok((bank, window))
    }

    /// The bank's delivery: given, or opened from the rules on first use.
    pub(crate) async fn delivery(&self, bank: &str) -> Result<Arc<dyn Delivery>, StepError> {
        if let Some(d) = self.inner.given.get(bank) {
            return Ok(d.clone());
        }
        let mut opened = self.inner.opened.lock().await;
        if let Some(d) = opened.get(bank) {
            return Ok(d.clone());
        }
        let rules = self.bank(bank)?;
        let doing = "opening the bank's delivery";
        let d: Arc<dyn Delivery> = match &rules.delivery {
            tranche_ach_rules::Delivery::Outbox { dir } => {
                Arc::new(Outbox::new(dir.clone()).map_err(|e| StepError::delivery(doing, e))?)
            }
            tranche_ach_rules::Delivery::Sftp {
                host,
                port,
                user,
                key_file,
                known_hosts,
                remote_dir,
            } => Arc::new(
                Sftp::connect(SftpTarget {
                    host: host.clone(),
                    port: *port,
                    user: user.clone(),
                    key_file: key_file.clone(),
                    known_hosts: known_hosts.clone(),
                    remote_dir: remote_dir.clone(),
                })
                .await
                .map_err(|e| StepError::delivery(doing, e))?,
            ),
        };
        opened.insert(bank.to_string(), d.clone());
        Ok(d)
    }
}
