use std::sync::Arc;

use tranche_core::Client;
use tranche_workflow_engine::Workflows;

use crate::config::ServerConfig;
use crate::intake::Intake;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    backend: Client,
    workflows: Workflows,
    config: ServerConfig,
    intake: Intake,
}

impl AppState {
    pub fn new(backend: Client, config: ServerConfig) -> Self {
        AppState(Arc::new(Inner {
            intake: Intake::new(config.queue_limits.clone()),
            workflows: Workflows::new(backend.clone()),
            backend,
            config,
        }))
    }

    pub fn backend(&self) -> &Client {
        &self.0.backend
    }

    /// Conductor-compatible workflows on the same backend.
    pub fn workflows(&self) -> &Workflows {
        &self.0.workflows
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    pub fn intake(&self) -> &Intake {
        &self.0.intake
    }
}
