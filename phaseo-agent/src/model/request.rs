//! One model turn: the [`Model`] trait, [`ModelRequest`] and [`ModelResponse`], the tools as the
//! model sees them, and [`TurnParams`], the changes tools make to the next request.

use std::borrow::Cow;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ModelError;
use crate::model::message::{Message, ToolCall};

/// A tool as the model sees it: id, description and parameter schema.
///
/// ```
/// use phaseo_agent::{Agent, ScriptedModel, Tool, ToolDefinition};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let ping = Tool::new("ping", "Check that a host answers",
///     json!({"type": "object", "properties": {"host": {"type": "string"}}}), |_, _| Ok(json!("pong")));
/// let model = ScriptedModel::new().text("Nothing to ping.").record_requests();
/// let agent = Agent::builder("ops").model(model.clone()).tool(ping).build()?;
/// agent.run("Hello").await?;
/// // What the model was told about the tool.
/// assert_eq!(model.requests()[0].tools, vec![ToolDefinition::new(
///     "ping",
///     "Check that a host answers",
///     json!({"type": "object", "properties": {"host": {"type": "string"}}}),
/// )]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolDefinition {
    /// The tool id.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
    /// Whether the provider should hold the model to the schema exactly (see `Tool::strict`);
    /// a provider converts `parameters` to its strict dialect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
}

impl ToolDefinition {
    /// A tool as a model is told of it, not strict.
    ///
    /// ```
    /// use phaseo_agent::ToolDefinition;
    /// use phaseo_agent::serde_json::json;
    ///
    /// let ping = ToolDefinition::new("ping", "Check that a host answers", json!({"type": "object"}));
    /// assert!(!ping.strict);
    /// assert!(ping.strict(true).strict);
    /// ```
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolDefinition {
            name: name.into(),
            description: description.into(),
            parameters,
            strict: false,
        }
    }

    /// Whether the provider is asked to hold the model to the schema (see the field).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }
}

/// Which tools the model may or must call on a turn.
///
/// A tool sets it for the next request with [`TurnParams::tool_choice`] (see `Tool::next_turn`).
/// As serde data it is tagged by `type`, with the tool's id under `tool`.
///
/// ```
/// use phaseo_agent::ToolChoice;
/// use serde_json::json;
///
/// assert_eq!(ToolChoice::default(), ToolChoice::Auto);
/// assert_eq!(serde_json::to_value(ToolChoice::Required).unwrap(), json!({"type": "required"}));
/// assert_eq!(
///     serde_json::to_value(ToolChoice::Tool("search".into())).unwrap(),
///     json!({"type": "tool", "tool": "search"})
/// );
/// ```
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
///
/// A [`Model`] gets one per turn: the agent's instructions, the conversation so far and the tools
/// offered, with the turn's settings (after any next-turn overrides).
///
/// The request borrows what the run already holds: the conversation from the run's state, the
/// tool definitions the agent built once, the instructions and ids from the agent; nothing is
/// copied per turn. Its text and list fields are [`Cow`]s, so a request can also own its data: one
/// built by hand (for a provider's pure mapping functions, say) or kept after the run with
/// [`into_owned`](ModelRequest::into_owned), as
/// [`ScriptedModel::record_requests`](crate::ScriptedModel::record_requests) does. A `Cow` reads
/// like what it holds (`&str`, `&[Message]`) and compares with it.
///
/// ```
/// use phaseo_agent::{Agent, Message, ScriptedModel, ToolChoice};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let model = ScriptedModel::new().text("Hello!").record_requests();
/// let agent = Agent::builder("greeter").instructions("Be brief.").model(model.clone()).build()?;
/// agent.run("Hi").await?;
///
/// let request = &model.requests()[0];
/// assert_eq!(request.instructions, "Be brief.");
/// assert_eq!(request.messages, vec![Message::User { content: "Hi".into() }]);
/// assert!(request.tools.is_empty());
/// assert_eq!(request.tool_choice, ToolChoice::Auto);
/// # Ok(())
/// # }
/// ```
///
/// Built by hand (to test a [`Model`] of your own), a request starts from its messages, and its
/// other fields are set with methods of the same names (`.into()` turns a `String`, `&str`, slice
/// or `Vec` into a `Cow`):
///
/// ```
/// use phaseo_agent::{Message, ModelRequest};
///
/// let request = ModelRequest::new(vec![Message::user("Hi")])
///     .instructions("Be brief.")
///     .temperature(0.2);
/// assert_eq!(request.temperature, Some(0.2));
/// assert_eq!(request.messages.len(), 1);
/// let kept: ModelRequest<'static> = request.into_owned();
/// assert_eq!(kept.instructions, "Be brief.");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// A model name override for this turn, if any (see next-turn overrides).
    pub model: Option<Cow<'a, str>>,
    /// The agent's instructions (system prompt).
    pub instructions: Cow<'a, str>,
    /// The conversation so far.
    pub messages: Cow<'a, [Message]>,
    /// The tools the model may call.
    pub tools: Cow<'a, [ToolDefinition]>,
    /// Sampling temperature, if set (else the provider's default, if any).
    pub temperature: Option<f32>,
    /// Nucleus sampling mass (`top_p`), if set (else the provider's default, if any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Maximum output tokens, if set (else the provider's default, if any).
    pub max_output_tokens: Option<u32>,
    /// Stop sequences, if set (else the provider's default, if any; an empty list sends none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Cow<'a, [String]>>,
    /// The sampling seed, if set (else the provider's default, if any), for providers that
    /// have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Whether the model may make several tool calls in one turn; `None` leaves it to the
    /// provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Which run, agent and turn this request is for: for provider metadata and tracing.
    #[serde(default)]
    pub meta: RequestMeta<'a>,
}

