//! From the day's inputs to one chain per client, enqueued so that submitting the same
//! night again (after a crash, or to resume) adds nothing: each chain's first step
//! carries the client as its unique key.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use tranche_storage::InvalidKey;

use super::Artifacts;
use crate::input::{Broker, Clients, Trades};
use crate::model::{Client, Trade};
use crate::note::{build, NoteData};

/// The day's inputs, read and checked.
#[derive(Debug)]
pub struct Day {
    /// The trade date.
    pub date: NaiveDate,
    /// As the user named it, for error messages.
    pub trades_file: String,
    /// As the user named it, for error messages.
    pub clients_file: String,
    /// From `broker.toml`; has a rate table for `date` when read by
    /// [`read_day`](crate::night::read_day).
    pub broker: Broker,
    /// The client master, and its rows that could not be used.
    pub clients: Clients,
    /// The day's trades, and their rows that could not be used.
    pub trades: Trades,
}

/// The `process` step's arguments: everything it needs about one client, or why the
/// client's note cannot be made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcessArgs {
    pub(crate) date: NaiveDate,
    pub(crate) client_code: String,
    /// The note's number within the day (clients in code order).
    pub(crate) sequence: u32,
    /// `None`: not in the client master (or its row was refused).
    pub(crate) client: Option<Client>,
    /// The client's trades that could be read, in file order.
    pub trades: Vec<Trade>,
    /// Input problems that fail this client's note, each with file, line and field.
    pub problems: Vec<String>,
    /// Which of the client's chains in the run this is: 1 the night's first; a later
    /// one was submitted because the client's input changed (see `submit`).
    #[serde(default = "first_version")]
    pub(crate) version: u32,
    /// The note this one corrects, when the earlier one was mailed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) replaces: Option<String>,
}

fn first_version() -> u32 {
    1
}

/// The unique key of a client's chain of `version`.
pub(crate) fn chain_key(client_code: &str, version: u32) -> String {
    match version {
        1 => format!("client:{client_code}"),
        v => format!("client:{client_code}#{v}"),
    }
}

/// What a chain of `version` names its artifacts and its mail effect after: the
/// client code for the first, so each version's files and mail are its own.
pub(crate) fn entity(client_code: &str, version: u32) -> String {
    match version {
        1 => client_code.to_string(),
        v => format!("{client_code}.v{v}"),
    }
}

impl ProcessArgs {
    /// A digest of the client's input alone (master row, trades, input problems; not
    /// the line numbers, which move when other rows change, nor the note's number):
    /// equal digests mean the same note.
    pub(crate) fn digest(&self) -> String {
        #[derive(Serialize)]
        struct Input<'a> {
            client: Option<Client>,
            trades: Vec<Trade>,
            problems: &'a [String],
        }
        let input = Input {
            client: self.client.clone().map(|c| Client { line: 0, ..c }),
            trades: self
                .trades
                .iter()
                .map(|t| Trade {
                    line: 0,
                    ..t.clone()
                })
                .collect(),
            problems: &self.problems,
        };
        let bytes = serde_json::to_vec(&input).expect("input serialises");
        let hash = sha2::Sha256::digest(&bytes);
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The client's note, or every reason it cannot be made: what the `process` step
    /// does, and what `notes check` predicts.
    pub fn note(&self, broker: &Broker) -> Result<NoteData, String> {
        if !self.problems.is_empty() {
            return Err(self.problems.join("; "));
        }
        let Some(client) = &self.client else {
            return Err("not in the client master".to_string());
        };
        let mut note = build(broker, client, &self.trades, self.date, self.sequence)
            .map_err(|e| e.to_string())?;
        note.replaces = self.replaces.clone();
        Ok(note)
    }

    /// Where this chain's artifacts live in the store.
    pub(crate) fn artifacts(&self) -> Result<Artifacts, InvalidKey> {
        Artifacts::new(self.date, &self.client_code, self.version)
    }
}

/// One client's chain as planned, before it is enqueued.
#[derive(Clone, Debug)]
pub struct PlannedChain {
    /// The client the note is for.
    pub client_code: String,
    /// The first step's arguments: the client's input, or why it fails.
    pub process: ProcessArgs,
    /// Input rows (of either file) refused for this client: they fail its note.
    pub(crate) rejected_rows: u64,
}

/// Where the rows of one input file went. Every row read is in exactly one place:
/// `read == in_notes + not_needed + rejected`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowAccount {
    /// The file as the user named it.
    pub file: String,
    /// Non-blank lines after the header.
    pub read: u64,
    /// Carried by a client's chain: into its note, or into the reason it failed.
    pub in_notes: u64,
    /// Valid, but nobody needs them tonight (clients who did not trade).
    pub not_needed: u64,
    /// Refused, each with its file, line and field.
    pub rejected: u64,
}

