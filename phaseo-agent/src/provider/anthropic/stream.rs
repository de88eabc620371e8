//! A streamed Messages API response, assembled from its events: [`StreamAssembler`].

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{ModelDelta, ModelResponse};
use crate::provider::anthropic::response::{
    WireUsage, finish_reason, invalid, stream_error, string_field,
};
use crate::provider::http;
use crate::provider::shell::format::Assemble;

/// What a content block of a stream is.
#[derive(Debug, Clone, Copy)]
enum Block {
    Text,
    /// A `tool_use` block: the ordinal of its call in the turn.
    Tool(usize),
    /// A block this crate does not read (`thinking`, server tools, ...).
    Skipped,
}

#[derive(Debug, Default)]
struct CallParts {
    id: String,
    name: String,
    arguments: String,
    /// `input` of `content_block_start`, used when no `input_json_delta` comes.
    start_input: Option<Value>,
}

/// Assembles a streamed response (`"stream": true`) from its server-sent events, handing out
/// [`ModelDelta`]s as they come.
///
/// Feed it each event's name and data with [`push`](StreamAssembler::push), then call
/// [`finish`](StreamAssembler::finish). Events: `message_start` (id, input usage),
/// `content_block_start` (a text block, or a `tool_use` block whose id and name come as a
/// [`ModelDelta::ToolCall`] with empty arguments; its `index` is the call's ordinal in the turn,
/// not the block's index), `content_block_delta` (`text_delta` text, `input_json_delta` argument
/// pieces; others such as `thinking_delta` are skipped), `content_block_stop` (a `tool_use`
/// block that got no argument pieces gets `{}`), `message_delta` (stop reason, output usage),
/// `message_stop`, `ping` and unknown events (skipped, as Anthropic asks), and `error` (the
/// [`ModelError`] of its type). The event's kind is read from the data's `type`, else from the
/// event name.
///
/// ```
/// use phaseo_agent::{FinishReason, ModelDelta};
/// use phaseo_agent::provider::anthropic::StreamAssembler;
///
/// let mut stream = StreamAssembler::new();
/// let mut deltas = Vec::new();
/// for (event, data) in [
///     ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":10,"output_tokens":1}}}"#),
///     ("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_status","input":{}}}"#),
///     ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"service\":"}}"#),
///     ("content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"api\"}"}}"#),
///     ("content_block_stop", r#"{"type":"content_block_stop","index":0}"#),
///     ("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}"#),
///     ("message_stop", r#"{"type":"message_stop"}"#),
/// ] {
///     deltas.extend(stream.push(event, data).unwrap());
/// }
/// assert_eq!(deltas.len(), 3);
/// assert!(matches!(&deltas[0], ModelDelta::ToolCall { index: 0, id: Some(id), .. } if id == "toolu_1"));
/// let response = stream.finish().unwrap();
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// ```
#[derive(Debug, Default)]
pub struct StreamAssembler {
    id: Option<String>,
    model: Option<String>,
    text: String,
    calls: Vec<CallParts>,
    blocks: HashMap<u64, Block>,
    /// The blocks whose `content_block_stop` came: nothing may be added to them.
    stopped: HashSet<u64>,
    stop_reason: Option<String>,
    usage: WireUsage,
    complete: bool,
}

impl StreamAssembler {
    /// An assembler before any event.
    pub fn new() -> Self {
        StreamAssembler::default()
    }