impl<'a> ModelRequest<'a> {
    /// A request of these messages, with every other field at its default (no instructions, no
    /// tools, automatic tool choice, the provider's own sampling).
    pub fn new(messages: impl Into<Cow<'a, [Message]>>) -> Self {
        ModelRequest {
            messages: messages.into(),
            ..ModelRequest::default()
        }
    }

    /// The model name; unset, the provider's own.
    pub fn model(mut self, model: impl Into<Cow<'a, str>>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The conversation so far.
    pub fn messages(mut self, messages: impl Into<Cow<'a, [Message]>>) -> Self {
        self.messages = messages.into();
        self
    }

    /// The instructions (system prompt).
    pub fn instructions(mut self, instructions: impl Into<Cow<'a, str>>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// The tools offered to the model.
    pub fn tools(mut self, tools: impl Into<Cow<'a, [ToolDefinition]>>) -> Self {
        self.tools = tools.into();
        self
    }

    /// The sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The nucleus sampling mass (`top_p`).
    pub fn top_p(mut self, top_p: f32) -> Self {
        self.top_p = Some(top_p);
        self
    }

    /// The most output tokens.
    pub fn max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// The stop sequences (an empty list: none, whatever the provider's default).
    pub fn stop(mut self, sequences: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let sequences: Vec<String> = sequences.into_iter().map(Into::into).collect();
        self.stop = Some(Cow::Owned(sequences));
        self
    }

    /// The sampling seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Which tools the model may or must call.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = choice;
        self
    }

    /// Whether the model may call several tools in one turn; unset, the provider's default.
    pub fn parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.parallel_tool_calls = Some(allowed);
        self
    }

    /// Which run, agent and turn the request belongs to.
    pub fn meta(mut self, meta: RequestMeta<'a>) -> Self {
        self.meta = meta;
        self
    }
    /// The same request, owning all its data (a deep copy of whatever it borrows), so it can be
    /// kept after the run goes on.
    ///
    /// ```
    /// use phaseo_agent::{Message, ModelRequest};
    ///
    /// let conversation = vec![Message::User { content: "Hi".into() }];
    /// let borrowed = ModelRequest::new(conversation.as_slice());
    /// let kept = borrowed.into_owned();
    /// drop(conversation);
    /// assert_eq!(kept.messages, vec![Message::User { content: "Hi".into() }]);
    /// ```
    pub fn into_owned(self) -> ModelRequest<'static> {
        ModelRequest {
            model: self.model.map(|m| Cow::Owned(m.into_owned())),
            instructions: Cow::Owned(self.instructions.into_owned()),
            messages: Cow::Owned(self.messages.into_owned()),
            tools: Cow::Owned(self.tools.into_owned()),
            temperature: self.temperature,
            top_p: self.top_p,
            max_output_tokens: self.max_output_tokens,
            stop: self.stop.map(|stop| Cow::Owned(stop.into_owned())),
            seed: self.seed,
            tool_choice: self.tool_choice,
            parallel_tool_calls: self.parallel_tool_calls,
            meta: self.meta.into_owned(),
        }
    }
}

