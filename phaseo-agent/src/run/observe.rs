//! What a run tells telemetry (see the `telemetry` module): its `invoke_agent` span and how it
//! ended, each model request's `chat` span and metrics, each call's `execute_tool` span and
//! metrics, the decisions a resume carries, pauses and the time spent waiting for people.
//!
//! Each entry point is `#[inline(never)]` and returns at once when no subscriber listens: the
//! run's own functions, on its hot path, keep their size, and what they pay without a subscriber
//! is a call and one load.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tracing::Span;

use crate::error::{AgentError, AgentErrorKind, ModelError};
use crate::model::message::{Message, ToolCall};
use crate::model::request::{ModelRequest, ModelResponse};
use crate::run::agent::AgentInner;
use crate::run::journal::Journal;
use crate::run::state::{Decisions, PendingKind, RunState, RunStatus};
use crate::telemetry::context::TraceContext;
use crate::telemetry::semconv::*;
use crate::telemetry::span::{self, ChatTarget, ToolTarget};
use crate::telemetry::{self, metric};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Who made a decision a resume carries, and when, as the store recorded it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Decider {
    pub(crate) call_id: String,
    pub(crate) by: String,
    pub(crate) at_ms: Option<u64>,
}

/// The span of a run, or of one resumption of it: linked to the span the state last ran under
/// (`link`: why this span follows it: `paused`, `failed`, `interrupted`, `completed`).
#[inline(never)]
pub(crate) fn run_span(
    inner: &AgentInner,
    state: &RunState,
    resumed: bool,
    link: Option<&'static str>,
) -> Span {
    let span = span::invoke_agent(&inner.id, &state.run_id, resumed);
    if let (Some(kind), Some(trace)) = (link, &state.trace) {
        if !span.is_disabled() {
            trace.link_from(&span, kind);
        }
    }
    span
}

/// Records how the run's span ended, and keeps in the state what a later span needs: this
/// span's trace context, and when the run paused. Counts a pause.
#[inline(never)]
pub(crate) fn settle(
    span: &Span,
    inner: &AgentInner,
    state: &mut RunState,
    error: Option<&AgentError>,
) {
    if state.status == RunStatus::WaitingForHuman {
        state.paused_at_ms = Some(now_ms());
    } else {
        state.paused_at_ms = None;
    }
    if span.is_disabled() {
        return;
    }
    keep_trace(span, state);
    let status = match state.status {
        RunStatus::Completed => "completed",
        RunStatus::WaitingForHuman => "waiting_for_human",
        RunStatus::Failed => "failed",
    };
    span.record(PHASEO_RUN_STATUS, status);
    if let Some(kind) = state.pending.first().map(|p| p.kind.as_str()) {
        span.record(PHASEO_PAUSE_KIND, kind);
        metric::pause(&inner.id, kind);
    }
    if let Some(error) = error {
        let detail = inner
            .capture
            .text("otel.status_description", || error.to_string());
        span::fail(span, error.kind().as_str(), detail.as_deref());
    }
}

/// What a resume tells once it is accepted, taken from the state and decisions it was given.
pub(crate) struct Resumption {
    paused_at_ms: Option<u64>,
    /// Each decision: its call's id, its tool, and its name.
    decisions: Vec<(String, String, &'static str)>,
}

impl Resumption {
    #[inline(never)]
    pub(crate) fn of(span: &Span, state: &RunState, decisions: &Decisions) -> Self {
        let decisions = if span.is_disabled() {
            Vec::new()
        } else {
            decisions
                .iter()
                .map(|(call_id, decision)| {
                    let tool = state
                        .pending
                        .iter()
                        .find(|p| p.call.id == call_id)
                        .map_or_else(String::new, |p| p.call.name.clone());
                    (call_id.to_owned(), tool, decision.name())
                })
                .collect()
        };
        Resumption {
            paused_at_ms: state.paused_at_ms,
            decisions,
        }
    }