    /// Whether `message_stop` has come: the response is whole, later events are ignored.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Reads one event (its SSE `event` name and `data`), and returns the deltas it carries.
    ///
    /// Fails with the event's error for an `error` event, and with
    /// [`ModelErrorKind::InvalidResponse`] for data that is not JSON or an event that does not
    /// fit the stream (an argument piece for a block that is not a `tool_use`).
    pub fn push(&mut self, event: &str, data: &str) -> Result<Vec<ModelDelta>, ModelError> {
        if self.complete {
            return Ok(Vec::new());
        }
        if data.trim().is_empty() {
            // A `ping` (or another event) without data carries nothing.
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| {
            invalid(format!(
                "the data of a `{event}` event is not JSON ({e}): {}",
                cut(data)
            ))
        })?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event)
            .to_owned();
        let mut deltas = Vec::new();
        match kind.as_str() {
            "message_start" => {
                if let Some(message) = value.get("message") {
                    self.id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                    let model = message.get("model").and_then(Value::as_str);
                    self.model = model.filter(|m| !m.is_empty()).map(str::to_owned);
                    if let Some(usage) = message.get("usage") {
                        self.usage.update(usage);
                    }
                }
            }
            "content_block_start" => {
                let index = block_index(&value)?;
                let block = value.get("content_block").unwrap_or(&Value::Null);
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        self.blocks.insert(index, Block::Text);
                        if let Some(text) = block.get("text").and_then(Value::as_str) {
                            self.text(text, &mut deltas);
                        }
                    }
                    Some("tool_use") => {
                        let ordinal = self.calls.len();
                        let id = string_field(block, "id")?;
                        let name = string_field(block, "name")?;
                        deltas.push(ModelDelta::ToolCall {
                            index: ordinal,
                            id: Some(id.clone()),
                            name: Some(name.clone()),
                            arguments: String::new(),
                        });
                        self.calls.push(CallParts {
                            id,
                            name,
                            arguments: String::new(),
                            start_input: block
                                .get("input")
                                .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                                .cloned(),
                        });
                        self.blocks.insert(index, Block::Tool(ordinal));
                    }
                    _ => {
                        self.blocks.insert(index, Block::Skipped);
                    }
                }
            }
            "content_block_delta" => {
                let index = block_index(&value)?;
                if self.stopped.contains(&index) {
                    return Err(invalid(format!(
                        "a `content_block_delta` for content block {index} after its \
                         `content_block_stop`"
                    )));
                }
                let delta = value.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(text) = delta.get("text").and_then(Value::as_str) {
                            self.text(text, &mut deltas);
                        }
                    }
                    Some("input_json_delta") => {
                        let Some(Block::Tool(ordinal)) = self.blocks.get(&index).copied() else {
                            return Err(invalid(format!(
                                "an `input_json_delta` for content block {index}, which is not a \
                                 `tool_use` block"
                            )));
                        };
                        let piece = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if !piece.is_empty() {
                            self.calls[ordinal].arguments.push_str(piece);
                            deltas.push(ModelDelta::ToolCall {
                                index: ordinal,
                                id: None,
                                name: None,
                                arguments: piece.to_owned(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = block_index(&value)?;
                self.stopped.insert(index);
                if let Some(Block::Tool(ordinal)) = self.blocks.get(&index).copied() {
                    let call = &mut self.calls[ordinal];
                    if call.arguments.is_empty() {
                        call.arguments = call
                            .start_input
                            .take()
                            .map_or_else(|| "{}".to_owned(), |i| i.to_string());
                        deltas.push(ModelDelta::ToolCall {
                            index: ordinal,
                            id: None,
                            name: None,
                            arguments: call.arguments.clone(),
                        });
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    self.usage.update(usage);
                }
            }
            "message_stop" => self.complete = true,
            "error" => return Err(stream_error(&value)),
            // `ping`, and event types Anthropic may add.
            _ => {}
        }
        Ok(deltas)
    }

    fn text(&mut self, text: &str, deltas: &mut Vec<ModelDelta>) {
        if !text.is_empty() {
            self.text.push_str(text);
            deltas.push(ModelDelta::Text {
                text: text.to_owned(),
            });
        }
    }

    /// The whole response. Fails with [`ModelErrorKind::Transport`] if `message_stop` has not
    /// come (the stream was cut), and with [`ModelErrorKind::InvalidResponse`] if a `tool_use`
    /// block never got its `content_block_stop` (its input may be cut: the call is not run on a
    /// guess).
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if !self.complete {
            return Err(ModelError::new(
                ModelErrorKind::Transport,
                "the response stream ended before `message_stop`",
            ));
        }
        let open = self.blocks.iter().find(|(index, block)| {
            matches!(block, Block::Tool(_)) && !self.stopped.contains(index)
        });
        if let Some((index, _)) = open {
            return Err(invalid(format!(
                "the `tool_use` content block {index} never ended (no `content_block_stop`): its \
                 input may be incomplete"
            )));
        }
        let tool_calls = self
            .calls
            .into_iter()
            .map(|call| {
                let arguments = if call.arguments.is_empty() {
                    call.start_input
                        .map_or_else(|| "{}".to_owned(), |i| i.to_string())
                } else {
                    call.arguments
                };
                ToolCall::raw(call.id, call.name, arguments)
            })
            .collect();
        Ok(ModelResponse {
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            finish_reason: self.stop_reason.as_deref().map(finish_reason),
            usage: self.usage.to_usage(),
            id: self.id,
            model: self.model,
        })
    }
}

fn block_index(event: &Value) -> Result<u64, ModelError> {
    event
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("a content block event has no `index`"))
}

/// The start of a text, for an error message.
fn cut(text: &str) -> &str {
    http::cut(text, 200)
}

impl Assemble for StreamAssembler {
    fn event(&mut self, name: &str, data: &str) -> Result<Vec<ModelDelta>, ModelError> {
        self.push(name, data)
    }

    fn is_complete(&self) -> bool {
        StreamAssembler::is_complete(self)
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        StreamAssembler::finish(self)
    }
}
