//! The runtime's spans, made here so that every one carries the same names: `invoke_agent` per
//! run, `chat` per model request, `execute_tool` per tool call. Without a subscriber a span is
//! `Span::none()` and its fields are never formatted.

use tracing::Span;
use tracing::field::Empty;

use crate::error::AgentError;
use crate::telemetry::semconv::*;

/// An unsigned count as the signed integer OpenTelemetry attributes hold: `tracing-opentelemetry`
/// records a `u64` (and so a `u32` or `u16`) as a string, which a backend cannot sum or compare.
/// A count past `i64::MAX` is recorded as `i64::MAX`.
pub(crate) fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// A span's name as the conventions write it: the operation, then what it acts on, if known.
struct SpanName<'a>(&'static str, &'a str);

impl std::fmt::Display for SpanName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.1 {
            "" => f.write_str(self.0),
            name => write!(f, "{} {name}", self.0),
        }
    }
}

/// The span of one run (or one resumption of it), at INFO like every span of the crate.
pub(crate) fn invoke_agent(agent: &str, run_id: &str, resumed: bool) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = %SpanName(INVOKE_AGENT, agent),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        { GEN_AI_OPERATION_NAME } = INVOKE_AGENT,
        { GEN_AI_AGENT_NAME } = agent,
        { GEN_AI_CONVERSATION_ID } = run_id,
        { PHASEO_RUN_ID } = run_id,
        { PHASEO_RUN_RESUMED } = resumed,
        { PHASEO_RUN_VERSION } = Empty,
        { PHASEO_RUN_STATUS } = Empty,
        { PHASEO_PAUSE_KIND } = Empty,
        { ERROR_TYPE } = Empty,
    )
}

/// What a `chat` span says of the model it asks.
pub(crate) struct ChatTarget<'a> {
    pub(crate) provider: &'a str,
    pub(crate) request_model: Option<&'a str>,
    pub(crate) server_address: Option<&'a str>,
    pub(crate) server_port: Option<u16>,
}

pub(crate) fn chat(target: &ChatTarget<'_>) -> Span {
    let model = target.request_model.unwrap_or_default();
    let span = tracing::info_span!(
        "chat",
        otel.name = %SpanName(CHAT, model),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        { GEN_AI_OPERATION_NAME } = CHAT,
        { GEN_AI_PROVIDER_NAME } = target.provider,
        { GEN_AI_REQUEST_MODEL } = Empty,
        { SERVER_ADDRESS } = Empty,
        { SERVER_PORT } = Empty,
        { GEN_AI_RESPONSE_MODEL } = Empty,
        { GEN_AI_RESPONSE_ID } = Empty,
        { GEN_AI_RESPONSE_FINISH_REASONS } = Empty,
        { GEN_AI_USAGE_INPUT_TOKENS } = Empty,
        { GEN_AI_USAGE_OUTPUT_TOKENS } = Empty,
        { GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS } = Empty,
        { GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS } = Empty,
        { GEN_AI_USAGE_REASONING_OUTPUT_TOKENS } = Empty,
        { GEN_AI_SYSTEM_INSTRUCTIONS } = Empty,
        { GEN_AI_INPUT_MESSAGES } = Empty,
        { GEN_AI_OUTPUT_MESSAGES } = Empty,
        { ERROR_TYPE } = Empty,
    );
    if !span.is_disabled() {
        if let Some(model) = target.request_model {
            span.record(GEN_AI_REQUEST_MODEL, model);
        }
        if let Some(address) = target.server_address {
            span.record(SERVER_ADDRESS, address);
        }
        if let Some(port) = target.server_port {
            span.record(SERVER_PORT, int(port));
        }
    }
    span
}

/// What an `execute_tool` span says of its call.
pub(crate) struct ToolTarget<'a> {
    pub(crate) tool: &'a str,
    pub(crate) call_id: &'a str,
    /// `function`, `extension` or `datastore` (see [`GEN_AI_TOOL_TYPE`]).
    pub(crate) tool_type: &'static str,
    pub(crate) description: &'a str,
    pub(crate) attempt: u32,
}

