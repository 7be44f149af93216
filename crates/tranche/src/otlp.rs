//! Traces over OTLP/HTTP (docs/traces.md), on when `--otlp-endpoint` (or
//! OTEL_EXPORTER_OTLP_ENDPOINT) names a collector: the `tracing` spans of job attempts
//! (tranche-core's worker) and HTTP requests (tranche-server) become OpenTelemetry spans
//! of the service `tranche`, sent in batches as protobuf to `URL/v1/traces`, and the
//! W3C trace context links them (a [`Propagator`] for the engine). Off, none of it is
//! built and the engine makes no spans.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context as _, Result};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tranche_core::trace::Propagator;

/// The service name spans are exported under.
pub const SERVICE: &str = "tranche";

/// Where OTLP/HTTP sends traces for a collector at `endpoint` (its base URL).
pub fn traces_url(endpoint: &url::Url) -> String {
    format!("{}/v1/traces", endpoint.as_str().trim_end_matches('/'))
}

/// A tracer provider exporting to the collector at `endpoint`, in batches from a
/// thread of its own. [`SdkTracerProvider::shutdown`] sends what is left.
pub fn provider(endpoint: &url::Url) -> Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(traces_url(endpoint))
        .with_timeout(Duration::from_secs(10))
        .with_http_client(BlockingClient::new()?)
        .build()
        .with_context(|| format!("--otlp-endpoint {endpoint}: could not build the exporter"))?;
    Ok(SdkTracerProvider::builder()
        .with_resource(Resource::builder_empty().with_service_name(SERVICE).build())
        .with_batch_exporter(exporter)
        .build())
}

/// The `tracing` layer that turns spans into OpenTelemetry spans of `provider`, and
/// the engine's propagator installed to go with it.
pub fn layer<S>(
    provider: &SdkTracerProvider,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tranche_core::trace::install(Box::new(W3c));
    tracing_opentelemetry::layer().with_tracer(provider.tracer(SERVICE))
}

/// W3C `traceparent`s of `tracing` spans, through the layer's span contexts.
struct W3c;

impl Propagator for W3c {
    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        let cx = span.context();
        if !cx.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
        carrier.remove("traceparent")
    }

    fn continue_trace(&self, span: &tracing::Span, traceparent: &str) {
        let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
        let cx = TraceContextPropagator::new().extract(&carrier);
        if cx.span().span_context().is_valid() {
            // Fails only for a span the layer does not see (filtered out): nothing to link.
            let _ = span.set_parent(cx);
        }
    }
}

/// The exporter's HTTP client: the workspace's reqwest 0.12, blocking, since the
/// batch exporter runs on a thread of its own with no async runtime.
#[derive(Debug)]
struct BlockingClient(reqwest::blocking::Client);

impl BlockingClient {
    fn new() -> Result<Self> {
        Ok(BlockingClient(
            reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .context("could not build the OTLP HTTP client")?,
        ))
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for BlockingClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let request = reqwest::blocking::Request::try_from(request)?;
        let response = self.0.execute(request)?;
        let mut out = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            out = out.header(name, value);
        }
        Ok(out.body(response.bytes()?)?)
    }
}
