//! Traces end to end (docs/traces.md): a minimal OTLP/HTTP receiver started here
//! collects what a real `tranche server --otlp-endpoint` process and an engine worker
//! (traced by the binary's own `src/otlp.rs`) export while a chain submitted over HTTP
//! runs: the request's span, one span per attempt with the job's attributes, all in
//! the caller's trace, each step a child of the step before it and the first a child
//! of the request.

#[allow(dead_code)] // the binary's module: this test uses its exporting half
#[path = "../src/otlp.rs"]
mod otlp;
use crate::support;

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value as Any, KeyValue};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode, Span};
use prost::Message;
use serde_json::{json, Value};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tranche_sqlite::{SqliteBackend, SqliteOptions};

/// Spans received, each with its resource's service name.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver on a free loopback port: POST /v1/traces, protobuf bodies.
async fn receiver() -> (String, Received) {
    let received: Received = Arc::default();
    let app = axum::Router::new().route(
        "/v1/traces",
        post({
            let received = received.clone();
            move |body: Bytes| async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an OTLP request");
                let mut received = received.lock().unwrap();
                for resource_spans in request.resource_spans {
                    let service = resource_spans
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(string)
                        .unwrap_or_default();
                    for scope in resource_spans.scope_spans {
                        for span in scope.spans {
                            received.push((service.clone(), span));
                        }
                    }
                }
                // An empty ExportTraceServiceResponse.
                Vec::<u8>::new()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn string(kv: &KeyValue) -> Option<String> {
    match kv.value.as_ref()?.value.as_ref()? {
        Any::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn attr(span: &Span, key: &str) -> Option<Any> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone()?.value)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_submitted_over_http_is_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (collector, received) = receiver().await;

    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_tranche"))
            .arg("--data")
            .arg(dir.path().join("data"))
            .args([
                "server",
                "--listen",
                "127.0.0.1:0",
                "--otlp-endpoint",
                &collector,
            ])
            .env_remove("TRANCHE_TOKENS")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tranche server"),
    );
    let (base, _) = support::server_address(&mut server.0);

    // The caller's own trace: the request continues it.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let submitted: Value = reqwest::Client::new()
        .post(format!("{base}/v1/chains"))
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .json(&json!({"run": "traced/1", "steps": [
            {"kind": "k", "queue": "tq"},
            {"kind": "k", "queue": "tq"},
            {"kind": "k", "queue": "tq"},
        ]}))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<i64> = submitted["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);

    // An engine worker in this process, traced as `tranche worker --otlp-endpoint` is.
    let endpoint = url::Url::parse(&collector).unwrap();
    // Built off the runtime, as main does: a blocking client may not be made in it.
    let provider = tokio::task::spawn_blocking(move || otlp::provider(&endpoint).unwrap())
        .await
        .unwrap();
    tracing_subscriber::registry()
        .with(otlp::layer(&provider))
        .init();
    let backend = SqliteBackend::open(dir.path().join("data"), SqliteOptions::default()).unwrap();
    support::work_beside(tranche_core::Client::new(backend), "tq", "traced/1").await;
    tokio::task::spawn_blocking(move || provider.shutdown())
        .await
        .unwrap()
        .expect("worker's spans sent");
    // SIGTERM: the server sends its spans as it stops.
    let pid = server.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();

    let spans = tranche_test_support::poll_until(
        "1 request span and 3 attempt spans",
        Duration::from_secs(30),
        || {
            let spans = received.lock().unwrap().clone();
            let http = spans
                .iter()
                .filter(|(_, s)| s.name.starts_with("POST"))
                .count();
            let jobs = spans.iter().filter(|(_, s)| s.name == "job k").count();
            if http >= 1 && jobs >= 3 {
                Ok(spans)
            } else {
                let names: Vec<_> = spans.iter().map(|(_, s)| &s.name).collect();
                Err(format!("{names:?}"))
            }
        },
    )
    .await;
    let status = server.0.wait().unwrap();
    assert!(status.success(), "server stopped with {status:?}");

    for (service, span) in &spans {
        assert_eq!(service, "tranche", "{}", span.name);
        assert_eq!(
            hex(&span.trace_id),
            caller_trace,
            "{} in the caller's trace",
            span.name
        );
    }
    let request = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "POST /v1/chains")
        .expect("the request's span");
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(hex(&request.parent_span_id), caller_span);
    assert_eq!(
        attr(request, "http.route"),
        Some(Any::StringValue("/v1/chains".into()))
    );

    let mut attempts: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "job k")
        .collect();
    attempts.sort_by_key(|s| match attr(s, "job.id") {
        Some(Any::IntValue(id)) => id,
        other => panic!("job.id: {other:?}"),
    });
    assert_eq!(attempts.len(), 3, "one span per attempt");
    let mut parent = &request.span_id;
    for (span, id) in attempts.iter().zip(&ids) {
        assert_eq!(attr(span, "job.id"), Some(Any::IntValue(*id)));
        assert_eq!(attr(span, "job.kind"), Some(Any::StringValue("k".into())));
        assert_eq!(attr(span, "job.queue"), Some(Any::StringValue("tq".into())));
        assert_eq!(
            attr(span, "job.run"),
            Some(Any::StringValue("traced/1".into()))
        );
        assert_eq!(attr(span, "job.attempt"), Some(Any::IntValue(1)));
        assert_eq!(
            attr(span, "job.outcome"),
            Some(Any::StringValue("succeeded".into()))
        );
        assert_eq!(
            span.status.as_ref().map(|s| s.code),
            Some(StatusCode::Ok as i32)
        );
        assert_eq!(
            hex(&span.parent_span_id),
            hex(parent),
            "job {id}: a child of the request (first step) or of the step before it"
        );
        parent = &span.span_id;
    }
}
