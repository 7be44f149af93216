//! Tranche's HTTP API: the engine over JSON, versioned under `/v1`, described by the
//! OpenAPI document at `/v1/openapi.json`.
//!
//! - **Submit** one job, a batch of up to 10,000 (one backend `enqueue`, so one
//!   transaction), a chain or a group. Intake is bounded: a queue holding its limit of
//!   waiting jobs answers 429 with Retry-After. Bodies are size-limited; malformed
//!   JSON is answered 400 naming the field path.
//! - **Runs and jobs**: list, progress, paged failures, a job with its attempts; jobs
//!   by run, state, queue and kind, paged; retry a run or a job; cancel a job, chain
//!   or run; delete an ended job; prune finished runs past a date; pause and resume a
//!   queue; declare, list and remove schedules; declare, list and remove rate limits
//!   and running caps.
//! - **Remote workers** in any language poll in batches with a long-poll, heartbeat and
//!   report in batches, under the engine's lease rules.
//! - **ACH entries** (`/v1/ach/entries`): import up to 10,000 payment entries per
//!   request into the entry ledger (per-entry results), read one, cancel one; and
//!   `/v1/ach/status`, a submission date's entries and files per bank and window.
//! - **Conductor's API** under `/api` (metadata, workflows, tasks): Conductor's SDKs
//!   and workers run against it unchanged; the workflows are
//!   `tranche-workflow-engine`'s, on the same backend.
//! - **Change feed** of job-state events with a cursor that never skips or reorders.
//! - Bearer-token auth (optional only on loopback; tokens may be limited to worker
//!   endpoints), `/metrics` (Prometheus), `/healthz`, `/readyz`.
//! - Personal data (PANs, e-mail addresses) in the job text the API shows is masked
//!   unless the token may see it; workers polling get the real arguments.
//! - Slow and idle clients are cut off (header, idle and body timeouts) and connections
//!   are capped, by `tranche-http-door`, which the order-state feed's listener shares.
//! - A dashboard at `/`: one static page (no build step) over this same API, updated
//!   live from the change feed.
//! - Errors have one shape with a stable code; a 5xx never carries the server's
//!   internals: its cause is logged under a request id the answer names.
//!
//! Every route is declared once in `routes`, which both builds the router and is
//! checked by a test against the OpenAPI document, itself generated from the handlers
//! and wire types. Handlers hold no state of their
//! own beyond counters: everything lives in the backend behind the [`Client`], including the per-queue
//! statistics `/metrics` and `/v1/queues` report for every worker, remote or not.

#![deny(missing_docs)]

mod ach;
mod auth;
mod body;
mod conductor;
mod config;
mod dashboard;
mod error;
mod events;
mod intake;
mod jobs;
mod limits;
mod longpoll;
mod mask;
mod openapi;
mod pause;
mod personal_data;
mod prune;
mod queue_stats;
mod runs;
mod schedules;
mod state;
mod submit;
mod telemetry;
mod wire;
mod workers;

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tranche_core::Client;

pub use ach::{CancellationView, EntryState, EntryView, LedgerHandle, MAX_CANCEL_REASON};
pub use auth::{Scope, Tokens};
pub use config::{ConfigError, QueueLimits, ServerConfig};
pub use tranche_http_door::Limits;
pub use tranche_tokens::TokenError;

use state::AppState;

