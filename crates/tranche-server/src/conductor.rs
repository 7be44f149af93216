//! Conductor's REST API under `/api`: metadata (task and workflow definitions),
//! workflows and tasks, as Conductor OSS 3.x serves them, so Conductor's SDKs and
//! tools work unchanged against `tranche server` (see `docs/workflows.md`, "How a
//! Conductor user moves over"). The workflows themselves are `tranche-workflow-engine`'s;
//! this module only speaks Conductor's wire format. Its routes are Conductor's and
//! documented by Conductor, so they are not in `/v1/openapi.json`; errors have the
//! server's one envelope.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put, MethodRouter};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tranche_workflow_def::{task_defs_from_json, workflows_from_json_with, DefinitionError};
use tranche_workflow_engine::{
    RerunRequest, StartRequest, TaskStatus, TaskUpdate, WorkflowError, WorkflowView,
};
use tranche_workflow_expr::script_problems;

use crate::body::parse;
use crate::error::{ApiError, ErrorCode};
use crate::personal_data::PersonalData;
use crate::state::AppState;

/// The longest a batch poll waits, whatever it asks (Conductor's SDKs ask 100 ms to
/// a few seconds); the server's idle timeout must stay above it.
const MAX_POLL_WAIT: Duration = Duration::from_secs(10);

/// Most steps one batch poll leases.
const MAX_POLL_COUNT: usize = 1_000;

/// How many of the newest workflows a search looks at.
const SEARCH_SCAN: usize = 200_000;

/// Every Conductor route: method, path, handler.
pub fn routes() -> Vec<(&'static str, &'static str, MethodRouter<AppState>)> {
    vec![
        ("POST", "/api/metadata/taskdefs", post(put_task_defs)),
        ("PUT", "/api/metadata/taskdefs", put(put_task_defs)),
        ("GET", "/api/metadata/taskdefs", get(task_defs)),
        ("GET", "/api/metadata/taskdefs/{name}", get(task_def)),
        ("POST", "/api/metadata/workflow", post(put_workflow_defs)),
        ("PUT", "/api/metadata/workflow", put(put_workflow_defs)),
        ("GET", "/api/metadata/workflow", get(workflow_defs)),
        ("GET", "/api/metadata/workflow/{name}", get(workflow_def)),
        ("POST", "/api/workflow", post(start_by_request)),
        ("GET", "/api/workflow/search", get(search)),
        ("POST", "/api/workflow/{id}", post(start_by_name)),
        ("GET", "/api/workflow/{id}", get(workflow)),
        ("DELETE", "/api/workflow/{id}", delete(terminate)),
        ("DELETE", "/api/workflow/{id}/remove", delete(remove)),
        ("PUT", "/api/workflow/{id}/pause", put(pause)),
        ("PUT", "/api/workflow/{id}/resume", put(resume)),
        ("POST", "/api/workflow/{id}/retry", post(retry)),
        ("POST", "/api/workflow/{id}/restart", post(restart)),
        ("POST", "/api/workflow/{id}/rerun", post(rerun)),
        (
            "GET",
            "/api/workflow/{id}/correlated/{correlation}",
            get(correlated),
        ),
        ("GET", "/api/tasks/poll/{task_type}", get(poll_one)),
        ("GET", "/api/tasks/poll/batch/{task_type}", get(poll_batch)),
        ("POST", "/api/tasks", post(update_task)),
        ("POST", "/api/tasks/update-v2", post(update_task_v2)),
        ("GET", "/api/tasks/queue/sizes", get(queue_sizes)),
        ("GET", "/api/tasks/{id}", get(task)),
        ("POST", "/api/tasks/{id}/log", post(task_log)),
        ("GET", "/api/tasks/{id}/log", get(task_logs)),
        (
            "POST",
            "/api/tasks/{id}/{reference}/{status}",
            post(complete_by_reference),
        ),
    ]
}

/// The worker endpoints a `worker` token may use: polling and updating steps.
pub fn is_worker_endpoint(path: &str) -> bool {
    path == "/api/tasks" || path.starts_with("/api/tasks/")
}

