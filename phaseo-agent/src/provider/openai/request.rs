//! A [`ModelRequest`] as a Chat Completions body: [`request_body`].

use serde_json::{Map, Value, json};

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::{Message, ToolCall};
use crate::model::request::{ModelRequest, ToolChoice};
use crate::provider::openai::config::OpenAi;
use crate::provider::shell::sampling::Fields;
use crate::schema::dialect::{Dialect, convert};

/// The Chat Completions body of `request`, as `config` sends it (see the [module docs](super)):
/// `model`, `messages`, `tools`, `tool_choice` and `parallel_tool_calls` (with tools only),
/// `temperature`, `top_p`, the output limit (in the field of
/// [`OpenAi::effective_max_tokens_field`]), `stop` and `seed` (each the request's, else the
/// model's default, when set), `user` (with [`OpenAi::send_metadata`]) and, when `stream`,
/// `"stream": true` with `"stream_options": {"include_usage": true}`.
///
/// Fails with [`ModelErrorKind::BadRequest`], before anything is sent, when there is no model
/// name, when the temperature or `top_p` is not a finite number, or when `tool_choice` names a
/// tool that is not offered (or requires a tool and none is offered).
///
/// ```
/// use phaseo_agent::{Message, ModelRequest, ToolCall, ToolDefinition};
/// use phaseo_agent::provider::openai::{OpenAi, request_body};
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
///             ToolCall::new("call_1", "get_status", json!({"service": "api"})),
///             ToolCall::new("call_2", "get_status", json!({"service": "db"})),
///         ],
///     },
///     Message::Tool { call_id: "call_1".into(), name: "get_status".into(), content: r#"{"status":"up"}"#.into() },
///     Message::Tool { call_id: "call_2".into(), name: "get_status".into(), content: r#"{"status":"up"}"#.into() },
/// ])
///     .instructions("Be brief.")
///     .tools(tools)
///     .temperature(0.2)
///     .max_output_tokens(500)
///     .parallel_tool_calls(true);
/// let model = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1");
/// let body = request_body(&request, &model, false).unwrap();
/// assert_eq!(body["messages"][0], json!({"role": "system", "content": "Be brief."}));
/// // No text beside the calls: `""`, not `null`.
/// assert_eq!(body["messages"][2]["content"], "");
/// assert_eq!(body["messages"][3], json!({"role": "tool", "tool_call_id": "call_1", "content": r#"{"status":"up"}"#}));
/// assert_eq!(body["tool_choice"], "auto");
/// assert_eq!(body["parallel_tool_calls"], true);
/// assert_eq!(body["temperature"], 0.2);
/// assert_eq!(body["max_tokens"], 500); // not OpenAI's URL: `max_tokens`
/// ```
pub fn request_body(
    request: &ModelRequest<'_>,
    config: &OpenAi,
    stream: bool,
) -> Result<Value, ModelError> {
    let model = request.model.as_deref().unwrap_or(&config.model);
    if model.trim().is_empty() {
        return Err(bad_request(
            "no model name: give one to OpenAi::new (or the agent's model_name)",
        ));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.instructions, &request.messages)),
    );
    if request.tools.is_empty() {
        match &request.tool_choice {
            ToolChoice::Auto | ToolChoice::None => {}
            ToolChoice::Required | ToolChoice::Tool(_) => {
                return Err(bad_request(
                    "the tool choice requires a tool call, but no tool is offered",
                ));
            }
        }
    } else {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let mut function = Map::new();
                function.insert("name".into(), json!(tool.name));
                if !tool.description.is_empty() {
                    function.insert("description".into(), json!(tool.description));
                }
                let strict = tool
                    .strict
                    .then(|| convert(&tool.parameters, Dialect::OpenAiStrict).ok())
                    .flatten();
                match strict {
                    Some(schema) => {
                        function.insert("parameters".into(), schema);
                        function.insert("strict".into(), json!(true));
                    }
                    None => {
                        function.insert("parameters".into(), tool.parameters.clone());
                    }
                }
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            // With one tool, "a call to some tool" is a call to that tool: the named form, which
            // more servers know (llama-cpp-python refuses "required").
            ToolChoice::Required => match &*request.tools {
                [only] => json!({"type": "function", "function": {"name": only.name}}),
                _ => json!("required"),
            },
            ToolChoice::Tool(name) => {
                if !request.tools.iter().any(|t| t.name == *name) {
                    return Err(bad_request(format!(
                        "the tool choice names `{name}`, which is not offered on this turn"
                    )));
                }
                json!({"type": "function", "function": {"name": name}})
            }
        };
        body.insert("tool_choice".into(), choice);
        if let Some(parallel) = request.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), json!(parallel));
        }
    }
    let fields = Fields {
        max_tokens: config.effective_max_tokens_field().as_str(),
        stop: "stop",
        seed: Some("seed"),
        max_tokens_default: None,
    };
    config.sampling.write(request, &fields, &mut body)?;
    if config.send_metadata {
        let meta = &request.meta;
        if !meta.agent_id.is_empty() || !meta.run_id.is_empty() {
            body.insert(
                "user".into(),
                json!(format!("{}/{}", meta.agent_id, meta.run_id)),
            );
        }
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

fn bad_request(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::BadRequest, message)
}

/// The system message (when there are instructions), then the conversation.
fn messages(instructions: &str, conversation: &[Message]) -> Vec<Value> {
    let mut wire = Vec::with_capacity(conversation.len() + 1);
    if !instructions.trim().is_empty() {
        wire.push(json!({"role": "system", "content": instructions}));
    }
    for message in conversation {
        wire.push(match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut assistant = Map::new();
                assistant.insert("role".into(), json!("assistant"));
                assistant.insert("content".into(), json!(content.as_deref().unwrap_or("")));
                if !tool_calls.is_empty() {
                    let calls = tool_calls.iter().map(wire_call).collect();
                    assistant.insert("tool_calls".into(), Value::Array(calls));
                }
                Value::Object(assistant)
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    wire
}

fn wire_call(call: &ToolCall) -> Value {
    let arguments = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    })
}
