//! Schedules over HTTP: the same declarations as a schedule file's `[[schedule]]`
//! tables (`tranche schedule apply`), listed with their next due time as
//! `tranche schedules` shows them. Declaring and listing go through
//! `tranche_schedule`, so both paths check and store schedules the same way.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tranche_schedule::{
    timing::parse_at, Invalid, Listed, Schedule, ScheduleError, ScheduledJob, When,
};
use tranche_types::JobSpec;
use utoipa::{IntoParams, ToSchema};

use crate::body::Json;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::mask;
use crate::personal_data::PersonalData;
use crate::state::AppState;

/// A schedule's name in a path.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct SchedulePath {
    /// 1 to 100 letters, digits, `-`, `_` or `.`.
    #[param(max_length = 100)]
    name: String,
}

/// A schedule's declaration: the fields of one `[[schedule]]` table of a schedule
/// file. Exactly one of `cron` and `at`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleIn {
    /// The schedule's name; the path's when absent, and must equal it when given.
    #[serde(default)]
    name: Option<String>,
    /// A cron pattern read in `zone`: 5 fields, or 6 with seconds first
    /// (`0 18 * * MON-FRI`).
    #[serde(default)]
    cron: Option<String>,
    /// One instant: with an offset (`2026-05-01T09:00:00+05:30`, `…Z`), or a
    /// wall-clock time read in `zone` (`2026-05-01T09:00:00`).
    #[serde(default)]
    at: Option<String>,
    /// The IANA zone `cron` and an offset-less `at` are read in; `UTC` when absent.
    #[serde(default)]
    zone: Option<String>,
    /// Skip, rather than fire late, a due time every process was down for.
    #[serde(default)]
    skip_missed: bool,
    /// The task kind each due time enqueues.
    kind: String,
    /// Its queue; `default` when absent.
    #[serde(default)]
    queue: Option<String>,
    /// Its arguments, any JSON value; `{}` when absent.
    #[serde(default)]
    #[schema(value_type = Value)]
    args: Option<Value>,
    /// Attempts allowed (1 to 4294967295); 10 when absent.
    #[serde(default)]
    max_attempts: Option<i64>,
    /// Lower runs first (-32768 to 32767); 0 when absent.
    #[serde(default)]
    priority: Option<i64>,
    /// The run its jobs join; `schedule:<name>` when absent.
    #[serde(default)]
    run: Option<String>,
}

/// What a declaration did.
#[derive(Serialize, ToSchema)]
pub struct SchedulePut {
    /// The schedule.
    name: String,
    /// True when it starts afresh (new, or its timing changed): due times count from
    /// now. False when only its job or `skip_missed` changed: what was fired is kept.
    fresh: bool,
}

/// One schedule, as `tranche schedules` lists it.
#[derive(Serialize, ToSchema)]
pub struct ScheduleOut {
    /// The schedule.
    name: String,
    /// Its declaration; absent when it cannot be read (see `problem`).
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<ScheduleDeclared>,
    /// Why its stored declaration cannot be read (written by a newer version).
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    /// Its next due time, in microseconds since the Unix epoch (at or before now:
    /// due, fired on the scheduler's next tick); null when never due again.
    next_due: Option<i64>,
    /// The latest due time that enqueued a job, in microseconds since the Unix
    /// epoch; null when none has.
    last_fired: Option<i64>,
}

/// A stored declaration, in the fields it was declared with.
#[derive(Serialize, ToSchema)]
pub struct ScheduleDeclared {
    /// The cron pattern, for a periodic schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    /// The instant, in microseconds since the Unix epoch, for a one-off schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<i64>,
    /// The IANA zone the cron pattern is read in (`UTC` for a one-off schedule).
    zone: String,
    /// Whether missed due times are skipped.
    skip_missed: bool,
    /// The task kind.
    kind: String,
    /// The queue.
    queue: String,
    /// The arguments.
    #[schema(value_type = Value)]
    args: Value,
    /// Attempts allowed.
    max_attempts: u32,
    /// Priority: lower runs first.
    priority: i16,
    /// The run its jobs join.
    run: String,
}

