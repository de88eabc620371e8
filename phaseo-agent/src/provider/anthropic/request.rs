//! A [`ModelRequest`] as a Messages API body: [`request_body`].

use serde_json::{Map, Value, json};

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::{Message, ToolCall};
use crate::model::request::{ModelRequest, ToolChoice};
use crate::provider::anthropic::config::{Anthropic, DEFAULT_MAX_TOKENS};
use crate::provider::shell::sampling::Fields;
use crate::schema::dialect::{Dialect, convert};

/// The key `input` gets when a call's argument text is not a JSON object (see the
/// [module docs](super)).
pub const RAW_ARGUMENTS_KEY: &str = "_raw_arguments";

/// The Messages API body of `request`, as `config` sends it: the model (the request's, else
/// `config`'s), `max_tokens` (the request's, else `config`'s, else [`DEFAULT_MAX_TOKENS`]),
/// `system`, `messages`, `tools`, `tool_choice`, `temperature`, `top_p` and `stop_sequences`
/// (each the request's, else `config`'s, when set; a seed is not sent, the API has none),
/// `metadata` (when `config` sends it) and, when `stream`, `"stream": true`. See the
/// [module docs](super) for how the conversation is mapped.
///
/// Fails with [`ModelErrorKind::BadRequest`], before anything is sent, when a tool's parameter
/// schema cannot be an Anthropic `input_schema` (its root is a union, or not an object), or
/// when the temperature or `top_p` is not a finite number.
///
/// ```
/// use phaseo_agent::{Message, ModelRequest, ToolCall, ToolDefinition};
/// use phaseo_agent::provider::anthropic::{Anthropic, request_body};
/// use serde_json::json;
///
/// let tools = vec![ToolDefinition::new(
///     "get_status",
///     "Get a service's status",
///     json!({"type": "object", "properties": {"service": {"type": "string"}}}),
/// )];
/// let request = ModelRequest::new(vec![
///     Message::User { content: "Status of api and db?".into() },
///     Message::Assistant {
///         content: None,
///         tool_calls: vec![
///             ToolCall::new("toolu_1", "get_status", json!({"service": "api"})),
///             ToolCall::new("toolu_2", "get_status", json!({"service": "db"})),
///         ],
///     },
///     Message::Tool { call_id: "toolu_1".into(), name: "get_status".into(), content: r#"{"status":"up"}"#.into() },
///     Message::Tool { call_id: "toolu_2".into(), name: "get_status".into(), content: r#"{"error":"timed out"}"#.into() },
/// ])
///     .instructions("Be brief.")
///     .tools(tools)
///     .parallel_tool_calls(false);
/// let body = request_body(&request, &Anthropic::new("claude-sonnet-4-5"), false).unwrap();
/// assert_eq!(body["system"], "Be brief.");
/// assert_eq!(body["max_tokens"], 4096);
/// assert_eq!(body["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
/// // Both results in one user message; the error one is flagged.
/// assert_eq!(body["messages"][2], json!({"role": "user", "content": [
///     {"type": "tool_result", "tool_use_id": "toolu_1", "content": r#"{"status":"up"}"#},
///     {"type": "tool_result", "tool_use_id": "toolu_2", "content": r#"{"error":"timed out"}"#, "is_error": true},
/// ]}));
/// ```
pub fn request_body(
    request: &ModelRequest<'_>,
    config: &Anthropic,
    stream: bool,
) -> Result<Value, ModelError> {
    let mut body = Map::new();
    let model = request.model.as_deref().unwrap_or(&config.model);
    body.insert("model".into(), json!(model));
    if !request.instructions.trim().is_empty() {
        body.insert("system".into(), json!(request.instructions));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let schema = convert(&tool.parameters, Dialect::Anthropic).map_err(|e| {
                    ModelError::new(
                        ModelErrorKind::BadRequest,
                        format!("the parameters of tool `{}`: {e}", tool.name),
                    )
                })?;
                let mut wire = Map::new();
                wire.insert("name".into(), json!(tool.name));
                if !tool.description.is_empty() {
                    wire.insert("description".into(), json!(tool.description));
                }
                wire.insert("input_schema".into(), schema);
                Ok(Value::Object(wire))
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        body.insert("tools".into(), Value::Array(tools));
        body.insert(
            "tool_choice".into(),
            tool_choice(&request.tool_choice, request.parallel_tool_calls),
        );
    }
    let fields = Fields {
        max_tokens: "max_tokens",
        stop: "stop_sequences",
        // The Messages API has no seed.
        seed: None,
        max_tokens_default: Some(DEFAULT_MAX_TOKENS),
    };
    config.sampling.write(request, &fields, &mut body)?;
    if config.send_metadata && !request.meta.run_id.is_empty() {
        body.insert("metadata".into(), json!({ "user_id": request.meta.run_id }));
    }
    if stream {
        body.insert("stream".into(), json!(true));
    }
    Ok(Value::Object(body))
}