/// Which run, agent and turn a [`ModelRequest`] is for. Providers may send it as request
/// metadata (the OpenAI provider sends `user` only if you ask; see its docs); custom models and
/// tracing can read it. Its ids are borrowed from the run, like the rest of the request.
///
/// ```
/// use phaseo_agent::{Agent, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "ping", json!({}))
///     .text("It answers.")
///     .record_requests();
/// let agent = Agent::builder("ops").model(model.clone()).tool(ping).build()?;
/// let done = agent.run("Ping it").await?;
///
/// let second = &model.requests()[1].meta;
/// assert_eq!(second.agent_id, "ops");
/// assert_eq!(second.run_id, done.state.run_id());
/// assert_eq!(second.turn, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RequestMeta<'a> {
    /// The run's id.
    pub run_id: Cow<'a, str>,
    /// The agent's id.
    pub agent_id: Cow<'a, str>,
    /// The turn's index in the run (0 for the first).
    pub turn: usize,
}

impl<'a> RequestMeta<'a> {
    /// The ids of a run's request: its run, its agent, and the turn's index (0 for the first).
    pub fn new(
        run_id: impl Into<Cow<'a, str>>,
        agent_id: impl Into<Cow<'a, str>>,
        turn: usize,
    ) -> Self {
        RequestMeta {
            run_id: run_id.into(),
            agent_id: agent_id.into(),
            turn,
        }
    }

    /// The same ids, owned.
    ///
    /// ```
    /// use phaseo_agent::RequestMeta;
    ///
    /// let run_id = String::from("run_1");
    /// let meta = RequestMeta::new(run_id.as_str(), "ops", 0);
    /// let kept: RequestMeta<'static> = meta.into_owned();
    /// drop(run_id);
    /// assert_eq!(kept.run_id, "run_1");
    /// ```
    pub fn into_owned(self) -> RequestMeta<'static> {
        RequestMeta {
            run_id: Cow::Owned(self.run_id.into_owned()),
            agent_id: Cow::Owned(self.agent_id.into_owned()),
            turn: self.turn,
        }
    }
}

/// Why the model stopped.
///
/// ```
/// use phaseo_agent::{FinishReason, ModelResponse};
/// use serde_json::json;
///
/// assert_eq!(ModelResponse::text("Done.").finish_reason, Some(FinishReason::Stop));
/// assert_eq!(serde_json::to_value(FinishReason::ToolCalls).unwrap(), "tool_calls");
/// // A reason this crate does not know keeps the provider's word.
/// let other: FinishReason = serde_json::from_value(json!({"other": "pause_turn"})).unwrap();
/// assert_eq!(other, FinishReason::Other("pause_turn".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It stopped to call tools.
    ToolCalls,
    /// It reached the output token limit: the text or a call's arguments may be cut.
    Length,
    /// The provider's content filter stopped it.
    ContentFilter,
    /// A reason this crate does not know, as the provider wrote it.
    Other(String),
}

/// Tokens a response used, as the provider counted them.
///
/// Usages add up (saturating); a run's total is [`RunResult::usage`](crate::RunResult::usage).
///
/// ```
/// use phaseo_agent::Usage;
///
/// let first = Usage::new(100, 20).cached_input_tokens(64);
/// let second = Usage::new(130, 5);
/// let total = first + second;
/// assert_eq!((total.input_tokens, total.output_tokens, total.cached_input_tokens), (230, 25, Some(64)));
/// assert!(Usage::default().is_zero());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens of input (the prompt: instructions, conversation, tools).
    pub input_tokens: u64,
    /// Tokens of output.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the provider's prompt cache (part of the input), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Output tokens spent on reasoning (part of the output), when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_output_tokens: Option<u64>,
}

