//! A served call's `execute_tool` span: a child of the caller's span when the request's `_meta`
//! carries its W3C trace context (MCP's trace-context convention), so one trace crosses the two
//! processes; a root of its own otherwise. Its outcome and duration go to the same metrics as a
//! run's calls. No content (arguments, results) is recorded: a server has no say over what its
//! callers agreed to capture.

use std::time::Instant;

use serde_json::{Map, Value};
use tracing::Span;

use crate::error::AgentError;
use crate::telemetry::context::TraceContext;
use crate::telemetry::metric;
use crate::telemetry::semconv::PHASEO_CALL_OUTCOME;
use crate::telemetry::span::{self, ToolTarget};
use crate::tool::definition::Tool;

/// One served call, from its request to its answer.
pub(super) struct Traced {
    pub(super) span: Span,
    tool: String,
    started: Instant,
}

impl Traced {
    /// The span of a call of `tool` with JSON-RPC id `call_id`, continuing the trace in `meta`.
    pub(super) fn start(tool: &Tool, call_id: &str, meta: &Map<String, Value>) -> Self {
        let span = span::execute_tool_root(&ToolTarget {
            tool: &tool.id,
            call_id,
            tool_type: tool.tool_type,
            description: &tool.description,
            attempt: 0,
        });
        if !span.is_disabled() {
            if let Some(parent) = TraceContext::from_meta(meta) {
                parent.parent_of(&span);
            }
        }
        Traced {
            span,
            tool: tool.id.clone(),
            started: Instant::now(),
        }
    }

    /// The call ran (or was refused before it ran, `ran` false): `outcome` is one of the
    /// `OUTCOME_*`, `error` what failed it.
    pub(super) fn ended(self, outcome: &'static str, error: Option<&AgentError>, ran: bool) {
        let error_type = error.map(|e| e.kind().as_str());
        if !self.span.is_disabled() {
            self.span.record(PHASEO_CALL_OUTCOME, outcome);
            if let Some(error_type) = error_type {
                span::fail(&self.span, error_type, None);
            }
        }
        let seconds = ran.then(|| self.started.elapsed().as_secs_f64());
        metric::tool_call(&self.tool, outcome, error_type, seconds);
    }

    /// The outcome of the call's result (or of what failed it).
    pub(super) fn ran<T>(self, result: &Result<T, AgentError>) {
        let (outcome, error) = span::ran_outcome(result);
        self.ended(outcome, error, true);
    }
}