fn tool_choice(choice: &ToolChoice, parallel: Option<bool>) -> Value {
    let mut wire = match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
        ToolChoice::None => return json!({"type": "none"}),
    };
    if parallel == Some(false) {
        wire["disable_parallel_tool_use"] = json!(true);
    }
    wire
}

/// The conversation as alternating user and assistant messages.
fn messages(conversation: &[Message]) -> Vec<Value> {
    // (role, blocks), merged while the role repeats.
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in conversation {
        match message {
            Message::User { content } => {
                if !content.trim().is_empty() {
                    blocks_of(&mut turns, "user").push(json!({"type": "text", "text": content}));
                }
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let text = content.as_deref().filter(|t| !t.trim().is_empty());
                if text.is_none() && tool_calls.is_empty() {
                    continue;
                }
                let blocks = blocks_of(&mut turns, "assistant");
                if let Some(text) = text {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                blocks.extend(tool_calls.iter().map(tool_use));
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let blocks = blocks_of(&mut turns, "user");
                // Results go before any text of the same message, in call order.
                let position = blocks
                    .iter()
                    .rposition(|b| b["type"] == "tool_result")
                    .map_or(0, |i| i + 1);
                blocks.insert(position, tool_result(call_id, content));
            }
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The blocks of the last message if it is `role`'s, else of a new message of `role`.
fn blocks_of<'a>(
    turns: &'a mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
) -> &'a mut Vec<Value> {
    if turns.last().is_none_or(|(r, _)| *r != role) {
        turns.push((role, Vec::new()));
    }
    let last = turns.len() - 1;
    &mut turns[last].1
}

fn tool_use(call: &ToolCall) -> Value {
    json!({
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": tool_input(&call.arguments),
    })
}

/// A call's argument text as the `input` object (see the [module docs](super)).
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => json!({ RAW_ARGUMENTS_KEY: arguments }),
    }
}

fn tool_result(call_id: &str, content: &str) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(call_id));
    if !content.is_empty() {
        block.insert("content".into(), json!(content));
    }
    if is_error_result(content) {
        block.insert("is_error".into(), json!(true));
    }
    Value::Object(block)
}