impl From<WorkflowError> for ApiError {
    fn from(e: WorkflowError) -> Self {
        match e {
            WorkflowError::Backend(e) => e.into(),
            WorkflowError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            WorkflowError::Invalid(message) => {
                ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message)
            }
            WorkflowError::Conflict(message) => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::Conflict, message)
            }
            e @ WorkflowError::Busy(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::Unavailable,
                e.to_string(),
            ),
        }
    }
}

fn definition_error(e: DefinitionError) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidRequest,
        e.to_string(),
    )
}

fn text(body: &Bytes) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::UnreadableBody,
            "expected a UTF-8 JSON body",
        )
    })
}

/// Conductor answers ids as plain text.
fn plain(text: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain")], text).into_response()
}

/// What a reader (not a worker) is shown of workflows and steps: their inputs,
/// outputs, reasons and logs with personal data masked unless the request may see it,
/// as `/v1` shows jobs (see `personal_data`).
fn read_response(pd: PersonalData, value: Value) -> Response {
    let text = value.to_string();
    let text = match pd {
        PersonalData::Shown => text,
        PersonalData::Masked => match crate::mask::json(&text) {
            std::borrow::Cow::Borrowed(_) => text,
            std::borrow::Cow::Owned(masked) => masked,
        },
    };
    ([(header::CONTENT_TYPE, "application/json")], text).into_response()
}

fn json_response(value: Value) -> Response {
    axum::Json(value).into_response()
}

async fn put_task_defs(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let defs = task_defs_from_json(text(&body)?, "request body").map_err(definition_error)?;
    app.workflows().put_task_defs(defs).await?;
    Ok(json_response(json!({})))
}

async fn task_defs(State(app): State<AppState>) -> Result<Response, ApiError> {
    let defs = app.workflows().task_defs().await?;
    Ok(json_response(
        serde_json::to_value(defs).unwrap_or_default(),
    ))
}

async fn task_def(
    State(app): State<AppState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let def = app.workflows().task_def(&name).await?;
    Ok(json_response(serde_json::to_value(def).unwrap_or_default()))
}

async fn put_workflow_defs(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let defs = workflows_from_json_with(text(&body)?, "request body", script_problems)
        .map_err(definition_error)?;
    let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
    app.workflows().put_workflow_defs(defs).await?;
    Ok(json_response(
        json!({"bulkErrorResults": {}, "bulkSuccessfulResults": names}),
    ))
}

async fn workflow_defs(State(app): State<AppState>) -> Result<Response, ApiError> {
    let defs = app.workflows().workflow_defs().await?;
    Ok(json_response(
        serde_json::to_value(defs).unwrap_or_default(),
    ))
}

#[derive(Deserialize)]
struct VersionQuery {
    version: Option<u32>,
}

async fn workflow_def(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<VersionQuery>,
) -> Result<Response, ApiError> {
    let def = app.workflows().workflow_def(&name, q.version).await?;
    Ok(json_response(serde_json::to_value(def).unwrap_or_default()))
}

/// Conductor's `StartWorkflowRequest`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartBody {
    name: String,
    #[serde(default)]
    version: Option<u32>,
    #[serde(default)]
    correlation_id: Option<String>,
    #[serde(default)]
    input: Option<Map<String, Value>>,
    #[serde(default)]
    priority: Option<i16>,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    idempotency_strategy: Option<String>,
}

async fn start_by_request(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let req: StartBody = parse(&body)?;
    if req.idempotency_strategy.as_deref() == Some("FAIL") {
        if let Some(key) = &req.idempotency_key {
            if app
                .workflows()
                .idempotent_start(&req.name, key)
                .await?
                .is_some()
            {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    ErrorCode::Conflict,
                    format!(
                        "a workflow {:?} was already started with this idempotency key",
                        req.name
                    ),
                ));
            }
        }
    }
    let id = app
        .workflows()
        .start(StartRequest {
            name: req.name,
            version: req.version,
            input: req.input.unwrap_or_default(),
            correlation_id: req.correlation_id,
            priority: req.priority.unwrap_or(0),
            idempotency_key: req.idempotency_key,
        })
        .await?;
    Ok(plain(id))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartQuery {
    version: Option<u32>,
    correlation_id: Option<String>,
    priority: Option<i16>,
}

