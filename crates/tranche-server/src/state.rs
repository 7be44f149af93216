use std::sync::Arc;

use tranche_core::Client;

use crate::config::ServerConfig;
use crate::intake::Intake;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    backend: Client,
    config: ServerConfig,
    intake: Intake,
}

impl AppState {
    pub fn new(backend: Client, config: ServerConfig) -> Self {
        AppState(Arc::new(Inner {
            intake: Intake::new(config.queue_limits.clone()),
            backend,
            config,
        }))
    }

    pub fn backend(&self) -> &Client {
        &self.0.backend
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    pub fn intake(&self) -> &Intake {
        &self.0.intake
    }
}
