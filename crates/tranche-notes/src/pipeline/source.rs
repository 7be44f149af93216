//! A worker serves any night: what differs per night (the date and the broker's
//! details and rates) is published to the store by whoever submits the night, and
//! loaded once per date by each worker process; what is the worker's own (store, key,
//! template, mailer, passwords) is given when it starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use tranche_mail::Mailer;
use tranche_sign::{Cipher, Signer};
use tranche_storage::{Storage, StorageError, StoreKey};

use super::{Night, PasswordRule, StoreSpace};
use crate::input::Broker;
use crate::render::helper::RenderHelpers;
use crate::render::Renderer;

/// The store key of a night's broker details.
pub(crate) fn broker_key(date: NaiveDate) -> StoreKey {
    StoreKey::partitioned("night", &date.to_string(), "broker", "json")
        .expect("a date and a fixed name make a valid key")
}

/// Publish a night's broker details, before its chains are enqueued.
pub(crate) async fn publish_broker(
    store: &dyn Storage,
    date: NaiveDate,
    broker: &Broker,
) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec(broker).expect("a broker serialises");
    store.put(&broker_key(date), bytes).await
}

/// Why a night cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NightError {
    #[error("the broker details of {date} are not in the store ({location}): submit the night with `tranche notes run`")]
    NotPublished {
        date: NaiveDate,
        location: String,
        #[source]
        source: StorageError,
    },
    #[error("reading the night of {date}: {source}")]
    Unreadable {
        date: NaiveDate,
        #[source]
        source: StorageError,
    },
    #[error("the broker details of {date} in the store: {source}")]
    Garbled {
        date: NaiveDate,
        #[source]
        source: serde_json::Error,
    },
}

impl NightError {
    /// A store that fails is worth a retry; a night nobody published, or published
    /// garbled, is not.
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, NightError::Unreadable { .. })
    }
}

/// What a worker process is given at start, shared by every night it serves; each
/// date's broker is added to it on first use (`NightSource::night`).
pub struct NightSource {
    pub(crate) store: Arc<dyn Storage>,
    /// Whether `store` has room; a progress display reads it to say why a night waits.
    pub(crate) space: Arc<StoreSpace>,
    pub(crate) renderer: Arc<Renderer>,
    pub(crate) helpers: Option<Arc<RenderHelpers>>,
    pub(crate) signer: Arc<dyn Signer>,
    /// Sends the notes. [`run_night`](crate::night::run_night) closes it when its work
    /// ends; a process that works nights otherwise closes it when it stops.
    pub mailer: Arc<dyn Mailer>,
    pub(crate) password_rule: PasswordRule,
    pub(crate) owner_password: String,
    pub(crate) cipher: Cipher,
    nights: Mutex<HashMap<NaiveDate, Arc<Night>>>,
}

impl std::fmt::Debug for NightSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passwords.
        f.debug_struct("NightSource")
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

impl NightSource {
    /// `store` is wrapped to watch its free space; the renderer renders in this process
    /// unless helpers are added ([`with_helpers`](Self::with_helpers)). Each PDF's user
    /// password comes from `password_rule`, its owner password is `owner_password`.
    pub fn new(
        store: Arc<dyn Storage>,
        renderer: Renderer,
        signer: Arc<dyn Signer>,
        mailer: Arc<dyn Mailer>,
        password_rule: PasswordRule,
        owner_password: String,
        cipher: Cipher,
    ) -> Self {
        let (store, space) = StoreSpace::watch(store);
        NightSource {
            store,
            space,
            renderer: Arc::new(renderer),
            helpers: None,
            signer,
            mailer,
            password_rule,
            owner_password,
            cipher,
            nights: Mutex::new(HashMap::new()),
        }
    }

    /// Render notes in these helper processes (Typst scales with processes, not
    /// threads) instead of in this one.
    pub fn with_helpers(mut self, helpers: RenderHelpers) -> Self {
        self.helpers = Some(Arc::new(helpers));
        self
    }

    /// The night of `date`, its broker read from the store on first use.
    pub(crate) async fn night(&self, date: NaiveDate) -> Result<Arc<Night>, NightError> {
        if let Some(n) = self.nights.lock().expect("nights").get(&date) {
            return Ok(n.clone());
        }
        let key = broker_key(date);
        let bytes = self.store.get(&key).await.map_err(|source| match source {
            StorageError::NotFound { .. } => NightError::NotPublished {
                date,
                location: self.store.locate(&key),
                source,
            },
            source => NightError::Unreadable { date, source },
        })?;
        let broker: Broker = serde_json::from_slice(&bytes)
            .map_err(|source| NightError::Garbled { date, source })?;
        let night = Arc::new(Night {
            date,
            broker,
            store: self.store.clone(),
            space: self.space.clone(),
            renderer: self.renderer.clone(),
            helpers: self.helpers.clone(),
            signer: self.signer.clone(),
            mailer: self.mailer.clone(),
            password_rule: self.password_rule.clone(),
            owner_password: self.owner_password.clone(),
            cipher: self.cipher,
        });
        self.nights
            .lock()
            .expect("nights")
            .insert(date, night.clone());
        Ok(night)
    }
}
