//! From the day's inputs to one chain per client, enqueued so that submitting the same
//! night again (after a crash, or to resume) adds nothing: each chain's first step
//! carries the client as its unique key.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use tranche_core::Backend;
use tranche_types::{BackendError, EnqueueItem, EnqueueRequest, JobId, JobSpec};

use super::{artifact_key, run_name, Step, DATA_KIND, MAIL, PROCESS, RENDER, SIGN};
use crate::input::{Broker, Clients, Trades};
use crate::model::{Client, Trade};

/// The day's inputs, read and checked.
#[derive(Debug)]
pub struct Day {
    pub date: NaiveDate,
    /// As the user named it, for error messages.
    pub trades_file: String,
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

#[derive(Clone, Debug)]
pub struct PlannedChain {
    pub client_code: String,
    pub process: ProcessArgs,
}

/// One chain per client who traded (or whose rows could not be read), and the input
/// problems no client can be named for: they go into the report as they are.
pub fn plan_night(day: Day) -> (Vec<PlannedChain>, Vec<String>) {
    let Day {
        date,
        trades_file,
        clients,
        trades,
        ..
    } = day;
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unattributed = Vec::new();
    for e in trades.errors.iter().chain(&clients.errors) {
        match &e.client {
            Some(code) => problems
                .entry(code.clone())
                .or_default()
                .push(e.to_string()),
            None => unattributed.push(e.to_string()),
        }
    }
    // Clients with a bad master row only matter if they traded.
    let mut codes: Vec<String> = trades.by_client.keys().cloned().collect();
    for e in &trades.errors {
        if let Some(code) = &e.client {
            codes.push(code.clone());
        }
    }
    codes.sort();
    codes.dedup();

    let mut by_client = trades.by_client;
    let mut clients = clients.by_code;
    let chains = codes
        .into_iter()
        .enumerate()
        .map(|(i, code)| {
            let trades = by_client.remove(&code).unwrap_or_default();
            let client = clients.remove(&code);
            let mut problems = problems.remove(&code).unwrap_or_default();
            if client.is_none() && !problems.iter().any(|p| p.contains("client_code")) {
                let line = trades.first().map_or(0, |t| t.line);
                problems.push(format!(
                    "{trades_file}:{line}: field client_code: expected a client in the client master, got {code:?}"
                ));
            }
            if let Err(e) = artifact_key(DATA_KIND, date, &code) {
                problems.push(format!("client code {code:?}: {e}"));
            }
            PlannedChain {
                client_code: code.clone(),
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
    (chains, unattributed)
}

/// A client's chain: the ids of its four steps, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainIds {
    pub client_code: String,
    pub steps: [JobId; 4],
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
