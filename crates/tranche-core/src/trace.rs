//! Spans of attempts, and the trace context that links them to what enqueued them
//! (docs/traces.md).
//!
//! The engine emits spans through `tracing` only; it knows no exporter. A process that
//! exports traces (`tranche worker --otlp-endpoint`) installs a [`Propagator`], which
//! reads and sets the W3C trace context of a `tracing` span (the binary's is built on
//! `tracing-opentelemetry`). Until one is installed the worker makes no span, reads no
//! context and reports plain successes: the bulk path costs one atomic load per job.

use std::sync::OnceLock;

/// Reads and sets the W3C trace context (`traceparent`) of `tracing` spans.
pub trait Propagator: Send + Sync + 'static {
    /// The `traceparent` of `span`, or None when it is not traced (no exporting layer,
    /// or not sampled).
    fn traceparent(&self, span: &tracing::Span) -> Option<String>;
    /// Make `span` a child of the span `traceparent` names; a malformed one is ignored
    /// (the span then starts a trace of its own).
    fn continue_trace(&self, span: &tracing::Span, traceparent: &str);
}

static PROPAGATOR: OnceLock<Box<dyn Propagator>> = OnceLock::new();

/// Install the process's propagator; false if one already was (the first stays).
pub fn install(propagator: Box<dyn Propagator>) -> bool {
    PROPAGATOR.set(propagator).is_ok()
}

/// The installed propagator: None while this process does not trace.
pub fn propagator() -> Option<&'static dyn Propagator> {
    PROPAGATOR.get().map(|p| &**p)
}

/// The trace context to enqueue jobs with from inside `span` (an HTTP request's, a
/// handler's attempt's): None while this process does not trace.
pub fn context_of(span: &tracing::Span) -> Option<String> {
    propagator()?.traceparent(span)
}
