//! The API description, generated from the handlers' `#[utoipa::path]` attributes and
//! the wire types' `ToSchema` derives, so its schemas are the types that are served.
//!
//! What every route shares is added here from the rules that produce it rather than
//! written on each handler: who may call it (the same [`auth`] functions the middleware
//! asks), the auth answers (401, 403), the body limits (408, 413) and the backend's
//! failures (500, 503, 507). Tests check that it names exactly the served routes
//! (here) and that real answers validate against it (`tests/api/openapi.rs`).

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::{
    ach, auth, dashboard, events, jobs, limits, pause, prune, runs, schedules, submit, telemetry,
    workers,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tranche",
        version = "1",
        description = "Submit and steer the night's jobs, run remote workers, follow the change feed. \
Times are microseconds since the Unix epoch. \
Errors are {\"error\": {\"code\", \"message\", \"field\"?}}: `code` is one of a stable set (the ErrorCode schema), \
`field` names the offending request field. A 5xx answer says only what to do and gives a request id; \
its cause is in the server's log under that id. \
Tokens (see the bearer scheme) may be limited to /v1/workers/* (403 elsewhere). \
Without configured tokens the server listens on loopback only and needs none. \
Personal data in job text (args, input, result, error, errors, unique_key of a job; a run's failures) \
is masked for tokens without the `pii` scope and, unless the server runs with --show-personal-data, without tokens: \
PANs as ABXXXXXX4F, e-mail addresses as r***@example.com. /v1/workers/poll hands out real arguments and input. \
A request whose headers or body do not arrive within the server's timeouts is cut off (body: 408)."
    ),
    servers((url = "/")),
    paths(
        dashboard::page,
        telemetry::healthz,
        telemetry::readyz,
        telemetry::metrics_text,
        document,
        submit::job,
        submit::batch,
        submit::chain,
        submit::group,
        runs::list,
        runs::progress,
        runs::failures,
        runs::retry,
        runs::cancel_run,
        runs::job,
        runs::cancel_job,
        runs::cancel_chain,
        runs::queues,
        prune::prune,
        pause::pause,
        pause::resume,
        jobs::list,
        jobs::retry,
        jobs::delete,
        schedules::list,
        schedules::put,
        schedules::delete,
        limits::list,
        limits::put,
        limits::delete,
        events::events,
        workers::poll,
        workers::heartbeat,
        workers::complete,
        workers::fail,
        ach::import,
        ach::entry,
        ach::cancel,
        ach::status,
    ),
    components(schemas(crate::error::ErrorCode)),
    modifiers(&SharedAnswers),
    security(("bearer" = [])),
    tags(
        (name = "submit", description = "Submit jobs, chains, groups and batches."),
        (name = "runs", description = "Read and steer runs and jobs."),
        (name = "schedules", description = "Declare, list and remove schedules (cron or one-off jobs)."),
        (name = "limits", description = "Rate limits and running caps per queue or task kind, for the whole fleet."),
        (name = "feed", description = "The change feed of job states."),
        (name = "workers", description = "Remote workers: the only endpoints a worker token may use."),
        (name = "ach", description = "ACH payment entries: import into the entry ledger, read, cancel; a submission date's entries and files per bank and window. Without a ledger configured (a server on --broker without --ledger) these answer 404 `no_ledger`. Account numbers are masked (`*****6789`) unless the token has the `pii` scope."),
        (name = "service", description = "The dashboard, health, readiness and metrics."),
    )
)]
struct ApiDoc;

/// The document as served.
pub fn json() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        ApiDoc::openapi()
            .to_pretty_json()
            .expect("the OpenAPI document serialises")
    })
}

/// This document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    tag = "service",
    responses((status = 200, description = "OpenAPI 3.1 document", content_type = "application/json"))
)]
pub async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], json())
}

const BEARER_SCOPES: &str =
    "A token from the server's token file or TRANCHE_TOKENS, one per line: \
`TOKEN` may use every endpoint, with personal data in job text masked; \
`TOKEN pii` may use every endpoint and sees personal data; \
`TOKEN worker` may use /v1/workers/* only (403 elsewhere).";

/// Adds what is true of every route by rule (see the module's comment).
struct SharedAnswers;

impl Modify for SharedAnswers {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(BEARER_SCOPES))
                    .build(),
            ),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            for (method, op) in operations(item) {
                add_shared_answers(path, method, op);
            }
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", item.get.as_mut()),
        ("post", item.post.as_mut()),
        ("put", item.put.as_mut()),
        ("delete", item.delete.as_mut()),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.map(|op| (method, op)))
}

