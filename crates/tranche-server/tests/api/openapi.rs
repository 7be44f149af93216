//! The served OpenAPI document against real traffic: every body sent and every answer
//! received in a scenario touching each route is validated against the schema the
//! document gives for that route (and status), with undeclared properties refused;
//! every answer's status must be documented, and every documented success answer must
//! be met at least once.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::live::{lease, Live};

struct Checked<'a> {
    server: &'a Live,
    doc: Value,
    /// The document with `additionalProperties: false` on every object schema, so a
    /// property the code sends but the document lacks fails validation.
    strict: Value,
    /// (method, path template, status) answered so far.
    met: BTreeSet<(String, String, u16)>,
}

impl<'a> Checked<'a> {
    async fn new(server: &'a Live) -> Checked<'a> {
        let doc = server.get_ok("/v1/openapi.json").await;
        let mut strict = doc.clone();
        refuse_undeclared_properties(&mut strict["components"]);
        Checked {
            server,
            doc,
            strict,
            met: BTreeSet::new(),
        }
    }

    /// GET `path` (which the router matches as `template`); the answer's JSON body.
    async fn get(&mut self, template: &str, path: &str, status: u16) -> Value {
        let resp = self.server.get(path).await;
        self.answer("get", template, resp, status).await
    }

    async fn delete(&mut self, template: &str, path: &str, status: u16) -> Value {
        let resp = self.server.delete(path).await;
        self.answer("delete", template, resp, status).await
    }

    async fn post(&mut self, template: &str, path: &str, body: Value, status: u16) -> Value {
        let op = self.operation("post", template).clone();
        let schema = &op["requestBody"]["content"]["application/json"]["schema"];
        if schema.is_null() {
            assert!(body.is_null(), "POST {template} documents no body");
        } else if status < 400 {
            self.validate(schema, &body, &format!("POST {template} request"));
        }
        let resp = self.server.post(path, &body).await;
        self.answer("post", template, resp, status).await
    }

    async fn put(&mut self, template: &str, path: &str, body: Value, status: u16) -> Value {
        let op = self.operation("put", template).clone();
        let schema = &op["requestBody"]["content"]["application/json"]["schema"];
        if status < 400 {
            self.validate(schema, &body, &format!("PUT {template} request"));
        }
        let resp = self.server.put(path, &body).await;
        self.answer("put", template, resp, status).await
    }

    fn operation(&self, method: &str, template: &str) -> &Value {
        let op = &self.doc["paths"][template][method];
        assert!(op.is_object(), "{method} {template} is not documented");
        op
    }

    async fn answer(
        &mut self,
        method: &str,
        template: &str,
        resp: reqwest::Response,
        status: u16,
    ) -> Value {
        let got = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = resp.text().await.unwrap();
        assert_eq!(got, status, "{method} {template}: {text}");
        let documented = &self.operation(method, template)["responses"][status.to_string()];
        assert!(
            documented.is_object(),
            "{method} {template} answered {status}, which is not documented"
        );
        let content = documented["content"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(
            content.keys().any(|t| content_type.starts_with(t.as_str())),
            "{method} {template} {status}: sent {content_type}, documented {:?}",
            content.keys().collect::<Vec<_>>()
        );
        self.met
            .insert((method.to_string(), template.to_string(), status));
        if !content_type.starts_with("application/json") {
            return Value::String(text);
        }
        let body: Value = serde_json::from_str(&text).expect("a JSON answer");
        let schema = &content["application/json"]["schema"];
        if !schema.is_null() {
            self.validate(schema, &body, &format!("{method} {template} {status}"));
        }
        body
    }

    fn errors(&self, schema: &Value, instance: &Value) -> Vec<String> {
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.strict["components"],
            "allOf": [schema],
        });
        let validator = jsonschema::draft202012::new(&root).expect("a valid schema");
        validator
            .iter_errors(instance)
            .map(|e| format!("at {}: {e}", e.instance_path()))
            .collect()
    }

