//! Request and response bodies. Job arguments and results travel as JSON values and
//! are kept as raw text end to end: the server never re-encodes a payload (masking
//! personal data only replaces characters inside its strings).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use tranche_types::{JobId, JobSpec, LeaseRef, ReservedJob, RunName, Timestamp, TooLong};
use utoipa::ToSchema;

// Lengths in `#[schema]` attributes must be literals; a test checks them against the
// `JobSpec` limits they repeat.

/// A job as submitted. Only `kind` is required.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobIn {
    /// The task kind; at most 128 bytes (longer: 400 naming the field).
    #[serde(deserialize_with = "kind")]
    #[schema(min_length = 1, max_length = 128)]
    pub kind: String,
    /// The queue it waits in, which workers poll by name; at most 128 bytes.
    #[serde(default = "default_queue", deserialize_with = "queue")]
    #[schema(default = default_queue, min_length = 1, max_length = 128)]
    pub queue: String,
    /// Any JSON value; `null` when absent.
    #[serde(default)]
    #[schema(value_type = Value)]
    pub args: Option<Box<RawValue>>,
    /// Attempts allowed in all, the first included: when the last one fails, the job
    /// ends `failed`.
    #[serde(default = "default_attempts")]
    #[schema(default = default_attempts, minimum = 1)]
    pub max_attempts: u32,
    /// Lower runs first among the queue's runnable jobs; 0 when absent.
    #[serde(default)]
    pub priority: i16,
    /// The same key twice in a run returns the first job (with `unique_for_ms`: across
    /// runs, within the window). At most 512 bytes.
    #[serde(default, deserialize_with = "unique_key")]
    #[schema(max_length = 512)]
    pub unique_key: Option<String>,
    /// Not runnable before this time, in microseconds since the Unix epoch.
    #[serde(default)]
    pub not_before: Option<i64>,
    /// With `unique_key`: the key is unique across all runs for this many milliseconds
    /// from this job's submission, instead of within its run forever. While the newest
    /// job submitted under the key with a window is inside its window and has not
    /// failed or been cancelled (waiting, running or succeeded all count), submitting
    /// the key again returns that job with `existed: true`; after the window, a new job
    /// is created and opens a new window. Windowed and run-scoped keys never match each
    /// other. Only on a job, a chain's first step or a group's callback (else 400).
    #[serde(default, deserialize_with = "unique_for_ms")]
    #[schema(minimum = 1, maximum = 31622400000_u64)]
    pub unique_for_ms: Option<u64>,
}

// The backends refuse over-long names too (`JobSpec::check_lengths`); checked here as
// well so the answer names the field's place in the request (`items[3].job.queue`) and
// nothing of an over-long name reaches the intake counters or metric labels.

fn kind<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    at_most(String::deserialize(d)?, "kind", JobSpec::MAX_KIND_LEN)
}

pub fn queue<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    at_most(String::deserialize(d)?, "queue", JobSpec::MAX_QUEUE_LEN)
}

fn unique_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)?
        .map(|k| at_most(k, "unique_key", JobSpec::MAX_UNIQUE_KEY_LEN))
        .transpose()
}

fn unique_for_ms<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let max = JobSpec::MAX_UNIQUE_FOR.as_millis() as u64;
    match Option::<u64>::deserialize(d)? {
        Some(ms) if ms == 0 || ms > max => Err(serde::de::Error::custom(format!(
            "unique_for_ms: expected 1 to {max} (366 days), got {ms}"
        ))),
        ms => Ok(ms),
    }
}

fn at_most<E: serde::de::Error>(s: String, field: &'static str, max: usize) -> Result<String, E> {
    if s.len() > max {
        return Err(E::custom(TooLong {
            field,
            max,
            got: s.len(),
        }));
    }
    Ok(s)
}

fn default_queue() -> String {
    JobSpec::DEFAULT_QUEUE.to_string()
}

