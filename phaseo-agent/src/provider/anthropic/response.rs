//! A whole Messages API response as a [`ModelResponse`] ([`parse_response`]), and what a
//! stream's events share with it: usage, stop reasons, and error bodies.

use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{FinishReason, ModelResponse, Usage};

/// A Messages API response body as a [`ModelResponse`]: text, tool calls, finish reason, usage
/// and id (see the [module docs](super)). A body of `"type": "error"` is the [`ModelError`] it
/// describes; a body without a `content` array is [`ModelErrorKind::InvalidResponse`].
///
/// ```
/// use phaseo_agent::FinishReason;
/// use phaseo_agent::provider::anthropic::parse_response;
/// use serde_json::json;
///
/// let response = parse_response(&json!({
///     "id": "msg_01",
///     "type": "message",
///     "role": "assistant",
///     "content": [
///         {"type": "text", "text": "Checking."},
///         {"type": "tool_use", "id": "toolu_01", "name": "get_status", "input": {"service": "api"}}
///     ],
///     "stop_reason": "tool_use",
///     "usage": {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 30}
/// }))
/// .unwrap();
/// assert_eq!(response.text.as_deref(), Some("Checking."));
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// let usage = response.usage.unwrap();
/// assert_eq!((usage.input_tokens, usage.cached_input_tokens), (120, Some(20)));
/// ```
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(stream_error(body));
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the response has no `content` array"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => {
                let id = string_field(block, "id")?;
                let name = string_field(block, "name")?;
                let arguments = match block.get("input") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(input) => input.to_string(),
                };
                tool_calls.push(ToolCall::raw(id, name, arguments));
            }
            _ => {}
        }
    }
    let mut usage = WireUsage::default();
    if let Some(wire) = body.get("usage") {
        usage.update(wire);
    }
    Ok(ModelResponse {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        finish_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason),
        usage: usage.to_usage(),
        id: body.get("id").and_then(Value::as_str).map(str::to_owned),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned),
    })
}

/// A `stop_reason` as a [`FinishReason`].
pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

pub(super) fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

pub(super) fn string_field(block: &Value, key: &str) -> Result<String, ModelError> {
    block
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("a `tool_use` block has no string `{key}`")))
}

/// Anthropic's token counts, as far as they were given.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct WireUsage {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl WireUsage {
    /// Takes the counts `wire` gives (they are running totals: a later count replaces an earlier).
    pub(super) fn update(&mut self, wire: &Value) {
        let count = |key: &str| wire.get(key).and_then(Value::as_u64);
        self.input = count("input_tokens").or(self.input);
        self.cache_creation = count("cache_creation_input_tokens").or(self.cache_creation);
        self.cache_read = count("cache_read_input_tokens").or(self.cache_read);
        self.output = count("output_tokens").or(self.output);
    }

    pub(super) fn to_usage(self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() && self.cache_read.is_none() {
            return None;
        }
        let input = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_creation.unwrap_or(0))
            .saturating_add(self.cache_read.unwrap_or(0));
        Some(Usage {
            input_tokens: input,
            output_tokens: self.output.unwrap_or(0),
            cached_input_tokens: self.cache_read,
            cache_creation_input_tokens: self.cache_creation,
            reasoning_output_tokens: None,
        })
    }
}

/// An error body (`{"type": "error", "error": {"type": ..., "message": ...}}`) as a
/// [`ModelError`] of the kind its type has as an HTTP status (see the [module docs](super)). The
/// error has no status: the HTTP response itself succeeded.
pub(super) fn stream_error(body: &Value) -> ModelError {
    let error = body.get("error");
    let kind_name = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    let status = match kind_name {
        "invalid_request_error" => Some(400),
        "authentication_error" => Some(401),
        "billing_error" => Some(402),
        "permission_error" => Some(403),
        "not_found_error" => Some(404),
        "request_too_large" => Some(413),
        "rate_limit_error" => Some(429),
        "api_error" => Some(500),
        "timeout_error" => Some(504),
        "overloaded_error" => Some(529),
        _ => None,
    };
    let kind = status.map_or(ModelErrorKind::Other, |s| {
        ModelError::from_status(s, message).kind
    });
    ModelError::new(kind, format!("{kind_name}: {message}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        let cases = [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("tool_use", FinishReason::ToolCalls),
            ("max_tokens", FinishReason::Length),
            ("model_context_window_exceeded", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("pause_turn", FinishReason::Other("pause_turn".into())),
        ];
        for (wire, reason) in cases {
            assert_eq!(finish_reason(wire), reason, "{wire}");
        }
    }

    #[test]
    fn error_types_map_to_kinds() {
        let cases = [
            ("overloaded_error", "Overloaded", ModelErrorKind::Overloaded),
            ("api_error", "x", ModelErrorKind::Overloaded),
            ("rate_limit_error", "x", ModelErrorKind::RateLimited),
            ("invalid_request_error", "x", ModelErrorKind::BadRequest),
            (
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
                ModelErrorKind::ContextTooLong,
            ),
            ("authentication_error", "x", ModelErrorKind::Authentication),
            ("permission_error", "x", ModelErrorKind::Authentication),
            ("request_too_large", "x", ModelErrorKind::ContextTooLong),
            ("timeout_error", "x", ModelErrorKind::Timeout),
            ("not_found_error", "x", ModelErrorKind::BadRequest),
            ("something_new", "x", ModelErrorKind::Other),
        ];
        for (kind, message, expected) in cases {
            let error = json!({"type": "error", "error": {"type": kind, "message": message}});
            assert_eq!(stream_error(&error).kind, expected, "{kind}: {message}");
        }
    }
}