impl Usage {
    /// Input and output tokens; the counts a provider may add (cached input) are unset.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            cached_input_tokens: None,
            cache_creation_input_tokens: None,
            reasoning_output_tokens: None,
        }
    }

    /// The input tokens read from the provider's prompt cache.
    pub fn cached_input_tokens(mut self, tokens: u64) -> Self {
        self.cached_input_tokens = Some(tokens);
        self
    }

    /// The input tokens written to the provider's prompt cache.
    pub fn cache_creation_input_tokens(mut self, tokens: u64) -> Self {
        self.cache_creation_input_tokens = Some(tokens);
        self
    }

    /// The output tokens spent on reasoning.
    pub fn reasoning_output_tokens(mut self, tokens: u64) -> Self {
        self.reasoning_output_tokens = Some(tokens);
        self
    }

    /// Whether no tokens are counted.
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        // A count one side lacks adds as zero; unknown on both sides stays unknown.
        let either = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cached_input_tokens: either(self.cached_input_tokens, other.cached_input_tokens),
            cache_creation_input_tokens: either(
                self.cache_creation_input_tokens,
                other.cache_creation_input_tokens,
            ),
            reasoning_output_tokens: either(
                self.reasoning_output_tokens,
                other.reasoning_output_tokens,
            ),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

/// A model's answer to one request.
///
/// ```
/// use phaseo_agent::{FinishReason, ModelResponse, ToolCall};
/// use serde_json::json;
///
/// let answer = ModelResponse::text("The API is healthy.");
/// assert_eq!(answer.text.as_deref(), Some("The API is healthy."));
///
/// let calls = ModelResponse::tool_calls([ToolCall::new("call_1", "get_status", json!({"service": "api"}))]);
/// assert_eq!(calls.finish_reason, Some(FinishReason::ToolCalls));
/// assert!(!calls.is_empty());
/// assert!(ModelResponse::text("  ").is_empty()); // whitespace only: an empty answer
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelResponse {
    /// Text, if any. A response with no tool calls ends the run with this text as its output.
    pub text: Option<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Tokens used, when the provider says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The provider's id of this response, when it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The model that answered, as the provider names it (a dated version of the model asked
    /// for, say), when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl ModelResponse {
    /// A response of this text and these calls, with no finish reason, usage or id (set them with
    /// the methods of the same names). Most test doubles want [`text`](Self::text) or
    /// [`tool_calls`](Self::tool_calls) instead.
    ///
    /// ```
    /// use phaseo_agent::{FinishReason, ModelResponse, ToolCall, Usage};
    /// use phaseo_agent::serde_json::json;
    ///
    /// let turn = ModelResponse::new(Some("Checking.".into()), [ToolCall::new("c1", "get_status", json!({}))])
    ///     .finish_reason(FinishReason::ToolCalls)
    ///     .usage(Usage::new(120, 8))
    ///     .id("resp_1");
    /// assert_eq!(turn.text.as_deref(), Some("Checking."));
    /// assert_eq!(turn.id.as_deref(), Some("resp_1"));
    /// ```
    pub fn new(text: Option<String>, tool_calls: impl IntoIterator<Item = ToolCall>) -> Self {
        ModelResponse {
            text,
            tool_calls: tool_calls.into_iter().collect(),
            ..ModelResponse::default()
        }
    }

    /// The same response, with why the model stopped.
    pub fn finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = Some(reason);
        self
    }

    /// The same response, with the provider's id of it.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The same response, with the name of the model that answered.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// A final text answer.
    pub fn text(text: impl Into<String>) -> Self {
        ModelResponse {
            text: Some(text.into()),
            finish_reason: Some(FinishReason::Stop),
            ..ModelResponse::default()
        }
    }

    /// A turn that calls tools.
    pub fn tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> Self {
        ModelResponse {
            tool_calls: calls.into_iter().collect(),
            finish_reason: Some(FinishReason::ToolCalls),
            ..ModelResponse::default()
        }
    }

    /// The same response, with its token usage.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ModelResponse, ScriptedModel, Usage};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// let usage = Usage::new(120, 8);
    /// let model = ScriptedModel::new().turn(ModelResponse::text("Hello!").usage(usage));
    /// let agent = Agent::builder("greeter").model(model).build()?;
    /// assert_eq!(agent.run("Hi").await?.usage(), usage);
    /// # Ok(())
    /// # }
    /// ```
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Whether it has neither text (other than whitespace) nor tool calls.
    pub fn is_empty(&self) -> bool {
        self.tool_calls.is_empty() && self.text.as_deref().is_none_or(|t| t.trim().is_empty())
    }
}

