//! `tranche server`: the HTTP API over the embedded state.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use tranche_server::{QueueLimits, ServerConfig, Tokens};

use crate::cli::DataArgs;
use crate::cli::ServerArgs;
use crate::data::{open, riding_outages};

pub async fn server(at: &DataArgs, args: ServerArgs) -> Result<ExitCode> {
    let ach_rules = match &args.ach_rules {
        Some(path) => match tranche_ach_rules::Rules::load(path) {
            Ok(rules) => Some(Arc::new(rules)),
            Err(e) => {
                // Every problem of the file at once, as `tranche ach engine` says them.
                eprintln!("{}", tranche_types::one_line(&e));
                return Ok(ExitCode::from(2));
            }
        },
        None => None,
    };
    let mut tokens = Tokens::default();
    if let Some(file) = &args.tokens {
        tokens.extend(Tokens::from_file(file)?);
    }
    if let Ok(env) = std::env::var("TRANCHE_TOKENS") {
        tokens.extend(Tokens::parse(&env, "TRANCHE_TOKENS")?);
    }
    let mut queue_limits = QueueLimits::default();
    for spec in &args.queue_limit {
        queue_limits.add(spec)?;
    }
    let mut config = ServerConfig {
        listen: args.listen,
        tokens,
        queue_limits,
        door: args.door.limits(),
        show_personal_data: args.show_personal_data,
        ledger: super::ach::open_ledger(at, true)
            .await?
            .map(tranche_server::LedgerHandle),
        ach_rules,
        ..ServerConfig::default()
    };
    config.validate()?;
    let backend = open(at).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("could not listen on {}", args.listen))?;
    config.listen = listener.local_addr()?;
    println!(
        "tranche server listening on http://{} (state in {}, {} token(s))",
        config.listen,
        at.describe(),
        config.tokens.len()
    );
    std::io::stdout().flush()?;
    let stop = tranche_core::on_terminate();
    let scheduler = super::spawn_scheduler(riding_outages(backend.clone(), at), &stop);
    tranche_server::serve(listener, backend, config, stop.clone()).await?;
    stop.cancel();
    let _ = scheduler.await;
    Ok(ExitCode::SUCCESS)
}