    /// A resumed run: how long it waited for people, and each decision as an event of its span
    /// (with who made it and when, when the store says).
    #[inline(never)]
    pub(crate) fn accepted(self, inner: &AgentInner, deciders: &[Decider]) {
        if let Some(paused) = self.paused_at_ms {
            let waited = now_ms().saturating_sub(paused);
            metric::wait(&inner.id, Duration::from_millis(waited).as_secs_f64());
        }
        for (call_id, tool, decision) in &self.decisions {
            let who = deciders.iter().find(|d| &d.call_id == call_id);
            let by = who.map_or("", |d| d.by.as_str());
            let at = who.and_then(|d| d.at_ms).unwrap_or_default();
            tracing::info!(
                { GEN_AI_TOOL_CALL_ID } = call_id.as_str(),
                { GEN_AI_TOOL_NAME } = tool.as_str(),
                { PHASEO_DECISION } = *decision,
                { PHASEO_DECISION_BY } = by,
                { PHASEO_DECISION_AT_MS } = span::int(at),
                "{EVENT_DECISION}"
            );
        }
    }
}

/// One model request (with its retries): its span, and the metrics it records when it ends.
pub(crate) struct Chat<'a> {
    pub(crate) span: Span,
    inner: &'a AgentInner,
    /// When the request started; `None` when no subscriber listens (nothing is recorded).
    started: Option<Instant>,
    provider: &'a str,
    request_model: &'a str,
}

impl<'a> Chat<'a> {
    #[inline(never)]
    pub(crate) fn open(inner: &'a AgentInner, request: &'a ModelRequest<'a>) -> Self {
        if !telemetry::on() {
            return Chat {
                span: Span::none(),
                inner,
                started: None,
                provider: "",
                request_model: "",
            };
        }
        let info = inner.model.describe();
        let request_model = request.model.as_deref().or(info.model).unwrap_or_default();
        let span = span::chat(&ChatTarget {
            provider: info.provider,
            request_model: Some(request_model).filter(|m| !m.is_empty()),
            server_address: info.server_address,
            server_port: info.server_port,
        });
        if !span.is_disabled() {
            let capture = &inner.capture;
            if let Some(text) = capture.text(GEN_AI_SYSTEM_INSTRUCTIONS, || {
                json!([{"type": "text", "content": request.instructions}]).to_string()
            }) {
                span.record(GEN_AI_SYSTEM_INSTRUCTIONS, text);
            }
            if let Some(text) = capture.text(GEN_AI_INPUT_MESSAGES, || {
                Value::Array(request.messages.iter().map(message_json).collect()).to_string()
            }) {
                span.record(GEN_AI_INPUT_MESSAGES, text);
            }
        }
        Chat {
            span,
            inner,
            started: Some(Instant::now()),
            provider: info.provider,
            request_model,
        }
    }

    /// A retry, as an event of the request's span.
    #[inline(never)]
    pub(crate) fn retry(&self, attempt: u32, delay: Duration, error: &ModelError) {
        let _in = self.span.enter();
        tracing::info!(
            { PHASEO_RETRY_ATTEMPT } = span::int(attempt),
            { PHASEO_RETRY_DELAY_MS } = span::int(delay.as_millis()),
            { ERROR_TYPE } = error.kind.as_str(),
            "{EVENT_RETRY}"
        );
    }

