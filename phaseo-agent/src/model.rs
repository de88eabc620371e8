//! The [`Model`] trait, the messages a run exchanges with it, and [`ScriptedModel`] for tests and examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::AgentError;

/// One tool call made by a model: the id the model gave it, the tool id, and the raw argument text.
///
/// Arguments are kept as the model sent them (a JSON text, possibly malformed or empty); the runtime
/// parses and validates them before any tool code runs.
///
/// ```
/// use phaseo_agent::ToolCall;
/// use serde_json::json;
///
/// let call = ToolCall::new("call_1", "get_status", json!({"service": "api"}));
/// assert_eq!(call.arguments, r#"{"service":"api"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id, unique within a run; decisions are bound to it.
    pub id: String,
    /// The id of the tool called.
    pub name: String,
    /// The arguments as a JSON text.
    pub arguments: String,
}

impl ToolCall {
    /// A call with JSON arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self::raw(id, name, arguments.to_string())
    }

    /// A call with argument text exactly as a model might send it (malformed text included).
    pub fn raw(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A message of the conversation a run keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The user's input.
    User {
        /// The text.
        content: String,
    },
    /// A model turn: text, tool calls, or both.
    Assistant {
        /// The text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The tool calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, as the model sees it.
    Tool {
        /// The call this answers.
        call_id: String,
        /// The tool id.
        name: String,
        /// The result text (JSON); an error reads `{"error": "..."}`.
        content: String,
    },
}

/// A tool as the model sees it: id, description and parameter schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool id.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// Which tools the model may or must call on a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "tool")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must not call tools.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// A model name override for this turn, if any (see next-turn overrides).
    pub model: Option<String>,
    /// The agent's instructions (system prompt).
    pub instructions: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Sampling temperature, if set.
    pub temperature: Option<f32>,
    /// Maximum output tokens, if set.
    pub max_output_tokens: Option<u32>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
}

/// A model's answer to one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Text, if any. A response with no tool calls ends the run with this text as its output.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

impl ModelResponse {
    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Self {
        ModelResponse {
            text: Some(text.into()),
            tool_calls: Vec::new(),
        }
    }

    /// A turn that calls tools.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        ModelResponse {
            text: None,
            tool_calls: calls.into_iter().collect(),
        }
    }
}

/// A language model. Object-safe, so an agent holds an `Arc<dyn Model>`.
///
/// Implement it for your provider's client; the future it returns must be `Send`:
///
/// ```
/// use futures::future::BoxFuture;
/// use phaseo_agent::{AgentError, Model, ModelRequest, ModelResponse};
///
/// struct Echo;
///
/// impl Model for Echo {
///     fn respond<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, Result<ModelResponse, AgentError>> {
///         Box::pin(async move { Ok(ModelResponse::text(format!("{} messages", request.messages.len()))) })
///     }
/// }
/// ```
pub trait Model: Send + Sync {
    /// Answers one request.
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, AgentError>>;
}

impl<M: Model + ?Sized> Model for Arc<M> {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, AgentError>> {
        (**self).respond(request)
    }
}

/// A model that replays scripted turns and records every request it receives.
///
/// Clones share the script and the record, so a test can keep one handle and give another to the agent.
/// When the script runs out, `respond` fails with [`AgentError::Model`].
///
/// ```
/// use phaseo_agent::ScriptedModel;
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "get_status", json!({"service": "api"}))
///     .text("The API is healthy.");
/// assert_eq!(model.remaining(), 2);
/// assert!(model.requests().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct ScriptedModel {
    inner: Arc<Mutex<Script>>,
}

#[derive(Default)]
struct Script {
    turns: VecDeque<ModelResponse>,
    requests: Vec<ModelRequest>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a turn.
    pub fn turn(self, response: ModelResponse) -> Self {
        self.lock().turns.push_back(response);
        self
    }

    /// Appends a final text turn.
    pub fn text(self, text: impl Into<String>) -> Self {
        self.turn(ModelResponse::text(text))
    }

    /// Appends a turn with one tool call.
    pub fn tool_call(self, id: &str, tool: &str, arguments: Value) -> Self {
        self.turn(ModelResponse::tool_calls([ToolCall::new(
            id, tool, arguments,
        )]))
    }

    /// Appends a turn with several tool calls.
    pub fn tool_calls(self, calls: impl IntoIterator<Item = ToolCall>) -> Self {
        self.turn(ModelResponse::tool_calls(calls))
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// How many scripted turns are left.
    pub fn remaining(&self) -> usize {
        self.lock().turns.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        // A panic while holding this lock cannot leave the script half-written, so recover.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Model for ScriptedModel {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, AgentError>> {
        let mut script = self.lock();
        script.requests.push(request.clone());
        let next = script
            .turns
            .pop_front()
            .ok_or_else(|| AgentError::Model("the scripted model has no turns left".to_string()));
        Box::pin(futures::future::ready(next))
    }
}
