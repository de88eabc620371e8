//! One model turn: the [`Model`] trait, [`ModelRequest`] and [`ModelResponse`], the tools as the
//! model sees them, and [`TurnParams`], the changes tools make to the next request.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AgentError;
use crate::model::message::{Message, ToolCall};

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

/// Changes to the next model request, set by tools (see `Tool::next_turn`). Unset fields keep the
/// agent's values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnParams {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Maximum output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Instructions (system prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Tool choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// The ids of the tools offered to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_tools: Option<Vec<String>>,
}

impl TurnParams {
    pub(crate) fn is_empty(&self) -> bool {
        *self == TurnParams::default()
    }
}
