//! A whole Chat Completions response as a [`ModelResponse`] ([`parse_response`]), and what a
//! stream's chunks share with it: the shapes of text, arguments and usage, finish reasons, and
//! the errors a body or chunk carries.

use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{FinishReason, ModelResponse, Usage};
use crate::provider::http;

/// A Chat Completions response body as a [`ModelResponse`]: text, tool calls, finish reason,
/// usage and id of `choices[0]` (see the [module docs](super)).
///
/// An `error` in the body (OpenRouter answers HTTP 200 with one when the model failed) is the
/// [`ModelError`] it describes; a body without a `choices[0].message` object, or with a tool
/// call that has no function name, is [`ModelErrorKind::InvalidResponse`].
///
/// ```
/// use phaseo_agent::FinishReason;
/// use phaseo_agent::provider::openai::parse_response;
/// use serde_json::json;
///
/// let response = parse_response(&json!({
///     "id": "chatcmpl-1",
///     "object": "chat.completion",
///     "choices": [{
///         "index": 0,
///         "message": {
///             "role": "assistant",
///             "content": null,
///             "tool_calls": [{
///                 "id": "call_1",
///                 "type": "function",
///                 "function": {"name": "get_status", "arguments": "{\"service\":\"api\"}"}
///             }]
///         },
///         "finish_reason": "tool_calls"
///     }],
///     "usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 64}}
/// }))
/// .unwrap();
/// assert_eq!(response.text, None);
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// let usage = response.usage.unwrap();
/// assert_eq!((usage.input_tokens, usage.output_tokens, usage.cached_input_tokens), (100, 20, Some(64)));
/// assert_eq!(response.id.as_deref(), Some("chatcmpl-1"));
/// ```
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    if let Some(error) = body_error(body) {
        return Err(error);
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| invalid("the response has no `choices`"))?;
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    if let Some(error) = choice_error(choice.get("error"), finish) {
        return Err(error);
    }
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| invalid("`choices[0]` has no `message` object"))?;
    let mut text = content_text(message.get("content"), || "message.content".into())?;
    if text.is_none() {
        text = content_text(message.get("refusal"), || "message.refusal".into())?;
    }
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                tool_calls.push(whole_call(call, i)?);
            }
        }
        Some(_) => return Err(invalid("`message.tool_calls` is not an array")),
    }
    if tool_calls.is_empty() {
        if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
            let (name, arguments) = function_parts(function, "`message.function_call`")?;
            tool_calls.push(ToolCall::raw("", name, arguments));
        }
    }
    Ok(ModelResponse {
        text,
        tool_calls,
        finish_reason: finish.map(finish_reason),
        usage: body.get("usage").and_then(usage),
        id: response_id(body),
        model: model_name(body.get("model")),
    })
}

/// One call of `message.tool_calls`.
fn whole_call(call: &Value, position: usize) -> Result<ToolCall, ModelError> {
    let function = call
        .get("function")
        .filter(|f| f.is_object())
        .ok_or_else(|| invalid(format!("tool call {position} has no `function` object")))?;
    let (name, arguments) = function_parts(function, &format!("tool call {position}"))?;
    let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
    Ok(ToolCall::raw(id, name, arguments))
}

/// A function's name (required) and argument text.
fn function_parts(function: &Value, what: &str) -> Result<(String, String), ModelError> {
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid(format!("{what} has no function name")))?;
    let arguments = function
        .get("arguments")
        .map(arguments_text)
        .unwrap_or_default();
    Ok((name.to_owned(), arguments))
}

/// Argument text: a string as it is, `null` as nothing, anything else (an object, as some
/// servers send it) as its JSON text.
pub(super) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Message text: a string (`""` is none), `null`, or an array of parts whose `text` is joined.
/// `what` names the field for an error; it is only called to write one.
pub(super) fn content_text(
    content: Option<&Value>,
    what: impl FnOnce() -> String,
) -> Result<Option<String>, ModelError> {
    let text = match content {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        Some(_) => return Err(invalid(format!("`{}` is not a string", what()))),
    };
    Ok((!text.is_empty()).then_some(text))
}

/// A `finish_reason` as a [`FinishReason`].
pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The token counts of a `usage` object, if it has any.
pub(super) fn usage(wire: &Value) -> Option<Usage> {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64);
    let input = count(wire.get("prompt_tokens"));
    let output = count(wire.get("completion_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let cached = count(
        wire.get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens")),
    )
    .or_else(|| count(wire.get("prompt_cache_hit_tokens")));
    let reasoning = count(
        wire.get("completion_tokens_details")
            .and_then(|d| d.get("reasoning_tokens")),
    );
    Some(Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
        cached_input_tokens: cached,
        cache_creation_input_tokens: None,
        reasoning_output_tokens: reasoning,
    })
}

/// The model a body names, when it names one.
pub(super) fn model_name(model: Option<&Value>) -> Option<String> {
    model
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
}