async fn start_by_name(
    State(app): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<StartQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let input: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        parse::<Option<Map<String, Value>>>(&body)?.unwrap_or_default()
    };
    let id = app
        .workflows()
        .start(StartRequest {
            name,
            version: q.version,
            input,
            correlation_id: q.correlation_id,
            priority: q.priority.unwrap_or(0),
            idempotency_key: None,
        })
        .await?;
    Ok(plain(id))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WorkflowQuery {
    #[serde(default = "yes")]
    include_tasks: bool,
}

fn yes() -> bool {
    true
}

async fn workflow(
    State(app): State<AppState>,
    pd: PersonalData,
    Path(id): Path<String>,
    Query(q): Query<WorkflowQuery>,
) -> Result<Response, ApiError> {
    let view = app.workflows().workflow(&id, q.include_tasks).await?;
    Ok(read_response(pd, view.to_conductor()))
}

#[derive(Deserialize)]
struct ReasonQuery {
    reason: Option<String>,
}

async fn terminate(
    State(app): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<ReasonQuery>,
) -> Result<Response, ApiError> {
    let reason = q
        .reason
        .unwrap_or_else(|| "terminated through the API".into());
    app.workflows().terminate(&id, &reason).await?;
    Ok(StatusCode::OK.into_response())
}

async fn remove(State(app): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.workflows().remove(&id).await?;
    Ok(StatusCode::OK.into_response())
}

async fn pause(State(app): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.workflows().pause(&id).await?;
    Ok(StatusCode::OK.into_response())
}

async fn resume(State(app): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.workflows().resume(&id).await?;
    Ok(StatusCode::OK.into_response())
}

async fn retry(State(app): State<AppState>, Path(id): Path<String>) -> Result<Response, ApiError> {
    app.workflows().retry(&id).await?;
    Ok(StatusCode::OK.into_response())
}

async fn restart(
    State(app): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    app.workflows().restart(&id, None).await?;
    Ok(StatusCode::OK.into_response())
}

/// Conductor's `RerunWorkflowRequest`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RerunBody {
    #[serde(default)]
    re_run_from_task_id: Option<String>,
    #[serde(default)]
    workflow_input: Option<Map<String, Value>>,
    #[serde(default)]
    task_input: Option<Map<String, Value>>,
    #[serde(default)]
    correlation_id: Option<String>,
}

