//! Request and response bodies. Job arguments and results travel as JSON values and
//! are kept as raw text end to end: the server never re-encodes a payload (masking
//! personal data only replaces characters inside its strings).

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use tranche_types::{JobId, JobSpec, LeaseRef, ReservedJob, RunName, Timestamp, TooLong};

/// A job as submitted. Only `kind` is required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobIn {
    #[serde(deserialize_with = "kind")]
    pub kind: String,
    #[serde(default = "default_queue", deserialize_with = "queue")]
    pub queue: String,
    /// Any JSON value; `null` when absent.
    #[serde(default)]
    pub args: Option<Box<RawValue>>,
    #[serde(default = "default_attempts")]
    pub max_attempts: u32,
    #[serde(default)]
    pub priority: i16,
    #[serde(default, deserialize_with = "unique_key")]
    pub unique_key: Option<String>,
    /// Not runnable before this time, in microseconds since the Unix epoch.
    #[serde(default)]
    pub not_before: Option<i64>,
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
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ItemIn {
    Job(JobIn),
    Chain(Vec<JobIn>),
    Group {
        members: Vec<JobIn>,
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    pub run: RunName,
    pub job: JobIn,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    pub run: RunName,
    pub items: Vec<ItemIn>,
    /// Enqueued into the run `<run>/done` each time the run finishes.
    #[serde(default)]
    pub on_done: Option<JobIn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitChain {
    pub run: RunName,
    pub steps: Vec<JobIn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitGroup {
    pub run: RunName,
    pub members: Vec<JobIn>,
    pub callback: JobIn,
}

#[derive(Debug, Serialize)]
pub struct Submitted {
    pub ids: Vec<JobId>,
    /// True when a unique key matched an existing job, whose id is returned.
    pub existed: bool,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    #[serde(default)]
    pub reason: Option<String>,
}

/// A lease as a worker names it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseIn {
    pub job: JobId,
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

/// A job handed to a remote worker.
#[derive(Debug, Serialize)]
pub struct PolledJob {
    pub id: JobId,
    pub attempt: u32,
    pub max_attempts: u32,
    pub run: RunName,
    pub kind: String,
    pub queue: String,
    pub args: Box<RawValue>,
    /// The previous chain step's result, or a group callback's member outcomes.
    pub input: Option<Box<RawValue>>,
    pub lease_until: Timestamp,
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