    #[inline(never)]
    pub(crate) fn answered(self, response: &ModelResponse) {
        let Some(started) = self.started else { return };
        let span = &self.span;
        let usage = response.usage;
        let response_model = response.model.as_deref().unwrap_or(self.request_model);
        if !span.is_disabled() {
            if !response_model.is_empty() {
                span.record(GEN_AI_RESPONSE_MODEL, response_model);
            }
            if let Some(id) = &response.id {
                span.record(GEN_AI_RESPONSE_ID, id.as_str());
            }
            if let Some(reason) = &response.finish_reason {
                span::record_list(
                    span,
                    GEN_AI_RESPONSE_FINISH_REASONS,
                    &[finish_reason(reason)],
                );
            }
            if let Some(usage) = usage {
                span.record(GEN_AI_USAGE_INPUT_TOKENS, span::int(usage.input_tokens));
                span.record(GEN_AI_USAGE_OUTPUT_TOKENS, span::int(usage.output_tokens));
                if let Some(n) = usage.cached_input_tokens {
                    span.record(GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, span::int(n));
                }
                if let Some(n) = usage.cache_creation_input_tokens {
                    span.record(GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, span::int(n));
                }
                if let Some(n) = usage.reasoning_output_tokens {
                    span.record(GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, span::int(n));
                }
            }
            if let Some(text) = self.inner.capture.text(GEN_AI_OUTPUT_MESSAGES, || {
                let mut message = assistant_json(response.text.as_deref(), &response.tool_calls);
                if let Some(reason) = &response.finish_reason {
                    message["finish_reason"] = Value::from(finish_reason(reason));
                }
                Value::Array(vec![message]).to_string()
            }) {
                span.record(GEN_AI_OUTPUT_MESSAGES, text);
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        metric::operation_duration(
            seconds,
            self.provider,
            self.request_model,
            Some(response_model),
            None,
        );
        if let Some(usage) = usage {
            metric::token_usage(
                self.provider,
                self.request_model,
                response_model,
                usage.input_tokens,
                usage.output_tokens,
            );
        }
    }

    #[inline(never)]
    pub(crate) fn failed(self, error: &ModelError) {
        let Some(started) = self.started else { return };
        let kind = error.kind.as_str();
        let detail = self
            .inner
            .capture
            .text("otel.status_description", || error.to_string());
        span::fail(&self.span, kind, detail.as_deref());
        let seconds = started.elapsed().as_secs_f64();
        metric::operation_duration(seconds, self.provider, self.request_model, None, Some(kind));
    }
}

fn finish_reason(reason: &crate::model::request::FinishReason) -> &str {
    use crate::model::request::FinishReason;
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_call",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other,
    }
}

/// A message in the conventions' form: a role and its parts.
fn message_json(message: &Message) -> Value {
    match message {
        Message::User { content } => {
            json!({"role": "user", "parts": [{"type": "text", "content": content}]})
        }
        Message::Assistant {
            content,
            tool_calls,
        } => assistant_json(content.as_deref(), tool_calls),
        Message::Tool {
            call_id, content, ..
        } => json!({"role": "tool", "parts": [
            {"type": "tool_call_response", "id": call_id, "response": content}
        ]}),
    }
}

fn assistant_json(text: Option<&str>, calls: &[ToolCall]) -> Value {
    let mut parts = Vec::with_capacity(calls.len() + 1);
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        parts.push(json!({"type": "text", "content": text}));
    }
    for call in calls {
        let arguments = serde_json::from_str::<Value>(&call.arguments)
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        parts.push(
            json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}),
        );
    }
    json!({"role": "assistant", "parts": parts})
}

/// The span of one call of tool `tool` (an index of the agent's tools; `None` for a tool it
/// does not have), at `attempt`.
#[inline(never)]
pub(crate) fn tool_span(
    inner: &AgentInner,
    tool: Option<usize>,
    call: &ToolCall,
    attempt: u32,
) -> Span {
    if !telemetry::on() {
        return Span::none();
    }
    let found = tool.map(|i| &inner.tools[i]);
    let span = span::execute_tool(&ToolTarget {
        tool: &call.name,
        call_id: &call.id,
        tool_type: found.map_or("function", |t| t.tool_type),
        description: found.map_or("", |t| t.description.as_str()),
        attempt,
    });
    if !span.is_disabled() {
        if let Some(text) = inner
            .capture
            .text(GEN_AI_TOOL_CALL_ARGUMENTS, || call.arguments.clone())
        {
            span.record(GEN_AI_TOOL_CALL_ARGUMENTS, text);
        }
    }
    span
}