    fn validate(&self, schema: &Value, instance: &Value, what: &str) {
        let errors = self.errors(schema, instance);
        assert!(
            errors.is_empty(),
            "{what} does not match its schema:\n{}\n{instance:#}",
            errors.join("\n")
        );
    }

    /// Every documented success answer was met.
    fn assert_every_success_met(&self) {
        let mut missing = Vec::new();
        for (path, item) in self.doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for status in op["responses"].as_object().unwrap().keys() {
                    let status: u16 = status.parse().unwrap();
                    let key = (method.clone(), path.clone(), status);
                    if status < 300 && !self.met.contains(&key) {
                        missing.push(key);
                    }
                }
            }
        }
        assert!(missing.is_empty(), "never exercised: {missing:?}");
    }
}

fn refuse_undeclared_properties(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
            m.values_mut().for_each(refuse_undeclared_properties);
        }
        Value::Array(a) => a.iter_mut().for_each(refuse_undeclared_properties),
        _ => {}
    }
}

fn ids(v: &Value) -> Vec<i64> {
    crate::live::ids(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_requests_and_answers_match_the_document() {
    // With ACH rules, so that the day's figures have windows with times and without.
    let s = crate::live::start_with_ledger(tranche_server::ServerConfig {
        ach_rules: Some(crate::ach_status::rules()),
        ..tranche_server::ServerConfig::default()
    })
    .await;
    let mut c = Checked::new(&s).await;

    c.get("/", "/", 200).await;
    c.get("/healthz", "/healthz", 200).await;
    c.get("/readyz", "/readyz", 200).await;
    c.get("/v1/openapi.json", "/v1/openapi.json", 200).await;

    let job = json!({
        "kind": "note", "queue": "default", "args": {"client": "A1", "pages": [1, 2]},
        "max_attempts": 2, "priority": -1, "unique_key": "note-A1", "not_before": null,
    });
    let one = c
        .post(
            "/v1/jobs",
            "/v1/jobs",
            json!({"run": "night/1", "job": job}),
            201,
        )
        .await;
    let again = c
        .post(
            "/v1/jobs",
            "/v1/jobs",
            json!({"run": "night/1", "job": job}),
            201,
        )
        .await;
    assert_eq!(
        (ids(&again), again["existed"].clone()),
        (ids(&one), json!(true))
    );
    // Out of the way of the jobs polled below: its own queue and run.
    let windowed = json!({
        "kind": "note", "queue": "windowed", "unique_key": "note-A1", "unique_for_ms": 60_000,
    });
    c.post(
        "/v1/jobs",
        "/v1/jobs",
        json!({"run": "windowed/1", "job": windowed}),
        201,
    )
    .await;
    c.post(
        "/v1/batches",
        "/v1/batches",
        json!({
            "run": "night/1",
            "items": [
                {"job": {"kind": "note", "args": 1}},
                {"chain": [{"kind": "render"}, {"kind": "mail", "queue": "mail"}]},
                {"group": {"members": [{"kind": "part"}, {"kind": "part"}], "callback": {"kind": "join"}}},
            ],
            "on_done": {"kind": "summary"},
        }),
        201,
    )
    .await;
    let chain = c
        .post(
            "/v1/chains",
            "/v1/chains",
            json!({"run": "night/2", "steps": [{"kind": "a", "queue": "later"}, {"kind": "b"}]}),
            201,
        )
        .await;
    c.post(
        "/v1/groups",
        "/v1/groups",
        json!({"run": "night/3", "members": [{"kind": "m", "queue": "later"}], "callback": {"kind": "cb"}}),
        201,
    )
    .await;

    c.get("/v1/runs", "/v1/runs?limit=10", 200).await;
    c.get("/v1/runs/{run}", "/v1/runs/night%2F1", 200).await;

    let polled = c
        .post(
            "/v1/workers/poll",
            "/v1/workers/poll",
            json!({"queue": "default", "max": 4, "wait_ms": 0, "lease_ms": 30000}),
            200,
        )
        .await;
    let jobs = polled["jobs"].as_array().unwrap().clone();
    assert_eq!(jobs.len(), 4);
    let leases: Vec<Value> = jobs.iter().map(lease).collect();
    c.post(
        "/v1/workers/heartbeat",
        "/v1/workers/heartbeat",
        json!({"leases": leases, "lease_ms": 20000}),
        200,
    )
    .await;
    c.post(
        "/v1/workers/fail",
        "/v1/workers/fail",
        json!({"failures": [
            {"job": jobs[0]["id"], "attempt": jobs[0]["attempt"], "error": "bad PAN on line 7", "discard": true},
            {"job": jobs[1]["id"], "attempt": jobs[1]["attempt"], "error": "SMTP busy", "retry_in_ms": 60000},
        ]}),
        200,
    )
    .await;
    c.post(
        "/v1/workers/complete",
        "/v1/workers/complete",
        json!({"results": [
            {"job": jobs[2]["id"], "attempt": jobs[2]["attempt"], "result": {"pages": 2}},
            {"job": jobs[3]["id"], "attempt": jobs[3]["attempt"]},
        ]}),
        200,
    )
    .await;

    c.get(
        "/v1/runs/{run}/failures",
        "/v1/runs/night%2F1/failures?limit=1",
        200,
    )
    .await;
    let failed = jobs[0]["id"].as_i64().unwrap();
    let succeeded = jobs[2]["id"].as_i64().unwrap();
    let retried = jobs[1]["id"].as_i64().unwrap();
    for id in [failed, succeeded, retried] {
        c.get("/v1/jobs/{id}", &format!("/v1/jobs/{id}"), 200).await;
    }
    for action in ["pause", "resume"] {
        let template = format!("/v1/queues/{{queue}}/{action}");
        c.post(
            &template,
            &format!("/v1/queues/later/{action}"),
            Value::Null,
            200,
        )
        .await;
    }
    c.post(
        "/v1/queues/{queue}/pause",
        "/v1/queues/later/pause",
        Value::Null,
        200,
    )
    .await;
    c.get("/v1/queues", "/v1/queues", 200).await;
    c.get("/v1/events", "/v1/events?after=0&limit=100", 200)
        .await;
    c.get("/v1/events", "/v1/events?after=latest&wait=0", 200)
        .await;
    c.get("/metrics", "/metrics", 200).await;

    let kind = jobs[0]["kind"].as_str().unwrap();
    let page = c
        .get(
            "/v1/jobs",
            &format!("/v1/jobs?run=night%2F1&state=failed&queue=default&kind={kind}&limit=10"),
            200,
        )
        .await;
    let listed: Vec<i64> = page["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, [failed], "the one failed job of night/1");
    c.get("/v1/jobs", "/v1/jobs?limit=2", 200).await;
    c.post(
        "/v1/jobs/{id}/retry",
        &format!("/v1/jobs/{failed}/retry"),
        Value::Null,
        200,
    )
    .await;
    c.post(
        "/v1/jobs/{id}/retry",
        &format!("/v1/jobs/{succeeded}/retry"),
        Value::Null,
        400,
    )
    .await;
    c.delete("/v1/jobs/{id}", &format!("/v1/jobs/{succeeded}"), 200)
        .await;
    c.delete("/v1/jobs/{id}", &format!("/v1/jobs/{succeeded}"), 404)
        .await;
    c.get("/v1/jobs", "/v1/jobs?state=done", 400).await;
    c.post(
        "/v1/runs/{run}/retry",
        "/v1/runs/night%2F1/retry",
        Value::Null,
        200,
    )
    .await;
    c.post(
        "/v1/jobs/{id}/cancel",
        &format!("/v1/jobs/{failed}/cancel"),
        json!({"reason": "client closed"}),
        200,
    )
    .await;
    c.post(
        "/v1/chains/{id}/cancel",
        &format!("/v1/chains/{}/cancel", ids(&chain)[0]),
        Value::Null,
        200,
    )
    .await;
    c.post(
        "/v1/runs/{run}/cancel",
        "/v1/runs/night%2F3/cancel",
        json!({}),
        200,
    )
    .await;

    // Errors, with their bodies checked against the error schema.
    c.get("/v1/runs/{run}", "/v1/runs/nope", 404).await;
    c.get("/v1/runs", "/v1/runs?limit=x", 400).await;
    c.get("/v1/events", "/v1/events?after=soon", 400).await;
    c.post(
        "/v1/jobs",
        "/v1/jobs",
        json!({"run": "night/1", "job": {"kind": "x", "qeue": "typo"}}),
        400,
    )
    .await;
    c.post(
        "/v1/workers/poll",
        "/v1/workers/poll",
        json!({"queue": "default", "max": 0}),
        400,
    )
    .await;
    c.post(
        "/v1/queues/{queue}/pause",
        &format!("/v1/queues/{}/pause", "q".repeat(200)),
        Value::Null,
        400,
    )
    .await;

    c.post(
        "/v1/prune",
        "/v1/prune",
        json!({"before": 0, "limit": 10, "dry_run": true}),
        200,
    )
    .await;
    c.post("/v1/prune", "/v1/prune", json!({"before": 0}), 200)
        .await;
    c.post(
        "/v1/prune",
        "/v1/prune",
        json!({"before": 0, "limit": 0}),
        400,
    )
    .await;

    let cron = json!({
        "name": "eod-report", "cron": "0 18 * * MON-FRI", "zone": "Asia/Kolkata", "skip_missed": false,
        "kind": "report", "queue": "reports", "args": {"desk": "equity"},
        "max_attempts": 3, "priority": -2, "run": "reports/eod",
    });
    c.put(
        "/v1/schedules/{name}",
        "/v1/schedules/eod-report",
        cron,
        200,
    )
    .await;
    let once = json!({"at": "2026-06-01T09:00:00", "zone": "Asia/Kolkata", "kind": "ping"});
    c.put("/v1/schedules/{name}", "/v1/schedules/once", once, 200)
        .await;
    let listed = c.get("/v1/schedules", "/v1/schedules", 200).await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 2);
    c.put(
        "/v1/schedules/{name}",
        "/v1/schedules/bad",
        json!({"cron": "every day", "kind": "x"}),
        400,
    )
    .await;
    c.put(
        "/v1/schedules/{name}",
        "/v1/schedules/bad",
        json!({"cron": "* * * * *", "kind": 5}),
        400,
    )
    .await;
    c.delete("/v1/schedules/{name}", "/v1/schedules/once", 200)
        .await;
    c.delete("/v1/schedules/{name}", "/v1/schedules/once", 404)
        .await;

    let bank = json!({"starts": {"count": 1, "per_ms": 15000}});
    let put = c
        .put(
            "/v1/limits/{scope}/{name}",
            "/v1/limits/queue/bank",
            bank,
            200,
        )
        .await;
    assert_eq!(put["created"], true);
    let smtp = json!({"starts": {"count": 200, "per_ms": 1000}, "running": 20});
    c.put(
        "/v1/limits/{scope}/{name}",
        "/v1/limits/kind/smtp",
        smtp,
        200,
    )
    .await;
    let listed = c.get("/v1/limits", "/v1/limits", 200).await;
    assert_eq!(listed["limits"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(
        listed["limits"][0]["limit"]["scope"],
        json!({"queue": "bank"})
    );
    let invalid = c
        .put(
            "/v1/limits/{scope}/{name}",
            "/v1/limits/queue/bank",
            json!({"running": 0}),
            400,
        )
        .await;
    assert_eq!(invalid["error"]["field"], "running");
    c.put(
        "/v1/limits/{scope}/{name}",
        "/v1/limits/shelf/bank",
        json!({"running": 1}),
        400,
    )
    .await;
    c.delete("/v1/limits/{scope}/{name}", "/v1/limits/queue/bank", 200)
        .await;
    c.delete("/v1/limits/{scope}/{name}", "/v1/limits/queue/bank", 404)
        .await;
    c.delete("/v1/limits/{scope}/{name}", "/v1/limits/shelf/x", 400)
        .await;

    // ACH entries: a good one, a rejected one (with its field errors), a re-post.
    let mut with_addenda = crate::ach::entry("A2", "4001234568", 2500);
    with_addenda["addenda"] = json!("INVOICE 42");
    with_addenda["same_day"] = json!(false);
    with_addenda["descriptive_date"] = json!("");
    let entries = json!({"entries": [
        crate::ach::entry("A1", "4001234567", 1000),
        with_addenda,
        crate::ach::entry("A3", "4001234569", 0),
    ]});
    let out = c
        .post("/v1/ach/entries", "/v1/ach/entries", entries.clone(), 200)
        .await;
    assert_eq!(out["results"][2]["state"], "rejected");
    c.post("/v1/ach/entries", "/v1/ach/entries", entries, 200)
        .await;
    c.post(
        "/v1/ach/entries",
        "/v1/ach/entries",
        json!({"entries": [{"entry_id": "x"}]}),
        400,
    )
    .await;
    c.get("/v1/ach/entries/{id}", "/v1/ach/entries/A2", 200)
        .await;
    c.get("/v1/ach/entries/{id}", "/v1/ach/entries/A3", 200)
        .await;
    c.get("/v1/ach/entries/{id}", "/v1/ach/entries/nope", 404)
        .await;
    c.post(
        "/v1/ach/entries/{id}/cancel",
        "/v1/ach/entries/A1/cancel",
        json!({"reason": "duplicate"}),
        200,
    )
    .await;
    c.post(
        "/v1/ach/entries/{id}/cancel",
        "/v1/ach/entries/A1/cancel",
        json!(null),
        200,
    )
    .await;
    let cancelled = c
        .get("/v1/ach/entries/{id}", "/v1/ach/entries/A1", 200)
        .await;
    assert_eq!(cancelled["state"], "cancelled");

    // A day's figures: files packaged, submitted and released, in windows of the
    // rules (with times) and not (without).
    crate::ach_status::set_up_the_day(&s).await;
    let day = format!("/v1/ach/status?date={}", crate::ach_status::DAY);
    let status = c.get("/v1/ach/status", &day, 200).await;
    let windows = status["banks"][0]["windows"].as_array().unwrap();
    assert!(
        windows.iter().any(|w| w["begins"].is_null())
            && windows.iter().any(|w| w["begins"].is_i64()),
        "{status}"
    );
    c.get("/v1/ach/status", "/v1/ach/status", 200).await;
    c.get("/v1/ach/status", "/v1/ach/status?date=tomorrow", 400)
        .await;

    c.assert_every_success_met();
}

/// The check itself: what it would catch if the code and the document drifted apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_refuses_undeclared_missing_and_mistyped_properties() {
    let s = crate::live::start().await;
    let c = Checked::new(&s).await;
    let count = json!({"$ref": "#/components/schemas/Count"});
    assert!(c.errors(&count, &json!({"count": 3})).is_empty());
    assert!(!c
        .errors(&count, &json!({"count": 3, "extra": 1}))
        .is_empty());
    assert!(!c.errors(&count, &json!({})).is_empty());
    assert!(!c.errors(&count, &json!({"count": "3"})).is_empty());
    let error = json!({"$ref": "#/components/schemas/Error"});
    let body = |code: &str| json!({"error": {"code": code, "message": "m"}});
    assert!(c.errors(&error, &body("internal")).is_empty());
    assert!(
        !c.errors(&error, &body("backend")).is_empty(),
        "codes are a closed set"
    );
}
