//! Schedule files (`tranche schedule apply FILE`): TOML, one `[[schedule]]` table per
//! schedule. Every problem names the file, the line, the field, what was expected and
//! what was found.
//!
//! ```toml
//! [[schedule]]
//! name = "eod-report"
//! cron = "0 18 * * MON-FRI"   # or: at = 2026-05-01T09:00:00 (in zone, or with an offset)
//! zone = "Asia/Kolkata"       # default UTC
//! skip_missed = false         # default false
//! kind = "report"             # the job: kind, and optionally
//! queue = "reports"           # queue (default "default"), args (any TOML value,
//! args = { desk = "equity" }  # default {}), max_attempts (10), priority (0), and
//! max_attempts = 3            # run (default "schedule:<name>")
//! ```

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use tranche_types::{JobSpec, Timestamp};

use crate::error::{FileError, Invalid, ScheduleError};
use crate::schedule::{Schedule, ScheduledJob, When};
use crate::timing::parse_at;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[serde(default)]
    schedule: Vec<Spanned<Entry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Spanned<String>,
    cron: Option<Spanned<String>>,
    at: Option<Spanned<toml::Value>>,
    zone: Option<Spanned<String>>,
    #[serde(default)]
    skip_missed: bool,
    kind: Spanned<String>,
    queue: Option<Spanned<String>>,
    args: Option<Spanned<toml::Value>>,
    max_attempts: Option<Spanned<i64>>,
    priority: Option<Spanned<i64>>,
    run: Option<Spanned<String>>,
}

impl Entry {
    /// Where a field is written, for an error about it.
    fn span_of(&self, field: &str) -> Option<Range<usize>> {
        match field {
            "name" => Some(self.name.span()),
            "cron" => self.cron.as_ref().map(Spanned::span),
            "at" => self.at.as_ref().map(Spanned::span),
            "zone" => self.zone.as_ref().map(Spanned::span),
            "kind" => Some(self.kind.span()),
            "queue" => self.queue.as_ref().map(Spanned::span),
            "args" => self.args.as_ref().map(Spanned::span),
            "max_attempts" => self.max_attempts.as_ref().map(Spanned::span),
            "priority" => self.priority.as_ref().map(Spanned::span),
            "run" => self.run.as_ref().map(Spanned::span),
            _ => None,
        }
    }
}

/// Read and check a schedule file.
pub fn read_file(path: &Path) -> Result<Vec<Schedule>, FileError> {
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_file(path, &text)
}

/// Check the text of a schedule file (`path` names it in errors).
pub fn parse_file(path: &Path, text: &str) -> Result<Vec<Schedule>, FileError> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let doc: Doc = toml::from_str(text).map_err(|e| FileError::Syntax {
        path: path.to_path_buf(),
        line: e.span().map_or(1, |s| line_of(s.start)),
        message: e.message().to_string(),
    })?;
    let mut names = HashSet::new();
    let mut out = Vec::with_capacity(doc.schedule.len());
    for spanned in &doc.schedule {
        let entry = spanned.get_ref();
        let field_error = |invalid: Invalid| FileError::Field {
            path: PathBuf::from(path),
            line: line_of(entry.span_of(invalid.field).unwrap_or(spanned.span()).start),
            name: entry.name.get_ref().clone(),
            invalid,
        };
        let schedule = schedule(entry).map_err(field_error)?;
        if !names.insert(schedule.name.clone()) {
            return Err(field_error(Invalid {
                field: "name",
                expected: "a name used once in the file".into(),
                got: format!("{:?} again", schedule.name),
            }));
        }
        out.push(schedule);
    }
    Ok(out)
}

fn schedule(e: &Entry) -> Result<Schedule, Invalid> {
    let zone = e
        .zone
        .as_ref()
        .map_or("UTC", |z| z.get_ref().as_str())
        .to_string();
    let when = match (&e.cron, &e.at) {
        (Some(cron), None) => When::Cron {
            expr: cron.get_ref().clone(),
            zone,
        },
        (None, Some(at)) => When::At(instant(at.get_ref(), &zone)?),
        (cron, _) => {
            return Err(Invalid {
                field: "cron",
                expected: "exactly one of cron or at".into(),
                got: if cron.is_some() { "both" } else { "neither" }.into(),
            })
        }
    };
    let int = |field, v: &Option<Spanned<i64>>, min: i64, max: i64, default: i64| {
        let got = v.as_ref().map_or(default, |v| *v.get_ref());
        if (min..=max).contains(&got) {
            Ok(got)
        } else {
            Err(Invalid {
                field,
                expected: format!("an integer from {min} to {max}"),
                got: got.to_string(),
            })
        }
    };
    let args = match &e.args {
        None => "{}".to_string(),
        Some(v) => serde_json::to_string(v.get_ref()).map_err(|err| Invalid {
            field: "args",
            expected: "a value that JSON can hold".into(),
            got: err.to_string(),
        })?,
    };
    let job = ScheduledJob {
        kind: e.kind.get_ref().clone(),
        queue: e
            .queue
            .as_ref()
            .map_or(JobSpec::DEFAULT_QUEUE.into(), |q| q.get_ref().clone()),
        args,
        max_attempts: int(
            "max_attempts",
            &e.max_attempts,
            1,
            u32::MAX.into(),
            JobSpec::DEFAULT_MAX_ATTEMPTS.into(),
        )? as u32,
        priority: int("priority", &e.priority, i16::MIN.into(), i16::MAX.into(), 0)? as i16,
        run: e.run.as_ref().map(|r| r.get_ref().clone()),
    };
    Schedule {
        name: e.name.get_ref().clone(),
        when,
        skip_missed: e.skip_missed,
        job,
    }
    .checked()
    .map_err(|err| match err {
        ScheduleError::Invalid { invalid, .. } => invalid,
        other => Invalid {
            field: "name",
            expected: "a valid schedule".into(),
            got: other.to_string(),
        },
    })
}

/// A one-off time, as TOML writes it (a date-time value or a string): see
/// [`parse_at`].
fn instant(value: &toml::Value, zone: &str) -> Result<Timestamp, Invalid> {
    let text = match value {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        other => other.to_string(),
    };
    parse_at(&text, zone)
}
