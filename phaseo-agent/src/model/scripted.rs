//! [`ScriptedModel`]: a model that replays scripted turns, for tests and examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::AgentError;
use crate::model::message::ToolCall;
use crate::model::request::{Model, ModelRequest, ModelResponse};

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
