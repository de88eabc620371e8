//! A streamed Chat Completions response, assembled from its chunks: [`StreamAssembler`].

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{ModelDelta, ModelResponse, Usage};
use crate::provider::openai::chunk::{Array, Choice, Chunk, Delta, Field, Function, Object, Piece};
use crate::provider::openai::response::{
    arguments_text, body_error, choice_error, content_text, cut, error_in, event_error,
    finish_reason, invalid, usage,
};
use crate::provider::shell::format::Assemble;

/// One tool call as its pieces arrive (the `index` the server gave it is in
/// `StreamAssembler::by_index`).
#[derive(Debug)]
struct CallParts {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed response (`"stream": true`) from the `data` of its server-sent events,
/// handing out [`ModelDelta`]s as they come (see the [module docs](super) for what is read).
///
/// Feed it each event's data with [`push`](StreamAssembler::push) until
/// [`is_complete`](StreamAssembler::is_complete) (after `[DONE]`), or until the stream ends,
/// then call [`finish`](StreamAssembler::finish).
///
/// ```
/// use phaseo_agent::{FinishReason, ModelDelta};
/// use phaseo_agent::provider::openai::StreamAssembler;
///
/// let mut stream = StreamAssembler::new();
/// let mut deltas = Vec::new();
/// for data in [
///     r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_status","arguments":""}}]},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"service\":"}}]},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"api\"}"}}]},"finish_reason":null}]}"#,
///     r#"{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
///     r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":12}}"#,
///     "[DONE]",
/// ] {
///     deltas.extend(stream.push(data).unwrap());
/// }
/// assert!(stream.is_complete());
/// assert_eq!(deltas.len(), 3);
/// assert!(matches!(&deltas[0], ModelDelta::ToolCall { index: 0, id: Some(id), .. } if id == "call_1"));
/// let response = stream.finish().unwrap();
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// assert_eq!(response.usage.unwrap().input_tokens, 80);
/// ```
#[derive(Debug, Default)]
pub struct StreamAssembler {
    id: Option<String>,
    model: Option<String>,
    text: String,
    calls: Vec<CallParts>,
    /// Whether any chunk had `tool_calls` (then a legacy `function_call` beside them is a copy).
    saw_tool_calls: bool,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    chunks: usize,
    /// The position of the call of each wire `index`, and of each id: a lookup per piece that
    /// stays constant however many calls a (hostile) stream starts.
    by_index: HashMap<i64, usize>,
    by_id: HashMap<String, usize>,
}

impl StreamAssembler {
    /// An assembler before any chunk.
    pub fn new() -> Self {
        StreamAssembler::default()
    }

    /// Whether `[DONE]` has come: the response is whole, later data is ignored.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// Reads the `data` of one event (a JSON chunk, or `[DONE]`) and returns the deltas it
    /// carries. Blank data carries nothing.
    ///
    /// Each chunk is read once, into values borrowed from its text, whatever its shape. Fails
    /// with the error a chunk carries (`{"error": ...}`, or OpenRouter's
    /// `finish_reason: "error"`), and with [`ModelErrorKind::InvalidResponse`] for data that is
    /// not JSON (or has a key twice) or a chunk whose `choices`, `delta`, `tool_calls` or
    /// tool-call `index` have another shape.
    pub fn push(&mut self, data: &str) -> Result<Vec<ModelDelta>, ModelError> {
        let data = data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(Vec::new());
        }
        self.chunks += 1;
        let chunk = self.read(data)?;
        if let Some(error) = error_in(chunk.error.as_ref()) {
            return Err(error);
        }
        if chunk.object.as_ref().and_then(Field::as_str) == Some("error") {
            // vLLM's older errors: the chunk itself is the error object.
            let whole = serde_json::from_str(data).unwrap_or_default();
            return Err(body_error(&whole).unwrap_or_else(|| invalid("an error chunk")));
        }
        if self.id.is_none() {
            let id = chunk.id.as_ref().and_then(Field::as_str);
            self.id = id.filter(|id| !id.is_empty()).map(str::to_owned);
        }
        if self.model.is_none() {
            let model = chunk.model.as_ref().and_then(Field::as_str);
            self.model = model.filter(|m| !m.is_empty()).map(str::to_owned);
        }
        if let Some(usage) = chunk.usage.as_ref().and_then(usage) {
            self.usage = Some(usage);
        }
        let choices = match &chunk.choices {
            None => return Ok(Vec::new()),
            Some(Array::Read(choices)) => choices,
            Some(Array::Wrong) => {
                let what = ChunkNo(self.chunks);
                return Err(invalid(format!("`choices` of {what} is not an array")));
            }
        };
        // One answer is asked for (no `n`): the choice of index 0 (a choice without one, or
        // that is not an object, counts as index 0; one that is not an object holds nothing).
        let choice = choices.iter().find(|choice| match choice {
            Object::Read(choice) => choice_index(choice) == 0,
            Object::Wrong => true,
        });
        match choice {
            Some(Object::Read(choice)) => self.choice(choice),
            Some(Object::Wrong) | None => Ok(Vec::new()),
        }
    }