/// Whether a result text has the runtime's error shape: `{"error": "<text>"}` and nothing else.
fn is_error_result(content: &str) -> bool {
    let content = content.trim_start();
    if !content.starts_with('{') || !content.contains("\"error\"") {
        return false;
    }
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(map)) => map.len() == 1 && map.get("error").is_some_and(Value::is_string),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::ToolDefinition;

    fn request(messages: Vec<Message>) -> ModelRequest<'static> {
        ModelRequest {
            messages: messages.into(),
            ..ModelRequest::default()
        }
    }

    fn body(request: &ModelRequest<'_>) -> Value {
        request_body(request, &Anthropic::new("claude-test"), false).unwrap()
    }

    #[test]
    fn a_plain_request_has_model_max_tokens_and_messages_only() {
        let body = body(&request(vec![Message::User {
            content: "Hi".into(),
        }]));
        assert_eq!(
            body,
            json!({
                "model": "claude-test",
                "max_tokens": 4096,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
            })
        );
    }

    #[test]
    fn the_request_overrides_model_and_max_tokens_and_sets_the_rest() {
        let mut r = request(vec![Message::User {
            content: "Hi".into(),
        }]);
        r.model = Some("claude-other".into());
        r.max_output_tokens = Some(100);
        r.temperature = Some(0.7);
        r.instructions = "Be brief.".into();
        r.meta.run_id = "run_1".into();
        let config = Anthropic::new("claude-test").send_metadata(true);
        let body = request_body(&r, &config, true).unwrap();
        assert_eq!(body["model"], "claude-other");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["temperature"].to_string(), "0.7");
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["metadata"], json!({"user_id": "run_1"}));
        assert_eq!(body["stream"], true);
        let quiet = request_body(&r, &Anthropic::new("x"), false).unwrap();
        assert!(quiet.get("metadata").is_none() && quiet.get("stream").is_none());
    }

    #[test]
    fn tool_choices_map_to_anthropic_shapes() {
        let cases = [
            (ToolChoice::Auto, None, json!({"type": "auto"})),
            (ToolChoice::Required, None, json!({"type": "any"})),
            (
                ToolChoice::Tool("t".into()),
                Some(false),
                json!({"type": "tool", "name": "t", "disable_parallel_tool_use": true}),
            ),
            (ToolChoice::None, Some(false), json!({"type": "none"})),
            (ToolChoice::Auto, Some(true), json!({"type": "auto"})),
        ];
        for (choice, parallel, expected) in cases {
            assert_eq!(tool_choice(&choice, parallel), expected);
        }
    }

    #[test]
    fn no_tools_means_no_tool_choice() {
        let mut r = request(vec![]);
        r.tool_choice = ToolChoice::Required;
        assert!(body(&r).get("tool_choice").is_none());
    }

    #[test]
    fn a_root_union_schema_is_refused_before_sending() {
        let mut r = request(vec![]);
        r.tools.to_mut().push(ToolDefinition {
            name: "pick".into(),
            description: String::new(),
            parameters: json!({"oneOf": [{"type": "object"}, {"type": "object"}]}),
            strict: false,
        });
        let error = request_body(&r, &Anthropic::new("x"), false).unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::BadRequest);
        assert!(error.message.contains("pick"), "{}", error.message);
    }

    #[test]
    fn argument_text_becomes_an_input_object() {
        assert_eq!(tool_input(""), json!({}));
        assert_eq!(tool_input("  "), json!({}));
        assert_eq!(tool_input(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(tool_input("{oops"), json!({"_raw_arguments": "{oops"}));
        assert_eq!(tool_input("[1]"), json!({"_raw_arguments": "[1]"}));
    }

    #[test]
    fn only_the_runtime_error_shape_is_an_error_result() {
        assert!(is_error_result(r#"{"error":"boom"}"#));
        assert!(is_error_result(r#" {"error": "boom"}"#));
        assert!(!is_error_result(r#"{"error":"boom","code":1}"#));
        assert!(!is_error_result(r#"{"error":{"code":1}}"#));
        assert!(!is_error_result(r#"{"status":"ok"}"#));
        assert!(!is_error_result("error"));
    }

    #[test]
    fn results_merge_with_following_user_text_after_them() {
        let conversation = vec![
            Message::User {
                content: "Go".into(),
            },
            Message::Assistant {
                content: Some("  ".into()),
                tool_calls: vec![ToolCall::raw("a", "t", "")],
            },
            Message::Tool {
                call_id: "a".into(),
                name: "t".into(),
                content: "1".into(),
            },
            Message::User {
                content: "And now?".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![],
            },
            Message::User {
                content: "Hello?".into(),
            },
        ];
        assert_eq!(
            messages(&conversation),
            vec![
                json!({"role": "user", "content": [{"type": "text", "text": "Go"}]}),
                json!({"role": "assistant", "content": [
                    {"type": "tool_use", "id": "a", "name": "t", "input": {}}
                ]}),
                json!({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "a", "content": "1"},
                    {"type": "text", "text": "And now?"},
                    {"type": "text", "text": "Hello?"}
                ]}),
            ]
        );
    }
}
