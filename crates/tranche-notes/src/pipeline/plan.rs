//! From the day's inputs to one chain per client, enqueued so that submitting the same
//! night again (after a crash, or to resume) adds nothing: each chain's first step
//! carries the client as its unique key.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use tranche_core::Backend;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, JobId, JobSpec};

use super::{artifact_key, run_name, Step, DATA_KIND, MAIL, PROCESS, RENDER, SIGN};
use crate::input::{Broker, Clients, Trades};
use crate::model::{Client, Trade};
use crate::note::{build, NoteData};

/// The day's inputs, read and checked.
#[derive(Debug)]
pub struct Day {
    pub date: NaiveDate,
    /// As the user named it, for error messages.
    pub trades_file: String,
    pub clients_file: String,
    pub broker: Broker,
    pub clients: Clients,
    pub trades: Trades,
}

/// The `process` step's arguments: everything it needs about one client, or why the
/// client's note cannot be made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProcessArgs {
    pub date: NaiveDate,
    pub client_code: String,
    /// The note's number within the day (clients in code order).
    pub sequence: u32,
    pub client: Option<Client>,
    pub trades: Vec<Trade>,
    /// Input problems that fail this client's note, each with file, line and field.
    pub problems: Vec<String>,
}

impl ProcessArgs {
    /// The client's note, or every reason it cannot be made: what the `process` step
    /// does, and what `notes check` predicts.
    pub fn note(&self, broker: &Broker) -> Result<NoteData, String> {
        if !self.problems.is_empty() {
            return Err(self.problems.join("; "));
        }
        let Some(client) = &self.client else {
            return Err("not in the client master".to_string());
        };
        build(broker, client, &self.trades, self.date, self.sequence).map_err(|e| e.to_string())
    }
}

#[derive(Clone, Debug)]
pub struct PlannedChain {
    pub client_code: String,
    pub process: ProcessArgs,
    /// Input rows (of either file) refused for this client: they fail its note.
    pub rejected_rows: u64,
}

/// Where the rows of one input file went. Every row read is in exactly one place:
/// `read == in_notes + not_needed + rejected`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowAccount {
    pub file: String,
    pub read: u64,
    /// Carried by a client's chain: into its note, or into the reason it failed.
    pub in_notes: u64,
    /// Valid, but nobody needs them tonight (clients who did not trade).
    pub not_needed: u64,
    /// Refused, each with its file, line and field.
    pub rejected: u64,
}

impl RowAccount {
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
    pub chains: Vec<PlannedChain>,
    pub unattributed: Vec<String>,
    /// The trades file, then the client master.
    pub accounts: [RowAccount; 2],
}

/// Rows were lost between reading and planning: nothing of the night may go out.
#[derive(Debug, thiserror::Error)]
#[error("the input does not add up, so nothing was submitted: {0}")]
pub struct Unaccounted(RowAccount);

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
            if let Err(e) = artifact_key(DATA_KIND, date, &code) {
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

/// A client's chain: the ids of its four steps, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainIds {
    pub client_code: String,
    pub steps: [JobId; 4],
    /// Rows of the trades file in this client's chain, and input rows (of either
    /// file) refused for this client.
    pub trade_rows: u64,
    pub rejected_rows: u64,
}

/// The later steps only name their client: what they work on comes from the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepArgs {
    /// Which night: a worker serves any.
    pub date: NaiveDate,
    pub client_code: String,
}

fn spec(step: Step, args: String) -> JobSpec {
    JobSpec::new(step.kind, args)
        .queue(step.queue)
        .max_attempts(step.max_attempts)
}

fn chain_specs(c: &PlannedChain) -> Result<Vec<JobSpec>, serde_json::Error> {
    let later = serde_json::to_string(&StepArgs {
        date: c.process.date,
        client_code: c.client_code.clone(),
    })?;
    Ok(vec![
        spec(PROCESS, serde_json::to_string(&c.process)?)
            .unique_key(format!("client:{}", c.client_code)),
        spec(RENDER, later.clone()),
        spec(SIGN, later.clone()),
        spec(MAIL, later),
    ])
}

#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error("could not encode a job: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("the chain of client {0} in the existing run is not a contract-note chain")]
    Foreign(String),
}

/// Enqueue the night's chains in batches of `batch` (each one transaction), calling
/// `progress(done)` after each. Chains already in the run are found, not added again.
pub async fn enqueue_night(
    backend: &dyn Backend,
    date: NaiveDate,
    chains: &[PlannedChain],
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<Vec<ChainIds>, EnqueueError> {
    let run = run_name(date);
    let mut out = Vec::with_capacity(chains.len());
    for part in chains.chunks(batch.max(1)) {
        let items = part
            .iter()
            .map(|c| chain_specs(c).map(EnqueueItem::Chain))
            .collect::<Result<Vec<_>, _>>()?;
        let enqueued = backend
            .enqueue(EnqueueRequest {
                run: run.clone(),
                items,
                on_done: None,
            })
            .await?;
        for (c, e) in part.iter().zip(enqueued) {
            let steps = if e.existed {
                walk_chain(backend, &c.client_code, e.ids[0]).await?
            } else {
                e.ids
            };
            let steps: [JobId; 4] = steps
                .try_into()
                .map_err(|_| EnqueueError::Foreign(c.client_code.clone()))?;
            out.push(ChainIds {
                client_code: c.client_code.clone(),
                steps,
                trade_rows: c.process.trades.len() as u64,
                rejected_rows: c.rejected_rows,
            });
        }
        progress(out.len());
    }
    Ok(out)
}

async fn walk_chain(
    backend: &dyn Backend,
    client: &str,
    first: JobId,
) -> Result<Vec<JobId>, EnqueueError> {
    let mut ids = vec![first];
    let mut at = first;
    while let Some(next) = backend.job(at).await?.and_then(|j| j.next) {
        ids.push(next);
        at = next;
        if ids.len() > 4 {
            return Err(EnqueueError::Foreign(client.to_string()));
        }
    }
    Ok(ids)
}