/// How a call ended, on its span and in the metrics: `outcome` (one of the `OUTCOME_*`), its
/// error if it failed, its result text if it has one, and how long it ran if it ran.
#[inline(never)]
pub(crate) fn tool_done(
    inner: &AgentInner,
    span: &Span,
    call: &ToolCall,
    outcome: &'static str,
    error: Option<&AgentError>,
    result: Option<&str>,
    ran: Option<Duration>,
) {
    if !telemetry::on() {
        return;
    }
    let error_type = error.map(|e| e.kind().as_str());
    if !span.is_disabled() {
        span.record(PHASEO_CALL_OUTCOME, outcome);
        if let Some(error) = error {
            let detail = inner
                .capture
                .text("otel.status_description", || error.to_string());
            span::fail(span, error.kind().as_str(), detail.as_deref());
        }
        if let Some(result) = result {
            if let Some(text) = inner
                .capture
                .text(GEN_AI_TOOL_CALL_RESULT, || result.to_owned())
            {
                span.record(GEN_AI_TOOL_CALL_RESULT, text);
            }
        }
    }
    metric::tool_call(
        &call.name,
        outcome,
        error_type,
        ran.map(|d| d.as_secs_f64()),
    );
}

/// The span of a call that waits for a person: it ends as `paused` (or `in_doubt`, for a call
/// whose process stopped while it ran), with what it waits for.
#[inline(never)]
pub(crate) fn tool_paused(
    inner: &AgentInner,
    tool: Option<usize>,
    call: &ToolCall,
    kind: PendingKind,
    attempt: u32,
) {
    if !telemetry::on() {
        return;
    }
    let span = tool_span(inner, tool, call, attempt);
    let outcome = match kind {
        PendingKind::OutcomeUnknown => OUTCOME_IN_DOUBT,
        _ => OUTCOME_PAUSED,
    };
    if !span.is_disabled() {
        span.record(PHASEO_PAUSE_KIND, kind.as_str());
    }
    tool_done(inner, &span, call, outcome, None, None, None);
}

/// A call answered without running: its span ends at once, with its outcome.
#[inline(never)]
pub(crate) fn tool_answered(
    inner: &AgentInner,
    span: &Span,
    call: &ToolCall,
    outcome: &'static str,
    kind: Option<AgentErrorKind>,
    content: &str,
) {
    if !telemetry::on() {
        return;
    }
    let error_type = kind.map(AgentErrorKind::as_str);
    if !span.is_disabled() {
        span.record(PHASEO_CALL_OUTCOME, outcome);
        if let Some(error_type) = error_type {
            span::fail(span, error_type, None);
        }
        if let Some(text) = inner
            .capture
            .text(GEN_AI_TOOL_CALL_RESULT, || content.to_owned())
        {
            span.record(GEN_AI_TOOL_CALL_RESULT, text);
        }
    }
    metric::tool_call(&call.name, outcome, error_type, None);
}

/// Keeps `span`'s trace context in the state (when spans go to OpenTelemetry).
#[inline(never)]
pub(crate) fn keep_trace(span: &Span, state: &mut RunState) {
    if !span.is_disabled() {
        if let Some(trace) = TraceContext::of(span) {
            state.trace = Some(Box::new(trace));
        }
    }
}

/// A resume refused before anything ran: its span says why.
#[inline(never)]
pub(crate) fn refused(span: &Span, error: &AgentError) {
    if !span.is_disabled() {
        span.record(PHASEO_RUN_STATUS, "refused");
        span::fail(span, error.kind().as_str(), None);
    }
}

/// The run's version in its store, once its last entry is recorded.
#[inline(never)]
pub(crate) fn journaled(span: &Span, journal: Option<&dyn Journal>) {
    if let Some(version) = journal.and_then(Journal::version) {
        if !span.is_disabled() {
            span.record(PHASEO_RUN_VERSION, span::int(version));
        }
    }
}

/// The run's span ends: its last journal write is done, and nothing more is recorded on it. It
/// is exported now, not when the last handle to it is dropped (see `span::end`).
#[inline(never)]
pub(crate) fn ended(span: &Span) {
    span::end(span);
}