/// A piece of a response as it streams in.
///
/// A streamed run ([`RunRequest::stream`](crate::RunRequest::stream)) hands them out as
/// [`Event::ModelDelta`](crate::Event::ModelDelta) events:
///
/// ```
/// use futures::StreamExt;
/// use phaseo_agent::{Agent, Event, ModelDelta, ScriptedModel, Tool};
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), phaseo_agent::AgentError> {
/// let search = Tool::new("search", "Search", json!({"type": "object"}), |_, _| Ok(json!([])));
/// let model = ScriptedModel::new()
///     .tool_call("call_1", "search", json!({"query": "printer on fire"}))
///     .text("Nothing found.")
///     .streaming(true);
/// let agent = Agent::builder("helper").model(model).tool(search).build()?;
/// let mut events = agent.run("Search for the printer").stream();
/// let mut arguments = String::new();
/// while let Some(event) = events.next().await {
///     if let Event::ModelDelta { delta: ModelDelta::ToolCall { arguments: piece, .. }, .. } = event {
///         arguments.push_str(&piece);
///     }
/// }
/// assert_eq!(arguments, r#"{"query":"printer on fire"}"#);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
#[non_exhaustive]
pub enum ModelDelta {
    /// Text to append to the answer.
    Text {
        /// The text.
        text: String,
    },
    /// A piece of the tool call at `index` (its position in the turn): the id and name come
    /// with its first piece (some providers repeat them), the arguments text a piece at a time.
    ToolCall {
        /// The call's position in the turn.
        index: usize,
        /// The call id, if this piece carries it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name, if this piece carries it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Text to append to the call's arguments.
        arguments: String,
    },
}

/// Where a streaming model sends its deltas (see [`Model::respond_streaming`]).
///
/// The agent makes one for each streamed turn; a test of a model can make its own:
///
/// ```
/// use std::sync::Mutex;
/// use phaseo_agent::{DeltaSink, ModelDelta};
///
/// let seen = Mutex::new(Vec::new());
/// let collect = |delta: ModelDelta| seen.lock().unwrap().push(delta);
/// let sink = DeltaSink::new(&collect);
/// sink.text("Hel");
/// sink.text(""); // nothing is sent for empty text
/// sink.text("lo");
/// assert_eq!(seen.lock().unwrap().len(), 2);
/// assert_eq!(seen.lock().unwrap()[1], ModelDelta::Text { text: "lo".into() });
/// ```
pub struct DeltaSink<'a> {
    send: &'a (dyn Fn(ModelDelta) + Send + Sync),
}

impl<'a> DeltaSink<'a> {
    /// A sink that hands each delta to `send`.
    pub fn new(send: &'a (dyn Fn(ModelDelta) + Send + Sync)) -> Self {
        DeltaSink { send }
    }

    /// Sends one delta.
    pub fn send(&self, delta: ModelDelta) {
        (self.send)(delta);
    }

    /// Sends a text delta (nothing for an empty one).
    pub fn text(&self, text: impl Into<String>) {
        let text = text.into();
        if !text.is_empty() {
            self.send(ModelDelta::Text { text });
        }
    }
}

impl std::fmt::Debug for DeltaSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeltaSink")
    }
}

/// A language model. Object-safe, so an agent holds an `Arc<dyn Model>`.
///
/// Implement it for your provider's client; the future it returns must be `Send`. A model that can
/// stream also implements [`respond_streaming`](Model::respond_streaming); one that cannot still
/// works when the run is streamed (its answer arrives whole).
///
/// ```
/// use futures::future::BoxFuture;
/// use phaseo_agent::{Model, ModelError, ModelRequest, ModelResponse};
///
/// struct Echo;
///
/// impl Model for Echo {
///     fn respond<'a>(&'a self, request: &'a ModelRequest<'a>) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
///         Box::pin(async move { Ok(ModelResponse::text(format!("{} messages", request.messages.len()))) })
///     }
/// }
/// ```
pub trait Model: Send + Sync {
    /// Answers one request.
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;

    /// Answers one request, sending text and tool-call deltas to `deltas` as they arrive, and
    /// returns the whole response at the end. The agent calls it only when someone listens to the
    /// run's events ([`RunRequest::stream`](crate::RunRequest::stream)); a plain `run()` calls
    /// [`respond`](Model::respond). The default sends nothing and answers whole.
    fn respond_streaming<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
        deltas: &'a DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let _ = deltas;
        self.respond(request)
    }

    /// What telemetry says of this model: who serves it, its default model name, and where it
    /// is reached (the `chat` span's `gen_ai.provider.name`, `gen_ai.request.model`,
    /// `server.address` and `server.port`). The default names no provider (`_OTHER`, the
    /// conventions' word for one they do not list) and nothing else.
    fn describe(&self) -> ModelInfo<'_> {
        ModelInfo::new("_OTHER")
    }
}

