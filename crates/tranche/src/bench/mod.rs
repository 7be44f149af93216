//! `tranche bench …`: the figures in BENCHMARKS.md. `engine` measures the engine alone
//! on no-op jobs (in this process, or in worker processes sharing Redis: `processes`),
//! `notes` a generated night of contract notes end to end, `server` the HTTP API.
//! What more than one of them uses is in `figures` (percentiles, peak memory) and
//! `noop` (the no-op task and its worker settings).

mod ach;
mod browse;
mod engine;
mod figures;
mod noop;
mod notes;
mod processes;
mod rate;
mod server;
mod state_dir;

pub use ach::ach;
pub use browse::browse;
pub use engine::engine;
pub use notes::notes;
pub use server::server;