async fn rerun(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let req: RerunBody = parse(&body)?;
    app.workflows()
        .rerun(
            &id,
            RerunRequest {
                from: req.re_run_from_task_id,
                workflow_input: req.workflow_input,
                task_input: req.task_input.map(Value::Object),
                correlation_id: req.correlation_id,
            },
        )
        .await?;
    Ok(plain(id))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SearchQuery {
    #[serde(default)]
    start: usize,
    #[serde(default = "hundred")]
    size: usize,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    free_text: Option<String>,
}

fn hundred() -> usize {
    100
}

async fn search(
    State(app): State<AppState>,
    pd: PersonalData,
    Query(q): Query<SearchQuery>,
) -> Result<Response, ApiError> {
    let filter = SearchFilter::parse(q.query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::invalid("query", e))?;
    let free = q.free_text.filter(|t| !t.is_empty() && t != "*");
    let found = app
        .workflows()
        .search(SEARCH_SCAN, |h| {
            filter.keeps(h)
                && free.as_ref().is_none_or(|t| {
                    h.id == *t || h.correlation_id.as_deref() == Some(t.as_str()) || h.name == *t
                })
        })
        .await?;
    let results: Vec<Value> = found
        .iter()
        .skip(q.start)
        .take(q.size)
        .map(WorkflowView::summary)
        .collect();
    Ok(read_response(
        pd,
        json!({"totalHits": found.len(), "results": results}),
    ))
}

async fn correlated(
    State(app): State<AppState>,
    pd: PersonalData,
    Path((name, correlation)): Path<(String, String)>,
    Query(q): Query<WorkflowQuery>,
) -> Result<Response, ApiError> {
    let found = app
        .workflows()
        .search(SEARCH_SCAN, |h| {
            h.name == name && h.correlation_id.as_deref() == Some(correlation.as_str())
        })
        .await?;
    let mut out = Vec::new();
    for h in found {
        out.push(
            app.workflows()
                .workflow(&h.id, q.include_tasks)
                .await?
                .to_conductor(),
        );
    }
    Ok(read_response(pd, Value::Array(out)))
}

/// Conductor's search query: clauses joined by `AND`, each `field IN (a,b)`,
/// `field = a`, `field > n` or `field < n`, on `workflowType`, `status`,
/// `correlationId`, `workflowId`, `startTime` and `endTime`.
#[derive(Debug, Default)]
struct SearchFilter {
    clauses: Vec<(String, Op)>,
}

#[derive(Debug)]
enum Op {
    In(Vec<String>),
    Above(i64),
    Below(i64),
}

impl SearchFilter {
    fn parse(query: &str) -> Result<SearchFilter, String> {
        let mut clauses = Vec::new();
        for clause in query
            .split(" AND ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
        {
            let unquote = |v: &str| v.trim().trim_matches(['\'', '"']).to_string();
            let (field, op) = if let Some((f, list)) = clause.split_once(" IN ") {
                let list = list.trim().trim_start_matches('(').trim_end_matches(')');
                (f, Op::In(list.split(',').map(unquote).collect()))
            } else if let Some((f, v)) = clause.split_once('=') {
                (f, Op::In(vec![unquote(v)]))
            } else if let Some((f, v)) = clause.split_once('>') {
                (
                    f,
                    Op::Above(
                        unquote(v)
                            .parse()
                            .map_err(|_| format!("{clause:?}: expected a number of ms after >"))?,
                    ),
                )
            } else if let Some((f, v)) = clause.split_once('<') {
                (
                    f,
                    Op::Below(
                        unquote(v)
                            .parse()
                            .map_err(|_| format!("{clause:?}: expected a number of ms after <"))?,
                    ),
                )
            } else {
                return Err(format!(
                    "{clause:?}: expected `field IN (a,b)`, `field = a`, `field > n` or `field < n`"
                ));
            };
            let field = field.trim().to_string();
            const FIELDS: [&str; 6] = [
                "workflowType",
                "status",
                "correlationId",
                "workflowId",
                "startTime",
                "endTime",
            ];
            if !FIELDS.contains(&field.as_str()) {
                return Err(format!("{field:?}: expected one of {}", FIELDS.join(", ")));
            }
            clauses.push((field, op));
        }
        Ok(SearchFilter { clauses })
    }

    fn keeps(&self, h: &tranche_workflow_engine::Header) -> bool {
        self.clauses.iter().all(|(field, op)| {
            let text = match field.as_str() {
                "workflowType" => Some(h.name.clone()),
                "status" => Some(h.status.as_str().to_string()),
                "correlationId" => h.correlation_id.clone(),
                "workflowId" => Some(h.id.clone()),
                _ => None,
            };
            let number = match field.as_str() {
                "startTime" => Some(h.start_time),
                "endTime" => h.end_time,
                _ => None,
            };
            match op {
                Op::In(values) => text.is_some_and(|t| values.contains(&t)),
                Op::Above(n) => number.is_some_and(|v| v > *n),
                Op::Below(n) => number.is_some_and(|v| v < *n),
            }
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PollQuery {
    #[serde(default, alias = "workerid")]
    worker_id: Option<String>,
    #[serde(default)]
    count: Option<usize>,
    /// Milliseconds.
    #[serde(default)]
    timeout: Option<u64>,
}

async fn poll_batch(
    State(app): State<AppState>,
    Path(task_type): Path<String>,
    Query(q): Query<PollQuery>,
) -> Result<Response, ApiError> {
    let wait = Duration::from_millis(q.timeout.unwrap_or(100)).min(MAX_POLL_WAIT);
    let count = q.count.unwrap_or(1).clamp(1, MAX_POLL_COUNT);
    let polled = app
        .workflows()
        .poll(&task_type, count, wait, q.worker_id.as_deref())
        .await?;
    Ok(json_response(Value::Array(
        polled.iter().map(|t| t.to_conductor()).collect(),
    )))
}

async fn poll_one(
    State(app): State<AppState>,
    Path(task_type): Path<String>,
    Query(q): Query<PollQuery>,
) -> Result<Response, ApiError> {
    let polled = app
        .workflows()
        .poll(&task_type, 1, Duration::ZERO, q.worker_id.as_deref())
        .await?;
    Ok(match polled.first() {
        Some(t) => json_response(t.to_conductor()),
        None => StatusCode::NO_CONTENT.into_response(),
    })
}

/// Conductor's `TaskResult`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskResultBody {
    task_id: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output_data: Option<Map<String, Value>>,
    #[serde(default)]
    reason_for_incompletion: Option<String>,
    #[serde(default)]
    callback_after_seconds: Option<u64>,
}

fn task_status(status: Option<&str>) -> Result<TaskStatus, ApiError> {
    let status = status.unwrap_or("COMPLETED");
    TaskStatus::parse(status).ok_or_else(|| {
        ApiError::invalid(
            "status",
            format!(
                "expected IN_PROGRESS, COMPLETED, FAILED or FAILED_WITH_TERMINAL_ERROR, got {:?}",
                status.chars().take(40).collect::<String>()
            ),
        )
    })
}

/// `POST /api/tasks/update-v2`: an update answered with the worker's next step of the
/// same type, or 204 for none; this server answers 204 (the worker polls again).
async fn update_task_v2(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    update(&app, &body).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn update_task(State(app): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    Ok(plain(update(&app, &body).await?))
}

/// Apply a `TaskResult`; its task id.
async fn update(app: &AppState, body: &[u8]) -> Result<String, ApiError> {
    let result: TaskResultBody = parse(body)?;
    let status = task_status(result.status.as_deref())?;
    app.workflows()
        .update_task(TaskUpdate {
            task_id: result.task_id.clone(),
            status,
            output: result.output_data.unwrap_or_default(),
            reason: result.reason_for_incompletion,
            callback_after_seconds: result.callback_after_seconds.unwrap_or(0),
        })
        .await?;
    Ok(result.task_id)
}

async fn complete_by_reference(
    State(app): State<AppState>,
    Path((workflow, reference, status)): Path<(String, String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let status = task_status(Some(&status))?;
    let output: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        parse::<Option<Map<String, Value>>>(&body)?.unwrap_or_default()
    };
    app.workflows()
        .complete_waiting(&workflow, &reference, status, output)
        .await?;
    Ok(plain(String::new()))
}

async fn task(
    State(app): State<AppState>,
    pd: PersonalData,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let step = app.workflows().task(&id).await?;
    Ok(read_response(pd, step.to_conductor()))
}

/// The body is the line as raw text (Conductor's SDKs send it so, whatever the
/// content type says), kept as it came.
async fn task_log(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    app.workflows().add_log(&id, text(&body)?).await?;
    Ok(StatusCode::OK.into_response())
}

async fn task_logs(
    State(app): State<AppState>,
    pd: PersonalData,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(read_response(
        pd,
        Value::Array(app.workflows().logs(&id).await?),
    ))
}

async fn queue_sizes(
    State(app): State<AppState>,
    axum::extract::RawQuery(raw): axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    // `taskType=a&taskType=b`: a repeated key, which `Query` into a struct cannot read.
    let types: Vec<String> = form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .filter(|(k, _)| k == "taskType")
        .map(|(_, v)| v.into_owned())
        .collect();
    let sizes = app.workflows().queue_sizes(&types).await?;
    let map: Map<String, Value> = sizes.into_iter().map(|(t, n)| (t, n.into())).collect();
    Ok(json_response(Value::Object(map)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_queries_read_as_conductor_writes_them() {
        let f = SearchFilter::parse(
            "workflowType IN (a,b) AND status IN (COMPLETED) AND startTime > 5",
        )
        .unwrap();
        assert_eq!(f.clauses.len(), 3);
        assert!(SearchFilter::parse("colour = red")
            .unwrap_err()
            .contains("expected one of"));
        assert!(SearchFilter::parse("startTime > soon").is_err());
        assert!(SearchFilter::parse("").unwrap().clauses.is_empty());
    }
}
