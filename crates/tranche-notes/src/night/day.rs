//! A Day read from its files. A broken broker file or an unreadable trades or clients
//! file stops the night (nothing could be right); a bad row only fails its client.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::generate::{generate, GenerateOptions, Generated};
use crate::input::{load_broker, read_clients, read_trades, InputError};
use crate::pipeline::Day;

/// Why the day's files could not be read (or generated): the night cannot start.
#[derive(Debug, thiserror::Error)]
pub enum DayError {
    /// An input file cannot be used as a whole.
    #[error(transparent)]
    Input(#[from] InputError),
    /// No charge rates apply on the trade date: every note would fail.
    #[error("{}: no charge-rate table applies on {date} (each [[rates]] applies from its `from` date)", .broker_file.display())]
    NoRates {
        /// The broker file read.
        broker_file: PathBuf,
        /// The trade date.
        date: NaiveDate,
    },
    /// The generator could not write the day's files.
    #[error("cannot write the day's files to {}", .dir.display())]
    Generate {
        /// Where they were to go.
        dir: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
}

/// Read the day's files: the broker's first (a broken one, or one without rates for
/// `date`, fails at once), then the client master and the trades.
pub fn read_day(
    trades: &Path,
    clients: &Path,
    broker_file: &Path,
    date: NaiveDate,
) -> Result<Day, DayError> {
    let broker = load_broker(broker_file)?;
    if broker.rates_on(date).is_none() {
        return Err(DayError::NoRates {
            broker_file: broker_file.to_path_buf(),
            date,
        });
    }
    Ok(Day {
        date,
        trades_file: trades.display().to_string(),
        clients_file: clients.display().to_string(),
        broker,
        clients: read_clients(clients)?,
        trades: read_trades(trades)?,
    })
}

/// Write a synthetic day into `input` and read it back, as `notes demo` and `bench
/// notes` do.
pub fn generated_day(
    input: &Path,
    options: &GenerateOptions,
) -> Result<(Generated, Day), DayError> {
    let generated = generate(input, options).map_err(|source| DayError::Generate {
        dir: input.to_path_buf(),
        source,
    })?;
    let day = read_day(
        &input.join("trades.csv"),
        &input.join("clients.csv"),
        &input.join("broker.toml"),
        options.date,
    )?;
    Ok((generated, day))
}