/// The `execute_tool` span's fields, written once for both parents.
macro_rules! execute_tool_span {
    ($target:expr $(, $($parent:tt)+)?) => {{
        let target = $target;
        let tool = target.tool;
        tracing::info_span!(
            $($($parent)+)?
            "execute_tool",
            otel.name = %SpanName(EXECUTE_TOOL, tool),
            otel.kind = "internal",
            otel.status_code = Empty,
            otel.status_description = Empty,
            { GEN_AI_OPERATION_NAME } = EXECUTE_TOOL,
            { GEN_AI_TOOL_NAME } = tool,
            { GEN_AI_TOOL_CALL_ID } = target.call_id,
            { GEN_AI_TOOL_TYPE } = target.tool_type,
            { GEN_AI_TOOL_DESCRIPTION } = target.description,
            { PHASEO_CALL_ATTEMPT } = int(target.attempt),
            { PHASEO_CALL_OUTCOME } = Empty,
            { PHASEO_PAUSE_KIND } = Empty,
            { GEN_AI_TOOL_CALL_ARGUMENTS } = Empty,
            { GEN_AI_TOOL_CALL_RESULT } = Empty,
            { ERROR_TYPE } = Empty,
        )
    }};
}

/// The span of one tool call, under the current span (the run's).
pub(crate) fn execute_tool(target: &ToolTarget<'_>) -> Span {
    execute_tool_span!(target)
}

/// An `execute_tool` span of no parent span: a call served to another process, whose parent (if
/// the caller sent one) is set from its trace context, not from whatever span is current here.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn execute_tool_root(target: &ToolTarget<'_>) -> Span {
    execute_tool_span!(target, parent: None,)
}

/// How a call that ran ended, as `phaseo.call.outcome` says it: `ok`, `timed_out` or `error`,
/// with the error when it failed.
pub(crate) fn ran_outcome<T>(
    result: &Result<T, AgentError>,
) -> (&'static str, Option<&AgentError>) {
    match result {
        Ok(_) => (OUTCOME_OK, None),
        Err(error @ AgentError::Timeout { .. }) => (OUTCOME_TIMED_OUT, Some(error)),
        Err(error) => (OUTCOME_ERROR, Some(error)),
    }
}

/// Marks `span` failed: `error.type` and the span's status. The status description is the
/// error's text only when content is captured (`detail`), else its kind: an error's text may
/// carry what a tool or model was given.
pub(crate) fn fail(span: &Span, error_type: &str, detail: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    span.record(ERROR_TYPE, error_type);
    span.record("otel.status_code", "ERROR");
    span.record("otel.status_description", detail.unwrap_or(error_type));
}

/// Ends `span` now, as OpenTelemetry sees it, whoever else still holds a handle to it.
///
/// A `tracing` span closes only when its last handle is dropped, and its OpenTelemetry span is
/// exported then. Libraries the run calls keep handles to the span that was current when they
/// were called: sqlx's SQLite driver hands `Span::current()` with each statement to its
/// connection's thread, which drops it after it has answered. A process that returned from
/// `main` right after its run could shut its exporter down before that thread let go, and the
/// run's span was never exported. A span ended here is exported at once; closing it later does
/// nothing more (what is recorded on it after is dropped). Without the feature `otel`, or for a
/// span no OpenTelemetry layer knows, nothing happens.
pub(crate) fn end(span: &Span) {
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        // The span's own context, never the current one: a span no layer knows gives an empty
        // context, whose span is a no-op.
        let context = span.context();
        if context.span_context_valid() {
            context.span().end();
        }
    }
    #[cfg(not(feature = "otel"))]
    let _ = span;
}

/// Records a list attribute (`gen_ai.response.finish_reasons`): as an array when spans go to
/// OpenTelemetry, else as its items joined by commas.
pub(crate) fn record_list(span: &Span, key: &'static str, items: &[&str]) {
    if span.is_disabled() || items.is_empty() {
        return;
    }
    #[cfg(feature = "otel")]
    {
        use opentelemetry::{Array, StringValue, Value};
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        if span.context().span_context_valid() {
            let items: Vec<StringValue> = items.iter().map(|s| (*s).to_owned().into()).collect();
            span.set_attribute(key, Value::Array(Array::String(items)));
            return;
        }
    }
    span.record(key, items.join(",").as_str());
}

#[cfg(feature = "otel")]
trait SpanContextValid {
    fn span_context_valid(&self) -> bool;
}

#[cfg(feature = "otel")]
impl SpanContextValid for opentelemetry::Context {
    fn span_context_valid(&self) -> bool {
        use opentelemetry::trace::TraceContextExt;
        self.span().span_context().is_valid()
    }
}