/// What telemetry says of a model; see [`Model::describe`].
///
/// ```
/// use phaseo_agent::ModelInfo;
///
/// let info = ModelInfo::new("openai").model("gpt-5-mini").server("api.openai.com", 443);
/// assert_eq!((info.provider, info.model, info.server_port), ("openai", Some("gpt-5-mini"), Some(443)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelInfo<'a> {
    /// Who serves the model (`openai`, `anthropic`, `aws.bedrock`, ...): the conventions' names
    /// where they have one.
    pub provider: &'a str,
    /// The model asked for when a request names none.
    pub model: Option<&'a str>,
    /// The host the model is reached at.
    pub server_address: Option<&'a str>,
    /// The port the model is reached at.
    pub server_port: Option<u16>,
}

impl<'a> ModelInfo<'a> {
    /// A model served by `provider`, with nothing else known.
    pub fn new(provider: &'a str) -> Self {
        ModelInfo {
            provider,
            model: None,
            server_address: None,
            server_port: None,
        }
    }

    /// The model asked for when a request names none.
    pub fn model(mut self, model: &'a str) -> Self {
        self.model = Some(model);
        self
    }

    /// Where the model is reached.
    pub fn server(mut self, address: &'a str, port: u16) -> Self {
        self.server_address = Some(address);
        self.server_port = Some(port);
        self
    }
}

/// A shared or boxed model is a model (an application may pick its provider at run time).
macro_rules! forward_model {
    ($($pointer:ident),*) => {$(
        impl<M: Model + ?Sized> Model for $pointer<M> {
            fn respond<'a>(
                &'a self,
                request: &'a ModelRequest<'a>,
            ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
                (**self).respond(request)
            }

            fn respond_streaming<'a>(
                &'a self,
                request: &'a ModelRequest<'a>,
                deltas: &'a DeltaSink<'a>,
            ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
                (**self).respond_streaming(request, deltas)
            }

            fn describe(&self) -> ModelInfo<'_> {
                (**self).describe()
            }
        }
    )*};
}

forward_model!(Arc, Box);

/// Changes to the next model request, set by tools (see `Tool::next_turn`) or for a run's first
/// turn (`first_turn`). Unset fields keep the agent's values; the sampling ones (`temperature`,
/// `top_p`, `max_output_tokens`, `stop`, `seed`) keep the provider's defaults (see
/// `HttpModel::temperature` and its siblings), which a set one overrides for that turn.
///
/// ```
/// use phaseo_agent::{ToolChoice, TurnParams};
/// use serde_json::json;
///
/// // Let the model answer in words next turn, with no tool calls.
/// let params = TurnParams::default().tool_choice(ToolChoice::None);
/// assert_eq!(params.model, None); // the agent's model stays
/// // Unset fields are left out of the stored form.
/// assert_eq!(serde_json::to_value(&params).unwrap(), json!({"tool_choice": {"type": "none"}}));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnParams {
    /// The model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass (`top_p`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Maximum output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Stop sequences (an empty list: none, whatever the provider's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// The sampling seed, for providers that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
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
    /// Use this model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Use this sampling temperature.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Use this nucleus sampling mass (`top_p`).
    pub fn top_p(mut self, top_p: f32) -> Self {
        self.top_p = Some(top_p);
        self
    }

    /// Allow at most this many output tokens.
    pub fn max_output_tokens(mut self, max: u32) -> Self {
        self.max_output_tokens = Some(max);
        self
    }

    /// Stop before any of these sequences (an empty list: none, whatever the provider's
    /// default).
    pub fn stop(mut self, sequences: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.stop = Some(sequences.into_iter().map(Into::into).collect());
        self
    }

    /// Use this sampling seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Use these instructions (system prompt).
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Let the model call tools this way.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }

    /// Offer only the tools with these ids.
    pub fn active_tools(mut self, ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.active_tools = Some(ids.into_iter().map(Into::into).collect());
        self
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == TurnParams::default()
    }
}