    /// Reads a chunk's text once, into borrowed typed values.
    fn read<'a>(&self, data: &'a str) -> Result<Chunk<'a>, ModelError> {
        let what = ChunkNo(self.chunks);
        match serde_json::from_str::<Object<Chunk<'a>>>(data) {
            Ok(Object::Read(chunk)) => Ok(chunk),
            Ok(Object::Wrong) => Err(invalid(format!(
                "{what} of the stream is not a JSON object: {}",
                cut(data)
            ))),
            Err(e) if e.is_data() => Err(invalid(format!(
                "{what} of the stream cannot be read ({e}): {}",
                cut(data)
            ))),
            Err(e) => Err(invalid(format!(
                "{what} of the stream is not JSON ({e}): {}",
                cut(data)
            ))),
        }
    }

    /// The choice of index 0 of a chunk: its error, its delta, its finish reason.
    fn choice(&mut self, choice: &Choice<'_>) -> Result<Vec<ModelDelta>, ModelError> {
        let what = ChunkNo(self.chunks);
        let finish = choice.finish_reason.as_ref().and_then(Field::as_str);
        if let Some(error) = choice_error(choice.error.as_ref(), finish) {
            return Err(error);
        }
        let mut deltas = Vec::new();
        match &choice.delta {
            None => {}
            Some(Object::Read(delta)) => {
                let calls = self.calls.len();
                self.delta(delta, &mut deltas)?;
                // A server that goes on after it said the answer was finished is broken: what
                // follows (a call cut before `[DONE]`, say) must not be run.
                if self.finish_reason.is_some() && (!deltas.is_empty() || self.calls.len() > calls)
                {
                    return Err(invalid(format!(
                        "{what} adds to the answer after its `finish_reason`"
                    )));
                }
            }
            Some(Object::Wrong) => {
                return Err(invalid(format!("`delta` of {what} is not an object")));
            }
        }
        if let Some(reason) = finish {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(deltas)
    }

    fn delta(&mut self, delta: &Delta<'_>, deltas: &mut Vec<ModelDelta>) -> Result<(), ModelError> {
        // Error messages name the chunk; they are written only when there is an error.
        let what = ChunkNo(self.chunks);
        for (key, field) in [("content", &delta.content), ("refusal", &delta.refusal)] {
            let text = match field {
                None => None,
                Some(Field::Str(text)) => Some(Cow::Borrowed(text.as_ref())),
                Some(Field::Other(value)) => {
                    content_text(Some(value), || format!("delta.{key} of {what}"))?.map(Cow::Owned)
                }
            };
            if let Some(text) = text.filter(|text| !text.is_empty()) {
                self.text.push_str(&text);
                deltas.push(ModelDelta::Text {
                    text: text.into_owned(),
                });
            }
        }
        match &delta.tool_calls {
            None => {
                // The legacy form, only from a server that never sent `tool_calls`
                // (llama-cpp-python sends both, the same call twice).
                if let Some(Object::Read(function)) = &delta.function_call {
                    if !self.saw_tool_calls {
                        let position = match self.calls.len() {
                            0 => self.new_call(None),
                            n => n - 1,
                        };
                        self.call_piece(position, None, Some(function), deltas);
                    }
                }
            }
            Some(Array::Read(pieces)) => {
                self.saw_tool_calls = true;
                for piece in pieces {
                    self.tool_call_piece(piece, what, deltas)?;
                }
            }
            Some(Array::Wrong) => {
                return Err(invalid(format!(
                    "`delta.tool_calls` of {what} is not an array"
                )));
            }
        }
        Ok(())
    }

    fn tool_call_piece(
        &mut self,
        piece: &Object<Piece<'_>>,
        what: ChunkNo,
        deltas: &mut Vec<ModelDelta>,
    ) -> Result<(), ModelError> {
        let Object::Read(piece) = piece else {
            return Err(invalid(format!("a tool call of {what} is not an object")));
        };
        let wire_index = match &piece.index {
            None => None,
            Some(index) => Some(integer(index).ok_or_else(|| {
                invalid(format!(
                    "a tool call of {what} has an `index` that is not an integer"
                ))
            })?),
        };
        let id = piece
            .id
            .as_ref()
            .and_then(Field::as_str)
            .filter(|id| !id.is_empty());
        let function = match &piece.function {
            None => None,
            Some(Object::Read(function)) => Some(function),
            Some(Object::Wrong) => None,
        };
        let position = match wire_index {
            Some(index) => match self.by_index.get(&index) {
                Some(&position) => position,
                None => self.new_call(Some(index)),
            },
            None => self.unindexed_position(id, function),
        };
        if let Some(Object::Wrong) = &piece.function {
            return Err(invalid(format!(
                "a tool call of {what} has a `function` that is not an object"
            )));
        }
        self.call_piece(position, id, function, deltas);
        Ok(())
    }

    /// The call a piece without an `index` belongs to: the call with its id; else a new call
    /// when the piece brings a new id, or a name after the last call got its arguments (two
    /// whole calls in a row); else the last call.
    fn unindexed_position(&mut self, id: Option<&str>, function: Option<&Function<'_>>) -> usize {
        let name = function
            .and_then(|f| f.name.as_ref())
            .and_then(Field::as_str)
            .is_some_and(|n| !n.is_empty());
        let known = id.and_then(|id| self.by_id.get(id).copied());
        match (known, self.calls.last()) {
            (Some(position), _) => position,
            (None, None) => self.new_call(None),
            (None, Some(last)) => {
                let fresh = last.id.is_empty() && last.name.is_empty();
                let starts_new = match id {
                    Some(_) => !fresh,
                    None => name && !last.name.is_empty() && !last.arguments.is_empty(),
                };
                if starts_new {
                    self.new_call(None)
                } else {
                    self.calls.len() - 1
                }
            }
        }
    }

    fn new_call(&mut self, wire_index: Option<i64>) -> usize {
        self.calls.push(CallParts {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        let position = self.calls.len() - 1;
        if let Some(index) = wire_index {
            self.by_index.insert(index, position);
        }
        position
    }

    /// Adds a piece (id, function name, argument text) to the call at `position`, and its delta
    /// when it brings anything.
    fn call_piece(
        &mut self,
        position: usize,
        id: Option<&str>,
        function: Option<&Function<'_>>,
        deltas: &mut Vec<ModelDelta>,
    ) {
        let arguments = match function.and_then(|f| f.arguments.as_ref()) {
            None => Cow::Borrowed(""),
            Some(Field::Str(text)) => Cow::Borrowed(text.as_ref()),
            Some(Field::Other(value)) => Cow::Owned(arguments_text(value)),
        };
        let name = function
            .and_then(|f| f.name.as_ref())
            .and_then(Field::as_str);
        let call = &mut self.calls[position];
        let mut new_id = None;
        if let Some(id) = id {
            if call.id.is_empty() {
                call.id = id.to_owned();
                new_id = Some(id.to_owned());
                self.by_id.entry(id.to_owned()).or_insert(position);
            }
        }
        let mut new_name = None;
        if let Some(name) = name {
            // A repeated name is the same name (llama-cpp-python); another one is a piece of it.
            if !name.is_empty() && call.name != name {
                call.name.push_str(name);
                new_name = Some(name.to_owned());
            }
        }
        call.arguments.push_str(&arguments);
        if new_id.is_some() || new_name.is_some() || !arguments.is_empty() {
            deltas.push(ModelDelta::ToolCall {
                index: position,
                id: new_id,
                name: new_name,
                arguments: arguments.into_owned(),
            });
        }
    }

    /// The whole response. Fails with [`ModelErrorKind::Transport`] if neither a `finish_reason`
    /// nor `[DONE]` came (the stream was cut), or if `[DONE]` did not come and a tool call's
    /// argument text is blank or not whole JSON (the stream may have been cut inside it: the call
    /// is not run on a guess); and with [`ModelErrorKind::InvalidResponse`] if a tool call never
    /// got a name.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ModelError::new(
                ModelErrorKind::Transport,
                format!(
                    "the response stream ended before it was complete (no `finish_reason` and no \
                     `[DONE]` after {} chunks, {} characters of text and {} tool calls)",
                    self.chunks,
                    self.text.chars().count(),
                    self.calls.len()
                ),
            ));
        }
        if !self.done {
            let cut = self.calls.iter().position(|call| {
                call.arguments.trim().is_empty()
                    || serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_err()
            });
            if let Some(position) = cut {
                return Err(ModelError::new(
                    ModelErrorKind::Transport,
                    format!(
                        "the response stream ended before `[DONE]` with the arguments of tool \
                         call {position} incomplete"
                    ),
                ));
            }
        }
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| {
                if call.name.is_empty() {
                    return Err(invalid(format!(
                        "streamed tool call {position} never got a function name"
                    )));
                }
                Ok(ToolCall::raw(call.id, call.name, call.arguments))
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        Ok(ModelResponse {
            text: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            finish_reason: self.finish_reason.as_deref().map(finish_reason),
            usage: self.usage,
            id: self.id,
            model: self.model,
        })
    }
}

impl Assemble for StreamAssembler {
    /// An event named `error` is an error (its data may not be OpenAI's error shape); any other
    /// event is a chunk.
    fn event(&mut self, name: &str, data: &str) -> Result<Vec<ModelDelta>, ModelError> {
        if name == "error" {
            return Err(event_error(data));
        }
        self.push(data)
    }

    fn is_complete(&self) -> bool {
        StreamAssembler::is_complete(self)
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        StreamAssembler::finish(self)
    }
}

/// A choice's `index`: one that is not a non-negative integer (or is missing) counts as 0.
fn choice_index(choice: &Choice<'_>) -> u64 {
    match &choice.index {
        Some(Field::Other(index)) => index.as_u64().unwrap_or(0),
        Some(Field::Str(_)) | None => 0,
    }
}

/// A field's integer value, if it is an integer that fits an `i64`.
fn integer(field: &Field<'_>) -> Option<i64> {
    match field {
        Field::Other(value) => value.as_i64(),
        Field::Str(_) => None,
    }
}

/// "chunk N", for error messages, written only when one is.
#[derive(Clone, Copy)]
struct ChunkNo(usize);

impl fmt::Display for ChunkNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "chunk {}", self.0)
    }
}
