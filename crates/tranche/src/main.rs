//! `tranche`: the command line over Tranche's engine. A thin binary: every capability
//! lives in a library crate; this only parses arguments, opens the backend, and prints.

mod cli;
mod commands;
mod data;
mod output;
mod progress;
mod secrets;
mod stall;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

/// Typst allocates and frees hundreds of thousands of small objects per note; with the
/// system allocator that was an eighth of a render's time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Everything this process writes — state, store, outbox, reports, generated
    // inputs — can hold personal data or secrets: owner-only, whatever the caller's
    // umask.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TRANCHE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a log file.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
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
            eprintln!("error: {}", one_line(e.chain()));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, outermost context first. Some errors show their
/// cause in their own message too (`op: cause`): a cause the line already ends with is
/// not said twice.
fn one_line<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut line = String::new();
    for cause in chain {
        let said = cause.to_string();
        if line.ends_with(&said) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&said);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    /// Shows its cause in its own message, as `BackendError`'s variants do.
    #[derive(Debug)]
    struct Shows(std::io::Error);

    impl std::fmt::Display for Shows {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "enqueue: {}", self.0)
        }
    }

    impl std::error::Error for Shows {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_said_is_not_repeated() {
        let e = anyhow::Error::new(Shows(std::io::Error::other("disk I/O error")))
            .context("could not submit the night");
        assert_eq!(
            one_line(e.chain()),
            "could not submit the night: enqueue: disk I/O error"
        );
    }
}