fn add_shared_answers(path: &str, method: &str, op: &mut Operation) {
    let mut add = |status: u16, description: &str| {
        op.responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| error_response(description));
    };
    if auth::is_open(path) {
        op.security = Some(Vec::new());
    } else {
        add(401, "The bearer token is missing or not valid");
        if !auth::is_worker_endpoint(path) {
            add(403, "A worker token may only use /v1/workers/*");
        }
    }
    if path.starts_with("/v1/") && path != "/v1/openapi.json" {
        add(
            500,
            "The server failed: the request id in the message finds the cause in its log",
        );
        add(503, "The backend is unavailable: retry later");
        // Writes: a delete grows the file's journal too.
        if method == "post" || method == "put" || method == "delete" {
            add(
                507,
                "The backend's disk is full: retry once an operator has freed space",
            );
        }
    }
    if op.request_body.is_some() {
        add(
            400,
            "The body is not JSON of the expected shape: `field` names where",
        );
        add(
            408,
            "The body did not arrive within the server's body timeout",
        );
        add(413, "The body is over the server's size limit");
    }
}

fn error_response(description: &str) -> RefOr<Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Error")))
        .build();
    ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build()
        .into()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;
    use tranche_types::{JobSpec, RunName};

    use super::*;

    fn doc() -> Value {
        serde_json::from_str(json()).expect("valid JSON")
    }

    #[test]
    fn document_names_exactly_the_served_routes() {
        let doc = doc();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for method in item.as_object().expect("path item").keys() {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
        let served: BTreeSet<(String, String)> = crate::routes()
            .into_iter()
            .map(|(m, p, _)| (m.to_string(), p.to_string()))
            .collect();
        assert_eq!(documented, served);
    }

    #[test]
    fn every_schema_reference_resolves() {
        let doc = doc();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r.trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "dangling $ref {r}");
        }
    }

    #[test]
    fn open_routes_need_no_token_and_the_others_say_so() {
        let doc = doc();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
        assert_eq!(
            doc["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let responses = &op["responses"];
                if auth::is_open(path) {
                    assert_eq!(op["security"], serde_json::json!([]), "{method} {path}");
                    assert!(responses.get("401").is_none(), "{method} {path}");
                } else {
                    assert!(op.get("security").is_none(), "{method} {path}");
                    assert!(responses.get("401").is_some(), "{method} {path}");
                    let worker = auth::is_worker_endpoint(path);
                    assert_eq!(responses.get("403").is_none(), worker, "{method} {path}");
                }
            }
        }
    }

    #[test]
    fn operation_ids_are_unique() {
        let doc = doc();
        let mut seen = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let id = op["operationId"].as_str().unwrap_or_default();
                assert!(seen.insert(id.to_string()), "{method} {path}: {id:?} twice");
            }
        }
    }

    /// Lengths in `#[schema]` attributes are literals: they must say what the code does.
    #[test]
    fn documented_limits_are_the_codes() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        let job = &schemas["JobIn"]["properties"];
        assert_eq!(job["kind"]["maxLength"], JobSpec::MAX_KIND_LEN);
        assert_eq!(job["queue"]["maxLength"], JobSpec::MAX_QUEUE_LEN);
        assert_eq!(job["queue"]["default"], JobSpec::DEFAULT_QUEUE);
        assert_eq!(
            job["max_attempts"]["default"],
            JobSpec::DEFAULT_MAX_ATTEMPTS
        );
        assert_eq!(
            schemas["PollIn"]["properties"]["queue"]["maxLength"],
            JobSpec::MAX_QUEUE_LEN
        );
        let unique_key = job["unique_key"].to_string();
        assert!(
            unique_key.contains(&format!("\"maxLength\":{}", JobSpec::MAX_UNIQUE_KEY_LEN)),
            "{unique_key}"
        );
        assert_eq!(
            job["unique_for_ms"]["maximum"],
            JobSpec::MAX_UNIQUE_FOR.as_millis() as u64
        );
        let pattern = schemas["RunName"]["pattern"].as_str().unwrap();
        assert!(
            pattern.ends_with(&format!("{{1,{}}}$", RunName::MAX_LEN)),
            "{pattern}"
        );
    }

    fn collect_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(s)) => out.push(s.clone()),
                        _ => collect_refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }
}
