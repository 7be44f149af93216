//! `tranche`: the command line over Tranche's engine. A thin binary: every capability
//! lives in a library crate; this only parses arguments, opens the backend, and prints.

mod bench;
mod cli;
mod commands;
mod data;
mod night;
mod notes_setup;
mod otlp;
mod output;
mod progress;
mod secrets;

use std::io::IsTerminal;
use std::process::ExitCode;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Typst allocates and frees hundreds of thousands of small objects per note; with the
/// system allocator that was an eighth of a render's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Everything this process writes — state, store, outbox, reports, generated
    // inputs — can hold personal data or secrets: owner-only, whatever the caller's
    // umask.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let matches = <cli::Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .and_then(|cli| cli::refuse_unused_globals(&matches).map(|()| cli))
    {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let traces = match cli.otlp_endpoint.as_ref().map(otlp::provider).transpose() {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("error: {}", tranche_types::one_line(e.as_ref()));
            return ExitCode::FAILURE;
        }
    };
    // The connection pool of the PostgreSQL ledger warns once per broken connection,
    // a dozen lines at once when the server goes away; the ledger says it once itself
    // (when it is lost and when it is back).
    const DEFAULT_LOG: &str = "warn,deadpool.postgres=error";
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRANCHE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        );
    // Spans are exported whatever TRANCHE_LOG keeps: the engine's and the server's.
    let spans = traces.as_ref().map(|provider| {
        otlp::layer(provider).with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("tranche_core", tracing::Level::INFO)
                .with_target("tranche_server", tracing::Level::INFO),
        )
    });
    tracing_subscriber::registry().with(logs).with(spans).init();
    let code = run(cli);
    if let Some(provider) = traces {
        // Sends the spans still batched.
        if let Err(e) = provider.shutdown() {
            eprintln!("warning: could not send the last traces: {e}");
        }
    }
    code
}

fn run(cli: cli::Cli) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", tranche_types::one_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}
