//! Submitting a night to its run — the first time, or again after a crash, a fix of the
//! input, or a correction.
//!
//! Every client's chain carries its input (the `process` step's arguments), so the run
//! itself records what each note was made from: [`ProcessArgs::digest`]. Submitting
//! again compares the digest of each client's input now with the chain's:
//!
//! - the same: nothing is added (a crash or a resume);
//! - changed, not mailed: the old chain is cancelled and a new version is made from the
//!   new input, with the same note number (that number was never sent);
//! - changed, already mailed: nothing is sent by itself. The difference is reported,
//!   and only an explicit decision (`--issue-corrections`) makes a corrected note: a
//!   new contract note with a number of its own, naming the one it replaces, its
//!   decision recorded in the backend (`notes-correction:<run>:<client>.v<n>`);
//! - changed while its mail step runs: left alone this time; submit again.
//!
//! Numbers: a night's first submission numbers its clients 1..N in code order and
//! records N and the list's digest (`notes-plan:<run>`). Later, a client that was not
//! in the run gets its planned number only if the list is the one first planned (a
//! resumed submission); otherwise, like a corrected note, the next free number above
//! N, claimed once per number (`notes-number:<run>:<n>`), so no two notes of a day share
//! one. Each version's artifacts and mail effect are its own ([`entity`]).

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use tranche_core::Client;
use tranche_types::{
    BackendError, CancelTarget, EnqueueItem, EnqueueRequest, JobId, JobRecord, JobSpec, JobState,
    RunName,
};

use super::plan::{chain_key, entity, PlannedChain, ProcessArgs, StepArgs};
use super::{run_name, ChainStep, Step, MAIL, PROCESS, RENDER, SIGN};
use crate::input::Broker;
use crate::note::note_number;

/// A client's chain: the ids of its four steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainIds {
    /// The client the chain makes a note for.
    pub client_code: String,
    /// In chain order (process, render, sign, mail); see [`process_job`](Self::process_job)
    /// and [`mail_job`](Self::mail_job).
    pub steps: [JobId; 4],
    /// Rows of the trades file in this client's chain, and input rows (of either
    /// file) refused for this client.
    pub(crate) trade_rows: u64,
    pub(crate) rejected_rows: u64,
    /// What this submission found or did about the client, for the report.
    pub(crate) remark: Option<String>,
}

impl ChainIds {
    /// The chain's first job (process): when the client's work began.
    pub fn process_job(&self) -> JobId {
        self.steps[ChainStep::Process]
    }

    /// The chain's last job (mail): when it succeeded, the note went out.
    pub fn mail_job(&self) -> JobId {
        self.steps[ChainStep::Mail]
    }
}

/// Which mailed clients' changed input may become corrected notes.
#[derive(Clone, Debug, Default)]
pub struct Corrections {
    all: bool,
    clients: BTreeSet<String>,
}

impl Corrections {
    /// `all`, or client codes separated by commas.
    pub fn parse(list: &str) -> Corrections {
        let clients: BTreeSet<String> = list
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        Corrections {
            all: clients.contains("all"),
            clients,
        }
    }

    fn allow(&self, client: &str) -> bool {
        self.all || self.clients.contains(client)
    }
}

/// What a resubmission found that someone must look at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attention {
    /// Mailed already; its input changed since; nothing was sent.
    ChangedAfterMail {
        /// The client.
        client_code: String,
        /// The note that was mailed.
        note_number: String,
        /// What changed, in counts and field names: never a value (personal data).
        changes: String,
    },
    /// Its input changed while its note is being mailed: submit again once it is.
    MailInFlight {
        /// The client.
        client_code: String,
    },
    /// Mailed already, and the client is not in the input any more.
    RemovedAfterMail {
        /// The client.
        client_code: String,
        /// The note that was mailed.
        note_number: String,
    },
}

impl std::fmt::Display for Attention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attention::ChangedAfterMail {
                client_code,
                note_number,
                changes,
            } => write!(
                f,
                "client {client_code}: note {note_number} was mailed, and its input has changed since ({changes}); nothing was sent: to send a corrected note (a new number), run again with --issue-corrections {client_code}"
            ),
            Attention::MailInFlight { client_code } => write!(
                f,
                "client {client_code}: its input changed while its note is being mailed; run again once it is"
            ),
            Attention::RemovedAfterMail {
                client_code,
                note_number,
            } => write!(
                f,
                "client {client_code}: note {note_number} was mailed, and the client has no trades in the input any more; nothing was sent (withdraw the note outside Tranche if it is wrong)"
            ),
        }
    }
}