/// Every schedule.
#[derive(Serialize, ToSchema)]
pub struct ScheduleList {
    /// Sorted by name.
    schedules: Vec<ScheduleOut>,
}

/// Every schedule with its next due time, sorted by name. Personal data in their
/// arguments is masked as in a job's, unless the token may see it.
#[utoipa::path(
    get,
    path = "/v1/schedules",
    operation_id = "list_schedules",
    tag = "schedules",
    responses((status = 200, description = "OK", body = ScheduleList))
)]
pub async fn list(
    State(app): State<AppState>,
    personal_data: PersonalData,
) -> Result<axum::Json<ScheduleList>, ApiError> {
    let listed = tranche_schedule::list(app.backend())
        .await
        .map_err(schedule_error)?;
    Ok(axum::Json(ScheduleList {
        schedules: listed.into_iter().map(|l| out(l, personal_data)).collect(),
    }))
}

/// Declare a schedule, replacing one of the same name (as `tranche schedule apply`
/// does for each table of a file).
///
/// A new schedule, or one whose timing changed, counts due times from now; a one-off
/// time already past is due at once. Re-declaring the same timing keeps what was
/// fired. A field that is not acceptable is answered 400 naming it, what was expected
/// and what was sent.
#[utoipa::path(
    put,
    path = "/v1/schedules/{name}",
    operation_id = "put_schedule",
    tag = "schedules",
    params(SchedulePath),
    request_body = ScheduleIn,
    responses(
        (status = 200, description = "OK", body = SchedulePut),
        (status = 400, description = "A field is not acceptable: `field` names it", body = ErrorBody),
    )
)]
pub async fn put(
    State(app): State<AppState>,
    Path(SchedulePath { name }): Path<SchedulePath>,
    Json(body): Json<ScheduleIn>,
) -> Result<axum::Json<SchedulePut>, ApiError> {
    let schedule = declaration(&name, body).map_err(invalid)?;
    let fresh = tranche_schedule::apply(app.backend(), &schedule)
        .await
        .map_err(schedule_error)?;
    Ok(axum::Json(SchedulePut { name, fresh }))
}

/// Remove a schedule: no due time of it fires from now on. Jobs it enqueued stay.
#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    operation_id = "delete_schedule",
    tag = "schedules",
    params(SchedulePath),
    responses(
        (status = 200, description = "OK", body = ScheduleDeleted),
        (status = 404, description = "No such schedule", body = ErrorBody),
    )
)]
pub async fn delete(
    State(app): State<AppState>,
    Path(SchedulePath { name }): Path<SchedulePath>,
) -> Result<axum::Json<ScheduleDeleted>, ApiError> {
    if tranche_schedule::delete(app.backend(), &name)
        .await
        .map_err(schedule_error)?
    {
        Ok(axum::Json(ScheduleDeleted {
            name,
            deleted: true,
        }))
    } else {
        Err(ApiError::not_found(format!("schedule {name:?} not found")))
    }
}

/// A removed schedule.
#[derive(Serialize, ToSchema)]
pub struct ScheduleDeleted {
    /// The schedule.
    name: String,
    /// Always true: an absent schedule is answered 404.
    deleted: bool,
}