fn default_attempts() -> u32 {
    JobSpec::DEFAULT_MAX_ATTEMPTS
}

impl JobIn {
    pub fn into_spec(self) -> JobSpec {
        JobSpec {
            kind: self.kind,
            queue: self.queue,
            args: self
                .args
                .map_or_else(|| "null".to_string(), |a| String::from(Box::<str>::from(a))),
            max_attempts: self.max_attempts,
            priority: self.priority,
            unique_key: self.unique_key,
            not_before: self.not_before.map(Timestamp),
            unique_for: self.unique_for_ms.map(Duration::from_millis),
            trace: None,
        }
    }
}

/// One job, a chain (each step runs after the previous one succeeded and receives its
/// result) or a group (members run independently; the callback runs once all ended).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[schema(as = Item)]
pub enum ItemIn {
    /// `{"job": {...}}`: one job.
    Job(JobIn),
    /// `{"chain": [...]}`: steps in order. A failed or cancelled step cancels the steps
    /// after it.
    Chain(Vec<JobIn>),
    /// `{"group": {"members": [...], "callback": {...}}}`.
    Group {
        /// Run independently of each other.
        members: Vec<JobIn>,
        /// Runs once every member has ended, whatever its state; its input is the
        /// members' outcomes, in member order: `[{"job", "state", "result"?, "error"?}]`.
        callback: JobIn,
    },
}

impl ItemIn {
    pub fn jobs(&self) -> Box<dyn Iterator<Item = &JobIn> + '_> {
        match self {
            ItemIn::Job(j) => Box::new(std::iter::once(j)),
            ItemIn::Chain(steps) => Box::new(steps.iter()),
            ItemIn::Group { members, callback } => {
                Box::new(members.iter().chain(std::iter::once(callback)))
            }
        }
    }

    /// The jobs that will wait in their queue at once (a chain's later steps and a
    /// group's callback wait as pending, outside any queue).
    pub fn queued_now(&self) -> Box<dyn Iterator<Item = &JobIn> + '_> {
        match self {
            ItemIn::Job(j) => Box::new(std::iter::once(j)),
            ItemIn::Chain(steps) => Box::new(steps.iter().take(1)),
            ItemIn::Group { members, .. } => Box::new(members.iter()),
        }
    }
}

/// Body of `POST /v1/jobs`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    /// The run the job joins; a run is created by its first submission.
    pub run: RunName,
    pub job: JobIn,
}

/// Body of `POST /v1/batches`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    /// The run every item joins; a run is created by its first submission.
    pub run: RunName,
    /// At most the server's `max_jobs_per_request` jobs in all (10,000 by default),
    /// counting each step, member and callback. Answered in the same order.
    pub items: Vec<ItemIn>,
    /// Enqueued into the run `<run>/done` each time the run finishes. Replaces the
    /// run's earlier `on_done`, if any; absent keeps it.
    #[serde(default)]
    pub on_done: Option<JobIn>,
}

/// Body of `POST /v1/chains`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitChain {
    /// The run the steps join; a run is created by its first submission.
    pub run: RunName,
    /// In order: each runs once the one before succeeded, with its result as input. A
    /// failed or cancelled step cancels the steps after it.
    #[schema(min_items = 1)]
    pub steps: Vec<JobIn>,
}

/// Body of `POST /v1/groups`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitGroup {
    /// The run the jobs join; a run is created by its first submission.
    pub run: RunName,
    /// Run independently of each other.
    pub members: Vec<JobIn>,
    /// Runs once every member has ended, whatever its state; its input is the members'
    /// outcomes, in member order: `[{"job", "state", "result"?, "error"?}]`.
    pub callback: JobIn,
}

/// The jobs created for one submitted item.
#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    /// The new jobs' ids: a chain's steps in order; a group's members, then its callback.
    pub ids: Vec<JobId>,
    /// True when a unique key matched an existing job (in the run, or across runs
    /// within its `unique_for_ms` window), whose id is returned.
    pub existed: bool,
}