/// Every route: method, path (axum syntax) and handler. The single list the router is
/// built from and the OpenAPI document is checked against.
fn routes() -> Vec<(&'static str, &'static str, MethodRouter<AppState>)> {
    vec![
        ("GET", "/", get(dashboard::page)),
        ("GET", "/healthz", get(telemetry::healthz)),
        ("GET", "/readyz", get(telemetry::readyz)),
        ("GET", "/metrics", get(telemetry::metrics_text)),
        ("GET", "/v1/openapi.json", get(openapi::document)),
        ("POST", "/v1/jobs", post(submit::job)),
        ("POST", "/v1/batches", post(submit::batch)),
        ("POST", "/v1/chains", post(submit::chain)),
        ("POST", "/v1/groups", post(submit::group)),
        ("GET", "/v1/runs", get(runs::list)),
        ("GET", "/v1/runs/{run}", get(runs::progress)),
        ("GET", "/v1/runs/{run}/failures", get(runs::failures)),
        ("POST", "/v1/runs/{run}/retry", post(runs::retry)),
        ("POST", "/v1/runs/{run}/cancel", post(runs::cancel_run)),
        ("GET", "/v1/jobs/{id}", get(runs::job)),
        ("POST", "/v1/jobs/{id}/cancel", post(runs::cancel_job)),
        ("POST", "/v1/chains/{id}/cancel", post(runs::cancel_chain)),
        ("GET", "/v1/queues", get(runs::queues)),
        ("POST", "/v1/prune", post(prune::prune)),
        ("POST", "/v1/queues/{queue}/pause", post(pause::pause)),
        ("POST", "/v1/queues/{queue}/resume", post(pause::resume)),
        ("GET", "/v1/jobs", get(jobs::list)),
        ("POST", "/v1/jobs/{id}/retry", post(jobs::retry)),
        ("DELETE", "/v1/jobs/{id}", delete(jobs::delete)),
        ("GET", "/v1/schedules", get(schedules::list)),
        ("PUT", "/v1/schedules/{name}", put(schedules::put)),
        ("DELETE", "/v1/schedules/{name}", delete(schedules::delete)),
        ("GET", "/v1/limits", get(limits::list)),
        ("PUT", "/v1/limits/{scope}/{name}", put(limits::put)),
        (
            "DELETE",
            "/v1/limits/{scope}/{name}",
            delete(limits::delete),
        ),
        ("GET", "/v1/events", get(events::events)),
        ("POST", "/v1/workers/poll", post(workers::poll)),
        ("POST", "/v1/workers/heartbeat", post(workers::heartbeat)),
        ("POST", "/v1/workers/complete", post(workers::complete)),
        ("POST", "/v1/workers/fail", post(workers::fail)),
        ("POST", "/v1/ach/entries", post(ach::import)),
        ("GET", "/v1/ach/entries/{id}", get(ach::entry)),
        ("POST", "/v1/ach/entries/{id}/cancel", post(ach::cancel)),
        ("GET", "/v1/ach/status", get(ach::status)),
    ]
}

fn app(backend: Client, config: ServerConfig) -> AppState {
    telemetry::handle();
    AppState::new(backend, config)
}

fn with_routes(app: AppState) -> Router {
    let body_limit = app.config().body_limit;
    let mut router = Router::new();
    for (_, path, handler) in routes().into_iter().chain(conductor::routes()) {
        router = router.route(path, handler);
    }
    router
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .layer(axum::middleware::from_fn(telemetry::track_http))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(app)
}

/// Serve on `listener` until `shutdown` is cancelled, then finish the requests in
/// flight. Validates `config` first. Connections are capped and slow or idle clients
/// cut off as `config` says (see [`ServerConfig::door`]).
pub async fn serve(
    listener: TcpListener,
    backend: Client,
    config: ServerConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    config.validate()?;
    let limits = config.door;
    let app = app(backend, config);
    telemetry::spawn_upkeep(shutdown.clone());
    // Workflows' joins, sub-workflows' ends, waits and scripts run in every server.
    let workflows = app.workflows().clone();
    let system = shutdown.clone();
    tokio::spawn(async move { workflows.run_system_steps(system).await });
    tranche_http_door::serve(listener, with_routes(app), limits, shutdown)
        .await
        .map_err(|e| ServeError::Config(e.into()))
}

/// Why [`serve`] returned an error rather than stopping at `shutdown`.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration was refused before anything was served.
    #[error(transparent)]
    Config(#[from] ConfigError),
}