/// What submitting a night did.
#[derive(Debug, Default)]
pub struct Submitted {
    /// Per planned client, in plan order: the chain that now makes its note (then the
    /// chains of clients no longer in the input).
    pub(crate) chains: Vec<ChainIds>,
    /// What a person must decide: nothing was sent for these clients.
    pub attention: Vec<Attention>,
    /// Clients not yet mailed whose note is made again from changed input.
    pub redone: usize,
    /// Corrected notes decided by this submission (`--issue-corrections`).
    pub corrected: usize,
}

/// Why a night could not be submitted; what was enqueued before stays, and submitting
/// again resumes.
#[derive(Debug, thiserror::Error)]
pub enum EnqueueError {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// A job's arguments or a recorded decision could not be encoded.
    #[error("could not encode a job: {0}")]
    Encode(#[from] serde_json::Error),
    /// The run holds a chain under the client's key that is not four contract-note steps.
    #[error("the chain of client {0} in the existing run is not a contract-note chain")]
    Foreign(String),
}

/// What the first submission recorded about its numbering.
#[derive(Serialize, Deserialize)]
struct PlanMark {
    clients: u32,
    codes: String,
}

fn codes_digest(chains: &[PlannedChain]) -> String {
    let mut h = sha2::Sha256::new();
    for c in chains {
        h.update(c.client_code.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A client's newest chain in the run, read back.
struct Existing {
    version: u32,
    steps: [JobId; 4],
    args: ProcessArgs,
    /// Where its mail job is.
    mail: JobState,
}

/// Submit the night: enqueue what is new or changed in batches of `batch` (each one
/// transaction), calling `progress(done)` after each.
pub(crate) async fn submit_night(
    backend: &Client,
    broker: &Broker,
    date: NaiveDate,
    chains: &[PlannedChain],
    corrections: &Corrections,
    batch: usize,
    mut progress: impl FnMut(usize),
) -> Result<Submitted, EnqueueError> {
    let run = run_name(date);
    let plan_key = format!("notes-plan:{run}");
    let mark = PlanMark {
        clients: chains.len() as u32,
        codes: codes_digest(chains),
    };
    let first = backend.run_progress(&run).await?.is_none();
    if first {
        backend
            .record_effect(tranche_types::EffectRecord {
                key: &plan_key,
                job: None,
                value: &serde_json::to_string(&mark)?,
            })
            .await?;
    }
    let existing = if first {
        chains.iter().map(|_| None).collect()
    } else {
        newest_chains(backend, &run, chains, batch).await?
    };
    let recorded: Option<PlanMark> = match backend.effect(&plan_key).await? {
        Some(e) => serde_json::from_str(&e.value).ok(),
        None => None,
    };
    let same_list = recorded.as_ref().is_some_and(|m| m.codes == mark.codes);
    let mut numbers = Numbers {
        run: run.clone(),
        next: recorded.as_ref().map_or_else(
            || {
                existing
                    .iter()
                    .flatten()
                    .map(|e| e.args.sequence)
                    .max()
                    .unwrap_or(0)
                    + 1
            },
            |m| m.clients + 1,
        ),
    };

    let mut out = Submitted::default();
    // (index into `chains`, the chain to enqueue, a remark)
    let mut to_enqueue: Vec<(usize, PlannedChain, Option<String>)> = Vec::new();
    let mut kept: BTreeMap<usize, ChainIds> = BTreeMap::new();
    for (i, (planned, found)) in chains.iter().zip(existing).enumerate() {
        let Some(old) = found else {
            let mut c = planned.clone();
            if !first && !same_list {
                c.process.sequence = numbers.claim(backend, &c.client_code).await?;
            }
            to_enqueue.push((i, c, None));
            continue;
        };
        if old.args.digest() == planned.process.digest() {
            kept.insert(i, ids(planned, old.steps, None));
            continue;
        }
        let code = &planned.client_code;
        let version = old.version + 1;
        let mailed = old.mail == JobState::Succeeded
            || backend
                .effect(&mail_effect_key(&run, code, old.version))
                .await?
                .is_some();
        if mailed {
            let old_number = note_number(broker, date, old.args.sequence);
            let changes = describe_changes(&old.args, &planned.process);
            if !corrections.allow(code) {
                out.attention.push(Attention::ChangedAfterMail {
                    client_code: code.clone(),
                    note_number: old_number.clone(),
                    changes: changes.clone(),
                });
                let remark = format!(
                    "input changed after this note was mailed ({changes}): nothing sent; --issue-corrections {code} sends a corrected note"
                );
                kept.insert(i, ids(planned, old.steps, Some(remark)));
                continue;
            }
            let sequence = decide_correction(
                backend,
                &run,
                &mut numbers,
                code,
                version,
                &old_number,
                &changes,
            )
            .await?;
            let mut c = planned.clone();
            c.process.version = version;
            c.process.sequence = sequence;
            c.process.replaces = Some(old_number.clone());
            let remark = format!(
                "corrected note {} replaces {old_number} ({changes})",
                note_number(broker, date, sequence)
            );
            out.corrected += 1;
            to_enqueue.push((i, c, Some(remark)));
        } else if old.mail == JobState::Running {
            out.attention.push(Attention::MailInFlight {
                client_code: code.clone(),
            });
            kept.insert(
                i,
                ids(
                    planned,
                    old.steps,
                    Some("input changed while mailing: submit again".into()),
                ),
            );
        } else {
            // Never sent: the new input simply takes its place, under the same number.
            backend
                .cancel(
                    CancelTarget::Chain(old.steps[ChainStep::Process]),
                    "the client's input changed: made again from the new input",
                )
                .await?;
            let mut c = planned.clone();
            c.process.version = version;
            c.process.sequence = old.args.sequence;
            out.redone += 1;
            to_enqueue.push((
                i,
                c,
                Some("input changed: made again from the new input".into()),
            ));
        }
    }

    let mut done = kept.len();
    for part in to_enqueue.chunks(batch.max(1)) {
        let items = part
            .iter()
            .map(|(_, c, _)| chain_specs(c).map(EnqueueItem::Chain))
            .collect::<Result<Vec<_>, _>>()?;
        let enqueued = backend
            .enqueue(EnqueueRequest {
                run: run.clone(),
                items,
                on_done: None,
            })
            .await?;
        for ((i, c, remark), e) in part.iter().zip(enqueued) {
            let foreign = || EnqueueError::Foreign(c.client_code.clone());
            // A chain enqueued before is named by its first job, the one holding the key.
            let steps = if e.existed {
                let first = *e.ids.first().ok_or_else(foreign)?;
                walk_chain(backend, &c.client_code, first).await?.ids
            } else {
                e.ids.try_into().map_err(|_| foreign())?
            };
            kept.insert(*i, ids(&chains[*i], steps, remark.clone()));
        }
        done += part.len();
        progress(done);
    }
    if to_enqueue.is_empty() {
        progress(done);
    }
    out.chains = kept.into_values().collect();
    if !first {
        settle_removed(backend, broker, date, chains, &mut out).await?;
    }
    Ok(out)
}

/// Clients the run has chains for but the input no longer names: a chain not yet
/// mailed is cancelled (nothing to send any more); a mailed one needs a person.
async fn settle_removed(
    backend: &Client,
    broker: &Broker,
    date: NaiveDate,
    chains: &[PlannedChain],
    out: &mut Submitted,
) -> Result<(), EnqueueError> {
    let run = run_name(date);
    let planned: BTreeSet<&str> = chains.iter().map(|c| c.client_code.as_str()).collect();
    let mut newest: BTreeMap<String, (u32, JobId)> = BTreeMap::new();
    let mut cursor = String::new();
    loop {
        let (page, next) = backend.unique_keys(&run, &cursor, 10_000).await?;
        for (key, id) in page {
            let Some((code, version)) = parse_chain_key(&key) else {
                continue;
            };
            if planned.contains(code) {
                continue;
            }
            let newer = newest.get(code).is_none_or(|(v, _)| *v < version);
            if newer {
                newest.insert(code.to_string(), (version, id));
            }
        }
        match next {
            Some(n) => cursor = n,
            None => break,
        }
    }
    for (code, (version, first)) in newest {
        let ChainRead {
            ids: steps,
            records,
        } = walk_chain(backend, &code, first).await?;
        let args: ProcessArgs = serde_json::from_str(&records[ChainStep::Process].args)
            .map_err(|_| EnqueueError::Foreign(code.clone()))?;
        let mailed = records[ChainStep::Mail].state == JobState::Succeeded
            || backend
                .effect(&mail_effect_key(&run, &code, version))
                .await?
                .is_some();
        let remark = if mailed {
            out.attention.push(Attention::RemovedAfterMail {
                client_code: code.clone(),
                note_number: note_number(broker, date, args.sequence),
            });
            "mailed, and no longer in the input: nothing sent"
        } else {
            backend
                .cancel(
                    CancelTarget::Chain(steps[ChainStep::Process]),
                    "the client is no longer in the input",
                )
                .await?;
            "no longer in the input: not mailed, its chain cancelled"
        };
        out.chains.push(ChainIds {
            client_code: code,
            steps,
            trade_rows: 0,
            rejected_rows: 0,
            remark: Some(remark.to_string()),
        });
    }
    Ok(())
}

/// The client and version a chain's unique key names (see [`chain_key`]).
fn parse_chain_key(key: &str) -> Option<(&str, u32)> {
    let rest = key.strip_prefix("client:")?;
    match rest.rsplit_once('#') {
        Some((code, v)) => match v.parse::<u32>() {
            Ok(v) if v >= 2 => Some((code, v)),
            _ => Some((rest, 1)),
        },
        None => Some((rest, 1)),
    }
}

fn ids(planned: &PlannedChain, steps: [JobId; 4], remark: Option<String>) -> ChainIds {
    ChainIds {
        client_code: planned.client_code.clone(),
        steps,
        trade_rows: planned.process.trades.len() as u64,
        rejected_rows: planned.rejected_rows,
        remark,
    }
}

/// The key of the exactly-once mail effect of a client's chain of `version`.
pub(crate) fn mail_effect_key(run: &RunName, client_code: &str, version: u32) -> String {
    format!("mail:{run}:{}", entity(client_code, version))
}

/// Note numbers above the first submission's, each claimed once in the backend.
struct Numbers {
    run: RunName,
    next: u32,
}

impl Numbers {
    async fn claim(&mut self, backend: &Client, client: &str) -> Result<u32, BackendError> {
        loop {
            let n = self.next;
            self.next += 1;
            let key = format!("notes-number:{}:{n}", self.run);
            if backend
                .record_effect(tranche_types::EffectRecord {
                    key: &key,
                    job: None,
                    value: client,
                })
                .await?
            {
                return Ok(n);
            }
        }
    }
}

/// The recorded decision to correct a mailed note: the log an auditor reads, and what
/// keeps the corrected note's number when the same decision is submitted again.
#[derive(Serialize, Deserialize)]
struct CorrectionDecision {
    client_code: String,
    version: u32,
    sequence: u32,
    replaces: String,
    changes: String,
    decided_by: String,
}

async fn decide_correction(
    backend: &Client,
    run: &RunName,
    numbers: &mut Numbers,
    client: &str,
    version: u32,
    replaces: &str,
    changes: &str,
) -> Result<u32, EnqueueError> {
    let key = format!("notes-correction:{run}:{}", entity(client, version));
    if let Some(e) = backend.effect(&key).await? {
        if let Ok(d) = serde_json::from_str::<CorrectionDecision>(&e.value) {
            return Ok(d.sequence);
        }
    }
    let decision = CorrectionDecision {
        client_code: client.to_string(),
        version,
        sequence: numbers.claim(backend, client).await?,
        replaces: replaces.to_string(),
        changes: changes.to_string(),
        decided_by: std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
    };
    backend
        .record_effect(tranche_types::EffectRecord {
            key: &key,
            job: None,
            value: &serde_json::to_string(&decision)?,
        })
        .await?;
    Ok(decision.sequence)
}

/// What changed between two inputs of one client, without showing any value (names,
/// addresses and PANs are personal data).
fn describe_changes(old: &ProcessArgs, new: &ProcessArgs) -> String {
    let by_id = |a: &ProcessArgs| -> BTreeMap<String, crate::model::Trade> {
        a.trades
            .iter()
            .map(|t| {
                (
                    t.trade_id.clone(),
                    crate::model::Trade {
                        line: 0,
                        ..t.clone()
                    },
                )
            })
            .collect()
    };
    let (before, after) = (by_id(old), by_id(new));
    let added = after.keys().filter(|k| !before.contains_key(*k)).count();
    let removed = before.keys().filter(|k| !after.contains_key(*k)).count();
    let changed = after
        .iter()
        .filter(|(k, t)| before.get(*k).is_some_and(|b| b != *t))
        .count();
    let mut parts = vec![format!(
        "trades: {added} added, {changed} changed, {removed} removed"
    )];
    let fields = match (&old.client, &new.client) {
        (Some(a), Some(b)) => [
            ("name", a.name != b.name),
            ("pan", a.pan != b.pan),
            ("email", a.email != b.email),
            ("address", a.address != b.address),
            ("state", a.state != b.state),
        ]
        .iter()
        .filter(|(_, differ)| *differ)
        .map(|(f, _)| *f)
        .collect::<Vec<_>>()
        .join(", "),
        (None, Some(_)) => "now in the master".into(),
        (Some(_), None) => "no longer usable".into(),
        (None, None) => String::new(),
    };
    if !fields.is_empty() {
        parts.push(format!("client master: {fields}"));
    }
    if old.problems != new.problems {
        parts.push("input problems changed".into());
    }
    parts.join("; ")
}

/// The newest chain of each planned client that has one: version 1 under the client's
/// key, then 2, 3… while they exist, read back in full.
async fn newest_chains(
    backend: &Client,
    run: &RunName,
    chains: &[PlannedChain],
    batch: usize,
) -> Result<Vec<Option<Existing>>, EnqueueError> {
    let mut newest: Vec<Option<(u32, JobId)>> = vec![None; chains.len()];
    let mut asking: Vec<usize> = (0..chains.len()).collect();
    let mut version = 1;
    while !asking.is_empty() {
        let mut found = Vec::new();
        for part in asking.chunks(batch.max(1)) {
            let keys: Vec<String> = part
                .iter()
                .map(|i| chain_key(&chains[*i].client_code, version))
                .collect();
            for (i, id) in part.iter().zip(backend.unique_jobs(run, &keys).await?) {
                if let Some(id) = id {
                    newest[*i] = Some((version, id));
                    found.push(*i);
                }
            }
        }
        asking = found;
        version += 1;
    }
    let mut out = Vec::with_capacity(chains.len());
    for (c, n) in chains.iter().zip(newest) {
        let Some((version, first)) = n else {
            out.push(None);
            continue;
        };
        let ChainRead {
            ids: steps,
            records,
        } = walk_chain(backend, &c.client_code, first).await?;
        let args: ProcessArgs = serde_json::from_str(&records[ChainStep::Process].args)
            .map_err(|_| EnqueueError::Foreign(c.client_code.clone()))?;
        out.push(Some(Existing {
            version,
            steps,
            args,
            mail: records[ChainStep::Mail].state,
        }));
    }
    Ok(out)
}

/// A chain read back from the backend: its step ids and records, in chain order.
struct ChainRead {
    ids: [JobId; 4],
    records: [JobRecord; 4],
}

/// A chain read from its first step; any other length than the four steps is not a
/// contract-note chain.
async fn walk_chain(
    backend: &Client,
    client: &str,
    first: JobId,
) -> Result<ChainRead, EnqueueError> {
    let foreign = || EnqueueError::Foreign(client.to_string());
    let (mut ids, mut records) = (Vec::new(), Vec::new());
    let mut at = Some(first);
    while let Some(id) = at {
        let record = backend.job(id).await?.ok_or_else(foreign)?;
        at = record.next;
        ids.push(id);
        records.push(record);
        if ids.len() > ChainStep::ALL.len() {
            return Err(foreign());
        }
    }
    Ok(ChainRead {
        ids: ids.try_into().map_err(|_| foreign())?,
        records: records.try_into().map_err(|_| foreign())?,
    })
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
        version: c.process.version,
    })?;
    Ok(vec![
        spec(PROCESS, serde_json::to_string(&c.process)?)
            .unique_key(chain_key(&c.client_code, c.process.version)),
        spec(RENDER, later.clone()),
        spec(SIGN, later.clone()),
        spec(MAIL, later),
    ])
}