/// Optional body of the cancel endpoints.
#[derive(Debug, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Recorded as the cancelled jobs' error; `cancelled through the API` when absent.
    #[serde(default)]
    pub reason: Option<String>,
}

/// A lease as a worker names it: a job and the attempt it was polled for.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Lease)]
pub struct LeaseIn {
    /// The polled job's `id`.
    pub job: JobId,
    /// The polled job's `attempt`: a lease for an earlier attempt is no longer held.
    pub attempt: u32,
}

impl From<LeaseIn> for LeaseRef {
    fn from(l: LeaseIn) -> Self {
        LeaseRef {
            job: l.job,
            attempt: l.attempt,
        }
    }
}

impl From<LeaseRef> for LeaseIn {
    fn from(l: LeaseRef) -> Self {
        LeaseIn {
            job: l.job,
            attempt: l.attempt,
        }
    }
}

/// A job handed to a remote worker, with its real arguments and input.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolledJob {
    pub id: JobId,
    /// 1 on the job's first run; report it back with `id` in heartbeats and results.
    pub attempt: u32,
    /// Attempts allowed in all: a failure of attempt `max_attempts` ends the job `failed`.
    pub max_attempts: u32,
    /// The run the job belongs to.
    pub run: RunName,
    /// The task to run, as submitted: what the worker dispatches on.
    pub kind: String,
    /// The queue it was polled from.
    pub queue: String,
    /// Any JSON value.
    #[schema(value_type = Value)]
    pub args: Box<RawValue>,
    /// The previous chain step's result, or a group callback's member outcomes; `null`
    /// for others.
    #[schema(value_type = Value)]
    pub input: Option<Box<RawValue>>,
    /// Unless a heartbeat extends it, the job may then be given to another worker, and
    /// this attempt's reports answered `stale`.
    pub lease_until: Timestamp,
    /// When the job last became runnable; its time waiting is measured from here.
    pub available_at: Timestamp,
}

/// Stored JSON text as a raw value; text that is not JSON (written by a library caller
/// that broke the contract) is sent as a JSON string rather than corrupting the body.
pub fn raw(text: String) -> Box<RawValue> {
    serde_json::from_str::<Box<RawValue>>(&text).unwrap_or_else(|_| {
        let quoted = serde_json::to_string(&text).unwrap_or_else(|_| "null".into());
        RawValue::from_string(quoted).expect("a JSON string is JSON")
    })
}

impl From<ReservedJob> for PolledJob {
    fn from(j: ReservedJob) -> Self {
        PolledJob {
            id: j.id,
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            run: j.run,
            kind: j.kind,
            queue: j.queue,
            args: raw(j.args),
            input: j.input.map(raw),
            lease_until: j.lease_until,
            available_at: j.available_at,
        }
    }
}

// A submission date's ACH figures: `tranche_ach_pipeline::DayStatus` as served. The
// pipeline knows nothing of OpenAPI, hence these mirrors; they also give its window
// times as every other time of this API, microseconds since the Unix epoch.

/// A submission date's ACH entries and files, per bank and window. Counts and
/// amounts only: no entry is named.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchDayStatus)]
pub struct DayStatusOut {
    /// The submission date, `YYYY-MM-DD`.
    #[schema(value_type = String, format = Date)]
    pub date: chrono::NaiveDate,
    /// The banks of the server's ACH rules (`--ach-rules`) in their order, then any
    /// other bank with entries or files that day.
    pub banks: Vec<BankFiguresOut>,
}

/// One bank's figures.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchBankFigures)]
pub struct BankFiguresOut {
    /// The bank's key, as entries name it.
    pub bank: String,
    /// Entries (and their amounts) by effective state, one per state in the order
    /// accepted, packaged, submitted, rejected, cancelled.
    pub entries: Vec<StateTallyOut>,
    /// The bank's windows: those of the rules in their order, then any other window a
    /// file of the day names.
    pub windows: Vec<WindowFiguresOut>,
    /// The day's 36 file ID modifiers.
    pub modifiers: ModifiersOut,
    /// What stops entries of the day from going out, each with what to do about it
    /// (e.g. no file ID modifier left).
    pub problems: Vec<String>,
}

