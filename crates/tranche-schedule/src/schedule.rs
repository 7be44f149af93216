//! A schedule's declaration: when, the job it enqueues, and what a missed due time
//! does. Stored as JSON text (the backend never reads it).

use serde::{Deserialize, Serialize};
use tranche_types::{EnqueueItem, EnqueueRequest, JobSpec, RunName, StoredSchedule, Timestamp};

use crate::error::{Invalid, ScheduleError};
use crate::timing::Timing;

/// One schedule: a name, when it is due, and the job each due time enqueues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Unique among schedules: letters, digits, `-`, `_`, `.`; at most 100 bytes.
    pub name: String,
    /// When it is due.
    pub when: When,
    /// A due time noticed only after [`Scheduler`](crate::Scheduler)'s missed-after
    /// delay (every process was down) is skipped instead of fired late.
    #[serde(default)]
    pub skip_missed: bool,
    /// What each due time enqueues.
    pub job: ScheduledJob,
}

/// When a schedule is due.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    /// Every wall-clock time a cron pattern matches in an IANA zone.
    Cron {
        /// e.g. `0 18 * * MON-FRI`.
        expr: String,
        /// e.g. `Asia/Kolkata`.
        zone: String,
    },
    /// Once.
    At(Timestamp),
}

/// The job a due time enqueues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduledJob {
    /// Its task kind.
    pub kind: String,
    /// Its queue.
    pub queue: String,
    /// Its arguments, as JSON text.
    pub args: String,
    /// Attempts before it fails for good.
    pub max_attempts: u32,
    /// Lower runs first.
    pub priority: i16,
    /// The run it joins; `schedule:<name>` when not given.
    pub run: Option<String>,
}

impl ScheduledJob {
    /// A job of `kind` with no arguments on the default queue.
    pub fn new(kind: impl Into<String>) -> Self {
        ScheduledJob {
            kind: kind.into(),
            queue: JobSpec::DEFAULT_QUEUE.into(),
            args: "{}".into(),
            max_attempts: JobSpec::DEFAULT_MAX_ATTEMPTS,
            priority: 0,
            run: None,
        }
    }
}

impl Schedule {
    /// Longest schedule name, in bytes: room for it in a run name and a unique key.
    pub const MAX_NAME_LEN: usize = 100;

    /// A cron schedule, checked.
    pub fn cron(
        name: &str,
        expr: &str,
        zone: &str,
        job: ScheduledJob,
    ) -> Result<Schedule, ScheduleError> {
        Schedule {
            name: name.into(),
            when: When::Cron {
                expr: expr.into(),
                zone: zone.into(),
            },
            skip_missed: false,
            job,
        }
        .checked()
    }

    /// A one-off schedule, checked.
    pub fn at(name: &str, at: Timestamp, job: ScheduledJob) -> Result<Schedule, ScheduleError> {
        Schedule {
            name: name.into(),
            when: When::At(at),
            skip_missed: false,
            job,
        }
        .checked()
    }

    /// The same, skipping missed due times.
    pub fn skip_missed(mut self, skip: bool) -> Self {
        self.skip_missed = skip;
        self
    }

    /// Every field checked; the first problem found.
    pub fn checked(self) -> Result<Schedule, ScheduleError> {
        match self.problem() {
            Some(invalid) => Err(ScheduleError::Invalid {
                name: self.name,
                invalid,
            }),
            None => Ok(self),
        }
    }

    fn problem(&self) -> Option<Invalid> {
        let bad = |field, expected: &str, got: String| {
            Some(Invalid {
                field,
                expected: expected.into(),
                got,
            })
        };
        let name_ok = !self.name.is_empty()
            && self.name.len() <= Self::MAX_NAME_LEN
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok {
            return bad(
                "name",
                "1 to 100 letters, digits, '-', '_' or '.'",
                format!("{:?}", self.name),
            );
        }
        if let Err(e) = self.timing() {
            return Some(e);
        }
        let job = &self.job;
        if job.kind.is_empty() || job.kind.len() > JobSpec::MAX_KIND_LEN {
            return bad(
                "kind",
                "a task kind of 1 to 128 bytes",
                format!("{:?}", job.kind),
            );
        }
        if job.queue.is_empty() || job.queue.len() > JobSpec::MAX_QUEUE_LEN {
            return bad(
                "queue",
                "a queue name of 1 to 128 bytes",
                format!("{:?}", job.queue),
            );
        }
        if job.max_attempts == 0 {
            return bad("max_attempts", "at least 1", "0".into());
        }
        if let Err(e) = serde_json::from_str::<serde_json::Value>(&job.args) {
            return bad("args", "JSON", format!("{:?} ({e})", job.args));
        }
        if let Err(e) = RunName::new(self.run_name()) {
            return bad(
                "run",
                e.reason.trim_start_matches("expected "),
                format!("{:?}", e.name),
            );
        }
        None
    }

    /// When it is due, parsed.
    pub fn timing(&self) -> Result<Timing, Invalid> {
        match &self.when {
            When::Cron { expr, zone } => Timing::cron(expr, zone),
            When::At(t) => Ok(Timing::At(*t)),
        }
    }

    /// The run its jobs join.
    pub fn run_name(&self) -> String {
        self.job
            .run
            .clone()
            .unwrap_or_else(|| format!("schedule:{}", self.name))
    }

    /// What due time `due` enqueues: its job, under a unique key naming the schedule
    /// and the due time (a handler can tell which due time it serves).
    pub fn request(&self, due: Timestamp) -> Result<EnqueueRequest, ScheduleError> {
        let run = RunName::new(self.run_name()).map_err(|e| ScheduleError::Invalid {
            name: self.name.clone(),
            invalid: Invalid {
                field: "run",
                expected: e.reason.trim_start_matches("expected ").into(),
                got: format!("{:?}", e.name),
            },
        })?;
        let spec = JobSpec::new(&self.job.kind, &self.job.args)
            .queue(&self.job.queue)
            .max_attempts(self.job.max_attempts)
            .priority(self.job.priority)
            .unique_key(unique_key(&self.name, due));
        Ok(EnqueueRequest {
            run,
            items: vec![EnqueueItem::Job(spec)],
            on_done: None,
        })
    }

    /// Read back from the backend.
    pub fn from_stored(stored: &StoredSchedule) -> Result<Schedule, ScheduleError> {
        serde_json::from_str(&stored.spec).map_err(|source| ScheduleError::Stored {
            name: stored.name.clone(),
            source,
        })
    }

    /// As the backend stores it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a schedule serialises")
    }
}

/// The unique key of the job a schedule's due time enqueues.
pub fn unique_key(name: &str, due: Timestamp) -> String {
    format!("schedule:{name}:{}", due.micros())
}