impl RowAccount {
    /// Whether every row read is in exactly one place.
    pub fn balances(&self) -> bool {
        self.read == self.in_notes + self.not_needed + self.rejected
    }
}

impl std::fmt::Display for RowAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} rows read = {} in notes + {} not needed + {} rejected",
            self.file, self.read, self.in_notes, self.not_needed, self.rejected
        )
    }
}

/// The night planned: one chain per client who traded (or whose rows could not be
/// read), the input problems no client can be named for (they go into the report as
/// they are), and where every input row went.
#[derive(Debug)]
pub struct NightPlan {
    /// In client code order, which numbers the notes.
    pub chains: Vec<PlannedChain>,
    /// Problems of rows that name no client, each with file, line and field.
    pub unattributed: Vec<String>,
    /// The trades file, then the client master.
    pub accounts: [RowAccount; 2],
}

/// Rows were lost between reading and planning: nothing of the night may go out.
#[derive(Debug, thiserror::Error)]
#[error("the input does not add up, so nothing was submitted: {0}")]
pub struct Unaccounted(RowAccount);

/// Plan the night of `day`: one chain per client, every input row accounted for.
/// Fails, before anything is enqueued, only if a row was lost on the way.
pub fn plan_night(day: Day) -> Result<NightPlan, Unaccounted> {
    let Day {
        date,
        trades_file,
        clients,
        trades,
        clients_file,
        ..
    } = day;
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut rejected: BTreeMap<String, u64> = BTreeMap::new();
    let mut unattributed = Vec::new();
    for e in trades.errors.iter().chain(&clients.errors) {
        match &e.client {
            Some(code) => {
                problems
                    .entry(code.clone())
                    .or_default()
                    .push(e.to_string());
                *rejected.entry(code.clone()).or_default() += 1;
            }
            None => unattributed.push(e.to_string()),
        }
    }
    // A client whose master row was refused fails for that reason alone, not also for
    // being missing from the master.
    let refused_clients: BTreeSet<&str> = clients
        .errors
        .iter()
        .filter_map(|e| e.client.as_deref())
        .collect();
    // Clients with a bad master row only matter if they traded.
    let mut codes: Vec<String> = trades.by_client.keys().cloned().collect();
    codes.extend(
        trades
            .errors
            .iter()
            .filter_map(|e| e.client.as_ref())
            .cloned(),
    );
    codes.sort();
    codes.dedup();

    let mut by_client = trades.by_client;
    let mut masters = clients.by_code;
    let chains: Vec<PlannedChain> = codes
        .into_iter()
        .enumerate()
        .map(|(i, code)| {
            let trades = by_client.remove(&code).unwrap_or_default();
            let client = masters.remove(&code);
            let mut problems = problems.remove(&code).unwrap_or_default();
            let line = trades.first().map_or(0, |t| t.line);
            if client.is_none() && !refused_clients.contains(code.as_str()) {
                problems.push(format!(
                    "{trades_file}:{line}: field client_code: expected a client in the client master, got {code:?}"
                ));
            }
            if let Err(e) = Artifacts::new(date, &code, 1) {
                problems.push(format!(
                    "{trades_file}:{line}: field client_code: expected a code that can name a file, got {code:?} ({e})"
                ));
            }
            PlannedChain {
                client_code: code.clone(),
                rejected_rows: rejected.get(&code).copied().unwrap_or(0),
                process: ProcessArgs {
                    date,
                    client_code: code,
                    sequence: i as u32 + 1,
                    client,
                    trades,
                    problems,
                    version: 1,
                    replaces: None,
                },
            }
        })
        .collect();
    let accounts = [
        RowAccount {
            file: trades_file,
            read: trades.rows_read,
            in_notes: chains.iter().map(|c| c.process.trades.len() as u64).sum(),
            not_needed: 0,
            rejected: trades.errors.len() as u64,
        },
        RowAccount {
            file: clients_file,
            read: clients.rows_read,
            in_notes: chains.iter().filter(|c| c.process.client.is_some()).count() as u64,
            not_needed: masters.len() as u64,
            rejected: clients.errors.len() as u64,
        },
    ];
    if let Some(off) = accounts.iter().find(|a| !a.balances()) {
        return Err(Unaccounted(off.clone()));
    }
    Ok(NightPlan {
        chains,
        unattributed,
        accounts,
    })
}

/// The later steps only name their client: what they work on comes from the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StepArgs {
    /// Which night: a worker serves any.
    pub(crate) date: NaiveDate,
    pub(crate) client_code: String,
    #[serde(default = "first_version")]
    pub(crate) version: u32,
}

impl StepArgs {
    pub(crate) fn artifacts(&self) -> Result<Artifacts, InvalidKey> {
        Artifacts::new(self.date, &self.client_code, self.version)
    }
}