/// How a bank's day stands with its 36 file ID modifiers.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchModifiers)]
pub struct ModifiersOut {
    /// Held by files sent, being sent, or that may be at the bank.
    pub sent: u64,
    /// Held by packaged files not sent yet (given back if the file is released).
    pub waiting: u64,
    /// Free for the next files.
    pub free: u64,
}

/// Entries in one effective state.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchStateTally)]
pub struct StateTallyOut {
    /// The state.
    #[schema(value_type = crate::ach::EntryState)]
    pub state: &'static str,
    /// How many entries.
    pub entries: u64,
    /// The sum of their amounts (credits and debits alike), in cents.
    pub cents: u64,
}

/// One window's files on the day.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchWindowFigures)]
pub struct WindowFiguresOut {
    /// The window's name.
    pub window: String,
    /// When its submission begins that day; `null` without rules, or for a window the
    /// rules no longer have.
    #[schema(required = true)]
    pub begins: Option<Timestamp>,
    /// When it ends (the bank's cut-off; the next day for a window crossing
    /// midnight); `null` as `begins`.
    #[schema(required = true)]
    pub ends: Option<Timestamp>,
    /// Files by state, one per state in the order packaged, submitting, submitted,
    /// released.
    pub files: Vec<FileCountOut>,
    /// Entries in its files that are not released.
    pub entries: u64,
    /// Their debits, in cents.
    pub debit_cents: u64,
    /// Their credits, in cents.
    pub credit_cents: u64,
}

/// Files in one state.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AchFileCount)]
pub struct FileCountOut {
    /// The state.
    #[schema(value_type = FileStateDoc)]
    pub state: &'static str,
    /// How many files.
    pub files: u64,
}

// Documentation only: the ledger's names are served as they are (`FileCountOut`).
/// A payment file's state.
#[allow(dead_code)]
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = AchFileState)]
enum FileStateDoc {
    /// Recorded with its entries, not being submitted.
    Packaged,
    /// Its upload began and has not ended (in progress, or in doubt after a crash).
    Submitting,
    /// Delivered to the bank.
    Submitted,
    /// Taken apart (its entries went back to accepted, or were cancelled).
    Released,
}

fn micros(t: chrono::DateTime<chrono::Utc>) -> Timestamp {
    Timestamp(t.timestamp_micros())
}

impl From<tranche_ach_pipeline::DayStatus> for DayStatusOut {
    fn from(s: tranche_ach_pipeline::DayStatus) -> Self {
        DayStatusOut {
            date: s.date,
            banks: s
                .banks
                .into_iter()
                .map(|b| BankFiguresOut {
                    bank: b.bank,
                    entries: b
                        .entries
                        .into_iter()
                        .map(|t| StateTallyOut {
                            state: t.state,
                            entries: t.entries,
                            cents: t.cents,
                        })
                        .collect(),
                    windows: b
                        .windows
                        .into_iter()
                        .map(|w| WindowFiguresOut {
                            window: w.window,
                            begins: w.begins.map(micros),
                            ends: w.ends.map(micros),
                            files: w
                                .files
                                .into_iter()
                                .map(|f| FileCountOut {
                                    state: f.state,
                                    files: f.files,
                                })
                                .collect(),
                            entries: w.entries,
                            debit_cents: w.debit_cents,
                            credit_cents: w.credit_cents,
                        })
                        .collect(),
                    modifiers: ModifiersOut {
                        sent: b.modifiers.sent,
                        waiting: b.modifiers.waiting,
                        free: b.modifiers.free,
                    },
                    problems: b.problems,
                })
                .collect(),
        }
    }
}