fn response_id(body: &Value) -> Option<String> {
    body.get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

pub(super) fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

/// The error a body carries instead of an answer: its `error` (see [`error_in`]), or the body
/// itself when it is vLLM's older top-level `{"object": "error", ...}`.
pub(super) fn body_error(body: &Value) -> Option<ModelError> {
    error_in(body.get("error")).or_else(|| {
        (body.get("object").and_then(Value::as_str) == Some("error")).then(|| error_object(body))
    })
}

/// The error of a body's or chunk's `error` field: an error object, or a string.
pub(super) fn error_in(error: Option<&Value>) -> Option<ModelError> {
    match error? {
        error @ Value::Object(_) => Some(error_object(error)),
        Value::String(message) => Some(ModelError::new(
            ModelErrorKind::Other,
            format!("the response is an error: {message}"),
        )),
        _ => None,
    }
}

/// A choice that failed: OpenRouter's `finish_reason: "error"`, with or without an `error`
/// (the choice's `error` field).
pub(super) fn choice_error(error: Option<&Value>, finish: Option<&str>) -> Option<ModelError> {
    if let Some(error) = error.filter(|e| e.is_object()) {
        return Some(error_object(error));
    }
    (finish == Some("error")).then(|| {
        ModelError::new(
            ModelErrorKind::Overloaded,
            "the provider ended the response with finish_reason \"error\"",
        )
    })
}

/// An error object (`{"message", "type", "code", ...}`) as a [`ModelError`] (see the
/// [module docs](super)): a numeric `code` as an HTTP status, else its `code` or `type`.
fn error_object(error: &Value) -> ModelError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    let code = error.get("code");
    let status = code.and_then(|c| {
        c.as_u64()
            .or_else(|| c.as_str().and_then(|s| s.parse::<u64>().ok()))
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (400..=599).contains(n))
    });
    if let Some(status) = status {
        return ModelError::from_status(status, message);
    }
    let labels = [
        code.and_then(Value::as_str),
        error.get("type").and_then(Value::as_str),
    ];
    let kind = labels
        .iter()
        .flatten()
        .find_map(|label| error_kind(label, message))
        .unwrap_or(ModelErrorKind::Other);
    let message = match labels.iter().flatten().next() {
        Some(label) => format!("{label}: {message}"),
        None => message.to_owned(),
    };
    ModelError::new(kind, message)
}

/// The kind an error `code` or `type` names, if this crate knows it.
fn error_kind(label: &str, message: &str) -> Option<ModelErrorKind> {
    Some(match label {
        "rate_limit_exceeded" | "rate_limit_error" => ModelErrorKind::RateLimited,
        "server_error"
        | "api_error"
        | "internal_server_error"
        | "internal_error"
        | "overloaded_error"
        | "service_unavailable" => ModelErrorKind::Overloaded,
        "context_length_exceeded" => ModelErrorKind::ContextTooLong,
        "invalid_request_error" | "BadRequestError" => ModelError::from_status(400, message).kind,
        "authentication_error" | "invalid_api_key" | "permission_error" => {
            ModelErrorKind::Authentication
        }
        "timeout" | "timeout_error" => ModelErrorKind::Timeout,
        _ => return None,
    })
}

/// The data of an SSE event named `error`: an error object if it is one, else its text.
pub(super) fn event_error(data: &str) -> ModelError {
    match serde_json::from_str::<Value>(data) {
        Ok(value) => body_error(&value)
            .unwrap_or_else(|| ModelError::new(ModelErrorKind::Other, http::error_message(data))),
        Err(_) => ModelError::new(ModelErrorKind::Other, http::error_message(data)),
    }
}

/// The start of some data, for an error message (200 bytes at most).
pub(super) fn cut(data: &str) -> &str {
    http::cut(data, 200)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn error_codes_and_types_map_to_kinds() {
        let cases = [
            (
                json!({"code": 429, "message": "m"}),
                ModelErrorKind::RateLimited,
            ),
            (
                json!({"code": "503", "message": "m"}),
                ModelErrorKind::Overloaded,
            ),
            (json!({"type": "server_error"}), ModelErrorKind::Overloaded),
            (
                json!({"code": "context_length_exceeded", "type": "invalid_request_error"}),
                ModelErrorKind::ContextTooLong,
            ),
            (
                json!({"type": "invalid_request_error"}),
                ModelErrorKind::BadRequest,
            ),
            (
                json!({"code": "invalid_api_key"}),
                ModelErrorKind::Authentication,
            ),
            (json!({"type": "mystery"}), ModelErrorKind::Other),
            (json!({"code": 200, "message": "m"}), ModelErrorKind::Other),
        ];
        for (error, kind) in cases {
            assert_eq!(error_object(&error).kind, kind, "{error}");
        }
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        let text = "é".repeat(150);
        assert!(cut(&text).len() <= 200);
        assert!(text.starts_with(cut(&text)));
    }
}
