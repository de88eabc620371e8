//! [`ScriptedModel`]: a model that replays scripted turns, for tests and examples.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::message::ToolCall;
use crate::model::request::{DeltaSink, Model, ModelDelta, ModelInfo, ModelRequest, ModelResponse};

/// A model that replays scripted turns, and records the requests it receives when asked to
/// ([`record_requests`](ScriptedModel::record_requests)).
///
/// Clones share the script and the record, so a test can keep one handle and give another to the agent.
/// When the script runs out, `respond` fails with a [`ModelError`] of kind `other`. A scripted
/// [`error`](ScriptedModel::error) turn fails that request, as a provider would (the agent retries
/// a retryable one). With [`streaming`](ScriptedModel::streaming), a streamed run gets each turn
/// in deltas, as from a provider's stream.
///
/// ```
/// use phaseo_agent::ScriptedModel;
/// use serde_json::json;
///
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "get_status", json!({"service": "api"}))
///     .text("The API is healthy.");
/// assert_eq!(model.remaining(), 2);
/// ```
#[derive(Clone, Default)]
pub struct ScriptedModel {
    inner: Arc<Mutex<Script>>,
}

#[derive(Default)]
struct Script {
    streaming: bool,
    turns: VecDeque<Result<ModelResponse, ModelError>>,
    /// The requests received, when recording is on (`None`: off).
    requests: Option<Vec<ModelRequest<'static>>>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a turn.
    ///
    /// ```
    /// use phaseo_agent::{Agent, FinishReason, ModelResponse, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let cut_short = ModelResponse::text("The answer is").finish_reason(FinishReason::Length);
    /// let model = ScriptedModel::new().turn(cut_short);
    /// let agent = Agent::builder("a").model(model).build()?;
    /// assert_eq!(agent.run("What is the answer?").await?.output(), Some("The answer is"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn turn(self, response: ModelResponse) -> Self {
        self.lock().turns.push_back(Ok(response));
        self
    }

    /// Streams each turn when the run is streamed: its text a word at a time (as
    /// [`Event::ModelDelta`](crate::Event::ModelDelta) events), each call's arguments in pieces of up
    /// to 16 bytes. Off by default, so a streamed run's events are one per turn.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use phaseo_agent::{Agent, Event, ModelDelta, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ScriptedModel::new().text("Hello there!").streaming(true);
    /// let agent = Agent::builder("a").model(model).build().unwrap();
    /// let text: String = agent
    ///     .run("Hi").stream()
    ///     .filter_map(|event| async move {
    ///         match event {
    ///             Event::ModelDelta { delta: ModelDelta::Text { text }, .. } => Some(text),
    ///             _ => None,
    ///         }
    ///     })
    ///     .collect()
    ///     .await;
    /// assert_eq!(text, "Hello there!");
    /// # }
    /// ```
    pub fn streaming(self, on: bool) -> Self {
        self.lock().streaming = on;
        self
    }

    /// Appends a failed request: the model answers it with `error`.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ModelError, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = ScriptedModel::new()
    ///     .error(ModelError::from_status(529, "overloaded"))
    ///     .text("Hello!");
    /// let agent = Agent::builder("a").model(model).build().unwrap();
    /// // The agent retries a retryable error (after a short, jittered wait).
    /// assert_eq!(agent.run("Hi").await.unwrap().output(), Some("Hello!"));
    /// # }
    /// ```
    pub fn error(self, error: ModelError) -> Self {
        self.lock().turns.push_back(Err(error));
        self
    }

    /// Appends a final text turn.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let agent = Agent::builder("a").model(ScriptedModel::new().text("Hello!")).build()?;
    /// assert_eq!(agent.run("Hi").await?.output(), Some("Hello!"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn text(self, text: impl Into<String>) -> Self {
        self.turn(ModelResponse::text(text))
    }

    /// Appends a turn with one tool call.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let double = Tool::new("double", "Double a number", json!({"type": "object"}),
    ///     |input, _| Ok(json!(input["n"].as_i64().unwrap_or(0) * 2)));
    /// let model = ScriptedModel::new().tool_call("call_1", "double", json!({"n": 21})).text("42.");
    /// let agent = Agent::builder("a").model(model).tool(double).build()?;
    /// let done = agent.run("Double 21").await?;
    /// assert_eq!(done.state.tool_result("call_1"), Some("42"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_call(self, id: &str, tool: &str, arguments: Value) -> Self {
        self.turn(ModelResponse::tool_calls([ToolCall::new(
            id, tool, arguments,
        )]))
    }

    /// Appends a turn with several tool calls.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolCall};
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let status = Tool::new("get_status", "Service status", json!({"type": "object"}),
    ///     |input, _| Ok(json!({"service": input["service"], "status": "up"})));
    /// let model = ScriptedModel::new()
    ///     .tool_calls([
    ///         ToolCall::new("call_1", "get_status", json!({"service": "api"})),
    ///         ToolCall::new("call_2", "get_status", json!({"service": "db"})),
    ///     ])
    ///     .text("Both are up.");
    /// let agent = Agent::builder("ops").model(model).tool(status).build()?;
    /// let done = agent.run("Status of api and db?").await?;
    /// assert_eq!(done.state.steps().len(), 2);
    /// assert_eq!(done.state.turns(), 2); // both calls were one turn
    /// # Ok(())
    /// # }
    /// ```
    pub fn tool_calls(self, calls: impl IntoIterator<Item = ToolCall>) -> Self {
        self.turn(ModelResponse::tool_calls(calls))
    }

    /// Keeps a copy of every request from now on, for [`requests`](ScriptedModel::requests) to
    /// read. Off by default: a request borrows the run's conversation, so keeping it means a deep
    /// copy of the whole conversation and every tool's schema on each turn, which a test that
    /// only needs the script should not pay for.
    ///
    /// ```
    /// use phaseo_agent::{Agent, Message, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().text("Hello!").record_requests();
    /// assert!(model.requests().is_empty());
    /// let agent = Agent::builder("a").model(model.clone()).build()?; // clones share the record
    /// agent.run("Hi").await?;
    /// assert_eq!(model.requests().len(), 1);
    /// assert_eq!(model.requests()[0].messages, vec![Message::User { content: "Hi".into() }]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn record_requests(self) -> Self {
        self.lock().requests.get_or_insert_with(Vec::new);
        self
    }

    /// Every request received since [`record_requests`](ScriptedModel::record_requests), in order.
    ///
    /// # Panics
    ///
    /// When the model does not record requests: a test that reads them must ask for them, and
    /// an empty list would read as "the model was never asked".
    ///
    /// ```should_panic
    /// use phaseo_agent::ScriptedModel;
    ///
    /// let model = ScriptedModel::new().text("Hello!");
    /// model.requests(); // panics: build it with `.record_requests()`
    /// ```
    pub fn requests(&self) -> Vec<ModelRequest<'static>> {
        match &self.lock().requests {
            Some(requests) => requests.clone(),
            None => panic!(
                "this ScriptedModel does not record requests: build it with `.record_requests()`"
            ),
        }
    }

    /// How many scripted turns are left.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let model = ScriptedModel::new().text("One.").text("Two.");
    /// let agent = Agent::builder("a").model(model.clone()).build()?;
    /// agent.run("Count").await?;
    /// assert_eq!(model.remaining(), 1); // the run used one turn
    /// # Ok(())
    /// # }
    /// ```
    pub fn remaining(&self) -> usize {
        self.lock().turns.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Script> {
        // A panic while holding this lock cannot leave the script half-written, so recover.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ScriptedModel {
    fn next(&self, request: &ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let mut script = self.lock();
        if let Some(requests) = &mut script.requests {
            requests.push(request.clone().into_owned());
        }
        script.turns.pop_front().unwrap_or_else(|| {
            Err(ModelError::new(
                ModelErrorKind::Other,
                "the scripted model has no turns left",
            ))
        })
    }
}

impl Model for ScriptedModel {
    /// A script in this process: the provider `scripted`, the model `scripted`.
    fn describe(&self) -> ModelInfo<'_> {
        ModelInfo::new("scripted").model("scripted")
    }

    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(futures::future::ready(self.next(request)))
    }

    fn respond_streaming<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
        deltas: &'a DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let streaming = self.lock().streaming;
        let next = self.next(request);
        if let (true, Ok(response)) = (streaming, &next) {
            for word in response.text.as_deref().unwrap_or("").split_inclusive(' ') {
                deltas.text(word);
            }
            for (index, call) in response.tool_calls.iter().enumerate() {
                deltas.send(ModelDelta::ToolCall {
                    index,
                    id: Some(call.id.clone()),
                    name: Some(call.name.clone()),
                    arguments: String::new(),
                });
                let mut rest = call.arguments.as_str();
                while !rest.is_empty() {
                    let mut end = rest.len().min(16);
                    while !rest.is_char_boundary(end) {
                        end += 1;
                    }
                    let (piece, tail) = rest.split_at(end);
                    deltas.send(ModelDelta::ToolCall {
                        index,
                        id: None,
                        name: None,
                        arguments: piece.to_owned(),
                    });
                    rest = tail;
                }
            }
        }
        Box::pin(futures::future::ready(next))
    }
}
