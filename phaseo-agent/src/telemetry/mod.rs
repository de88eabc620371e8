//! What a run tells operators: `tracing` spans and metrics in OpenTelemetry's GenAI semantic
//! conventions, and the trace context a run keeps across a pause.
//!
//! The runtime always emits them; without a subscriber they cost a check of a cached flag per
//! span. Every run is an `invoke_agent {agent}` span (INTERNAL), each model request a
//! `chat {model}` span (CLIENT) under it, each tool call an `execute_tool {tool}` span (INTERNAL).
//! Names are in [`semconv`]. Content (messages, arguments, results) is recorded only when
//! [`CaptureContent`] says so, which by default it does not.
//!
//! With the feature `otel`, [`otel`](crate::otel) exports them over OTLP, and a run's
//! [`TraceContext`] is kept in its state: the span of the run that resumes it links to the span
//! that paused it, and MCP calls carry it in `_meta`.

pub mod semconv;
pub(crate) mod context;
pub(crate) mod content;
pub(crate) mod span;
pub(crate) mod metric;

pub use content::CaptureContent;
pub use context::{MAX_TRACESTATE_BYTES, TraceContext};
pub use metric::METRICS_TARGET;

/// Whether any subscriber listens at INFO, the level of every span and metric of the crate: one
/// relaxed atomic load. Without one, the runtime skips what only telemetry needs (reading the
/// clock, describing the model), so that a run without a subscriber costs what it did before.
#[inline]
pub(crate) fn on() -> bool {
    use tracing::level_filters::{LevelFilter, STATIC_MAX_LEVEL};
    STATIC_MAX_LEVEL >= tracing::Level::INFO && LevelFilter::current() >= tracing::Level::INFO
}