/// The body as a checked schedule, by the rules of a schedule file's table.
fn declaration(name: &str, b: ScheduleIn) -> Result<Schedule, Invalid> {
    if let Some(given) = b.name.as_deref().filter(|given| *given != name) {
        return Err(Invalid {
            field: "name",
            expected: format!("the path's name {name:?} (or no name)"),
            got: format!("{given:?}"),
        });
    }
    let zone = b.zone.unwrap_or_else(|| "UTC".into());
    let when = match (b.cron, b.at) {
        (Some(expr), None) => When::Cron { expr, zone },
        (None, Some(at)) => When::At(parse_at(&at, &zone)?),
        (cron, _) => {
            return Err(Invalid {
                field: "cron",
                expected: "exactly one of cron or at".into(),
                got: if cron.is_some() { "both" } else { "neither" }.into(),
            })
        }
    };
    let int = |field, v: Option<i64>, min: i64, max: i64, default: i64| {
        let got = v.unwrap_or(default);
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
    let job = ScheduledJob {
        kind: b.kind,
        queue: b.queue.unwrap_or_else(|| JobSpec::DEFAULT_QUEUE.into()),
        args: b.args.map_or_else(|| "{}".into(), |v| v.to_string()),
        max_attempts: int(
            "max_attempts",
            b.max_attempts,
            1,
            u32::MAX.into(),
            JobSpec::DEFAULT_MAX_ATTEMPTS.into(),
        )? as u32,
        priority: int("priority", b.priority, i16::MIN.into(), i16::MAX.into(), 0)? as i16,
        run: b.run,
    };
    Schedule {
        name: name.to_string(),
        when,
        skip_missed: b.skip_missed,
        job,
    }
    .checked()
    .map_err(|e| match e {
        ScheduleError::Invalid { invalid, .. } => invalid,
        // `checked` only reports declarations; anything else would be a new kind of
        // problem, still the body's.
        other => Invalid {
            field: "name",
            expected: "a valid schedule".into(),
            got: other.to_string(),
        },
    })
}

fn invalid(invalid: Invalid) -> ApiError {
    ApiError::invalid(invalid.field, invalid.to_string())
}

fn schedule_error(e: ScheduleError) -> ApiError {
    match e {
        ScheduleError::Invalid { invalid: i, .. } => invalid(i),
        ScheduleError::Backend(e) => e.into(),
        stored @ ScheduleError::Stored { .. } => ApiError::server(
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "schedule failed",
            stored,
        ),
    }
}

fn out(l: Listed, personal_data: PersonalData) -> ScheduleOut {
    let (schedule, problem) = match l.schedule {
        Ok(s) => (Some(declared(s, personal_data)), None),
        Err(problem) => (None, Some(problem)),
    };
    ScheduleOut {
        name: l.name,
        schedule,
        problem,
        next_due: l.next_due.map(|t| t.micros()),
        last_fired: l.last_fired.map(|t| t.micros()),
    }
}

fn declared(s: Schedule, personal_data: PersonalData) -> ScheduleDeclared {
    let run = s.run_name();
    let (cron, at, zone) = match s.when {
        When::Cron { expr, zone } => (Some(expr), None, zone),
        When::At(t) => (None, Some(t.micros()), "UTC".to_string()),
    };
    let job = s.job;
    ScheduleDeclared {
        cron,
        at,
        zone,
        skip_missed: s.skip_missed,
        // The arguments every due time's job gets: masked as that job's would be.
        // Checked as JSON when declared; text that no longer parses is shown as text.
        args: match personal_data {
            PersonalData::Shown => {
                serde_json::from_str(&job.args).unwrap_or(Value::String(job.args))
            }
            PersonalData::Masked => serde_json::from_str(&mask::json(&job.args))
                .unwrap_or_else(|_| Value::String(mask::text(&job.args).into_owned())),
        },
        kind: job.kind,
        queue: job.queue,
        max_attempts: job.max_attempts,
        priority: job.priority,
        run,
    }
}

#[cfg(test)]
mod tests {
    use tranche_schedule::Schedule;

    /// The `max_length` attribute is a literal: it must say what the code checks.
    #[test]
    fn the_documented_name_limit_is_the_codes() {
        let doc: serde_json::Value = serde_json::from_str(crate::openapi::json()).unwrap();
        let params = &doc["paths"]["/v1/schedules/{name}"]["put"]["parameters"];
        assert_eq!(params[0]["schema"]["maxLength"], Schedule::MAX_NAME_LEN);
    }
}
