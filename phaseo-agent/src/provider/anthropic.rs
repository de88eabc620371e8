//! Anthropic Messages (`POST /v1/messages`), whole and streamed: the [`Anthropic`] model, and
//! the pure mapping it is made of ([`request_body`], [`parse_response`], [`StreamAssembler`]),
//! which an application with its own HTTP client can reuse.
//!
//! ```no_run
//! use phaseo_agent::Agent;
//! use phaseo_agent::provider::anthropic::Anthropic;
//!
//! # async fn example() -> Result<(), phaseo_agent::AgentError> {
//! // ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL, if set) from the environment.
//! let model = Anthropic::from_env("claude-sonnet-4-5").max_tokens(2_048);
//! let agent = Agent::builder("assistant").model(model).build()?;
//! let result = agent.run("Say hello").await?;
//! println!("{}", result.output().unwrap_or_default());
//! # Ok(())
//! # }
//! ```
//!
//! # How a conversation is sent
//!
//! - The agent's instructions are the top-level `system` text (left out when empty).
//! - Anthropic wants user and assistant turns to alternate, and tool results to come back as
//!   `tool_result` blocks of a *user* message. So consecutive messages of the same side are merged
//!   into one message: the results of one turn's calls become one user message (in call order),
//!   and a user text that follows them joins that message, after the results (the API wants the
//!   results first). Two consecutive assistant messages become one.
//! - An assistant turn is its text (a `text` block, left out when blank), then one `tool_use`
//!   block per call with the call's arguments as the `input` object. Argument text that is blank
//!   is sent as `{}`. Argument text that is not a JSON object (a model's malformed arguments are
//!   kept in the conversation as they came) is sent as `{"_raw_arguments": "<the text>"}`: the
//!   API needs an object, and the model should still see what it sent, since the call's result
//!   (an `Invalid tool input` error) talks about it.
//! - A tool result is a `tool_result` block with the result text as its `content`; a result of
//!   the runtime's error shape, a JSON object whose only key is `"error"` with a string value
//!   (`{"error": "..."}`), also gets `"is_error": true`.
//! - Empty text is never sent as a block (the API refuses empty text blocks), and a message left
//!   with no blocks is left out.
//! - Tools are `{name, description, input_schema}`, the schema converted with
//!   [`Dialect::Anthropic`] (a root `oneOf`/`anyOf`/`allOf` is refused before anything is sent).
//!   `tool_choice` is sent only with tools: `auto`, `any` (for [`ToolChoice::Required`]), `tool`
//!   with its name, or `none`; `parallel_tool_calls: Some(false)` adds
//!   `"disable_parallel_tool_use": true` (except to `none`, which has no such field).
//! - [`ToolDefinition::strict`](crate::ToolDefinition::strict) is not sent: Anthropic's own strict tool use has its own schema
//!   subset (not [`Dialect::OpenAiStrict`]'s), so a strict tool is offered like any other; the
//!   runtime checks its arguments against its schema all the same.
//!
//! # What comes back
//!
//! `text` blocks (joined), `tool_use` blocks (their `input` as the argument text); `thinking` and
//! other block types are skipped. `stop_reason`: `end_turn` and `stop_sequence` are
//! [`FinishReason::Stop`], `tool_use` [`FinishReason::ToolCalls`], `max_tokens` and
//! `model_context_window_exceeded` [`FinishReason::Length`], `refusal`
//! [`FinishReason::ContentFilter`], anything else (`pause_turn`, ...) [`FinishReason::Other`].
//!
//! [`Usage::input_tokens`] is the whole prompt: Anthropic's `input_tokens` counts only the tokens
//! after the last cache breakpoint, so the cache's `cache_creation_input_tokens` and
//! `cache_read_input_tokens` are added to it; [`Usage::cached_input_tokens`] is
//! `cache_read_input_tokens`. Both then mean what they mean for other providers (the cached
//! tokens are part of the input).
//!
//! # Errors
//!
//! An HTTP error is mapped by its status ([`ModelError::from_status`]: 429 rate limited, 529 and
//! 5xx overloaded, both retried by the agent; 400, 401, 403, 404 not), with the message of the
//! body's `error.message` and the `retry-after` header. An `error` event in a stream (Anthropic
//! sends one when it fails after the response started, typically `overloaded_error`) becomes the
//! kind its `error.type` would have as an HTTP status: `overloaded_error` and `api_error`
//! overloaded, `rate_limit_error` rate limited, `timeout_error` a timeout,
//! `invalid_request_error` and `not_found_error` a bad request (or context too long when the
//! message says so), `request_too_large` context too long, `authentication_error` and
//! `permission_error` authentication, `billing_error` a bad request; an unknown type is
//! [`ModelErrorKind::Other`]. A stream that ends before `message_stop` is
//! [`ModelErrorKind::Transport`] (retried).
//!
//! A redirect (3xx) is not followed: following it would send the key, the configured headers
//! and (on 307 and 308) the conversation wherever the server points. It is
//! [`ModelErrorKind::BadRequest`] (not retried) with its status, naming where it pointed
//! (without the query) and saying to set `base_url` to the final address.
//!
//! Responses are read within the provider's [`ModelLimits`] (see
//! `limits`): a body or stream over `max_response_bytes`, or one event over `max_event_bytes`,
//! is [`ModelErrorKind::LimitExceeded`] (not retried); silence over `stream_idle_timeout`
//! (before the headers, or between two pieces) and a request over `request_timeout` are
//! [`ModelErrorKind::Timeout`] (retried); [`ModelError::limit`] says which. An error body is
//! read up to 64 KiB. A `retry-after` that is not a non-negative number (an HTTP date, say) is
//! ignored, and one over a day is read as a day.
//!
//! Sources: the Messages API reference (docs.anthropic.com/en/api/messages), *Streaming
//! Messages* (platform.claude.com/docs/en/build-with-claude/streaming), *How to implement tool
//! use* (platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use) and *Errors*
//! (docs.anthropic.com/en/api/errors).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use crate::error::{ModelError, ModelErrorKind};
use crate::limits::ModelLimits;
use crate::model::message::{Message, ToolCall};
use crate::model::request::{
    DeltaSink, FinishReason, Model, ModelDelta, ModelRequest, ModelResponse, ToolChoice, Usage,
};
use crate::provider::http;
use crate::schema::dialect::{Dialect, convert};

/// The API's address when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent when none is configured.
pub const DEFAULT_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when neither the request nor [`Anthropic::max_tokens`] sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4_096;
/// How long a whole request may take when [`Anthropic::timeout`] is not set: 10 minutes (the
/// same as [`ModelLimits::default`]'s request time).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The key `input` gets when a call's argument text is not a JSON object (see the
/// [module docs](self)).
pub const RAW_ARGUMENTS_KEY: &str = "_raw_arguments";

/// An Anthropic model over the Messages API: a [`Model`] for an agent.
///
/// Configured with builder methods; cloning is cheap-ish (the HTTP client is shared once built).
///
/// - [`api_key`](Anthropic::api_key): sent as `x-api-key`. Without one, a request to the default
///   base URL fails at once with [`ModelErrorKind::Authentication`] (nothing is sent); to another
///   base URL (a proxy that authenticates another way) it is sent without the header.
/// - [`base_url`](Anthropic::base_url): default [`DEFAULT_BASE_URL`]; requests go to
///   `{base_url}/v1/messages`.
/// - [`limits`](Anthropic::limits): the bounds of a response ([`ModelLimits`]): its size, one
///   event's size, the silence between its pieces and the whole request's time. Redirects are
///   not followed (see the [module docs](self)).
/// - [`timeout`](Anthropic::timeout): for a whole request, a streamed body included (the same
///   setting as the limits' request time); default
///   [`DEFAULT_TIMEOUT`], 10 minutes, as Anthropic's own SDKs (a long answer streams for minutes).
///   Connecting has its own limit, `ModelLimits::connect_timeout` (10 s).
/// - [`max_tokens`](Anthropic::max_tokens): Anthropic requires `max_tokens` on every request.
///   Default [`DEFAULT_MAX_TOKENS`], 4,096: the output limit of the Claude 3 models (Haiku,
///   Opus), the lowest of the models still served, so every model accepts the default; and enough
///   for an agent's turns (tool calls and short answers), while a runaway answer stops early. Raise it for long answers. A request's
///   [`ModelRequest::max_output_tokens`] (a tool's next-turn override) takes precedence.
/// - [`version`](Anthropic::version): the `anthropic-version` header, default [`DEFAULT_VERSION`].
/// - [`header`](Anthropic::header): any other header (`anthropic-beta`, a proxy's own); one named
///   like a built-in header replaces it.
/// - [`send_metadata`](Anthropic::send_metadata): off by default; when on, the run id is sent as
///   `metadata.user_id`.
///
/// The model name is the one given to [`new`](Anthropic::new); a request's
/// [`ModelRequest::model`] (the agent's `model_name`, or a next-turn override) takes precedence.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::provider::anthropic::Anthropic;
///
/// let model = Anthropic::new("claude-sonnet-4-5")
///     .api_key("sk-ant-...")
///     .base_url("http://localhost:8080")
///     .timeout(Duration::from_secs(120))
///     .max_tokens(8_192)
///     .header("anthropic-beta", "token-efficient-tools-2025-02-19");
/// assert_eq!(model.model_name(), "claude-sonnet-4-5");
/// assert_eq!(model.url(), "http://localhost:8080/v1/messages");
/// // The key is never printed.
/// assert!(!format!("{model:?}").contains("sk-ant"));
/// ```
#[derive(Clone)]
pub struct Anthropic {
    model: String,
    api_key: Option<String>,
    base_url: String,
    limits: ModelLimits,
    max_tokens: u32,
    version: String,
    headers: Vec<(String, String)>,
    send_metadata: bool,
    client: OnceLock<reqwest::Client>,
}

impl Anthropic {
    /// A model by name (`claude-sonnet-4-5`, ...), with no API key and the defaults.
    pub fn new(model: impl Into<String>) -> Self {
        Anthropic {
            model: model.into(),
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            limits: ModelLimits::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
            version: DEFAULT_VERSION.to_owned(),
            headers: Vec::new(),
            send_metadata: false,
            client: OnceLock::new(),
        }
    }

    /// A model by name, with the API key of `ANTHROPIC_API_KEY` and the base URL of
    /// `ANTHROPIC_BASE_URL` when they are set (and not blank).
    pub fn from_env(model: impl Into<String>) -> Self {
        let mut anthropic = Anthropic::new(model);
        if let Some(key) = http::env_var("ANTHROPIC_API_KEY") {
            anthropic = anthropic.api_key(key);
        }
        if let Some(url) = http::env_var("ANTHROPIC_BASE_URL") {
            anthropic = anthropic.base_url(url);
        }
        anthropic
    }

    /// The API key, sent as `x-api-key`. A blank key counts as none.
    ///
    /// Without a key, a request to the default base URL fails at once, and nothing is sent:
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind};
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let agent = Agent::builder("assistant").model(Anthropic::new("claude-sonnet-4-5")).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.kind, ModelErrorKind::Authentication);
    ///
    /// let model = Anthropic::new("claude-sonnet-4-5").api_key("sk-ant-...");
    /// assert!(!format!("{model:?}").contains("sk-ant")); // the key is never printed
    /// # }
    /// ```
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.api_key = (!key.trim().is_empty()).then_some(key);
        self
    }

    /// The API's address, without `/v1` (default [`DEFAULT_BASE_URL`]); a trailing `/` is ignored.
    ///
    /// ```
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// let proxied = Anthropic::new("claude-sonnet-4-5").base_url("https://llm-proxy.example.com/");
    /// assert_eq!(proxied.url(), "https://llm-proxy.example.com/v1/messages");
    /// ```
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// How long a whole request may take, a streamed body included (default
    /// [`DEFAULT_TIMEOUT`]). A request that takes longer fails with [`ModelErrorKind::Timeout`],
    /// its [`ModelError::limit`] naming `ModelLimits::request_timeout`.
    ///
    /// One setting with the [limits](Anthropic::limits)' request time: `.timeout(t)` is
    /// `.limits(ModelLimits::default().request_timeout(t))` when no other limit was set, and
    /// otherwise changes only the request time of the limits set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind, RetryPolicy};
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that takes connections and never answers.
    /// let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let model = Anthropic::new("claude-sonnet-4-5")
    ///     .base_url(format!("http://{}", silent.local_addr().unwrap()))
    ///     .timeout(Duration::from_millis(200));
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.kind, ModelErrorKind::Timeout);
    /// # }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limits = self.limits.request_timeout(timeout);
        self
    }

    /// The bounds of each response (default [`ModelLimits::default`]): the bytes of a whole
    /// body or of a whole stream, the bytes of one streamed event, the longest silence (before
    /// the headers, and between two pieces of the body) and the whole request's time. Over a
    /// size limit, a request fails with [`ModelErrorKind::LimitExceeded`] (not retried); over a
    /// time limit, with [`ModelErrorKind::Timeout`] (retried); either way
    /// [`ModelError::limit`] says which limit, and the message names its setting. An error body
    /// (a 4xx or 5xx) is read up to 64 KiB: its message is what is kept.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::limits::ModelLimits;
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// let model = Anthropic::new("claude-sonnet-4-5")
    ///     .limits(ModelLimits::default().max_event_bytes(1 << 20))
    ///     .timeout(Duration::from_secs(120)); // the limits' request time
    /// assert_eq!(model.model_limits().event_bytes(), 1 << 20);
    /// assert_eq!(model.model_limits().request_time(), Duration::from_secs(120));
    /// ```
    pub fn limits(mut self, limits: ModelLimits) -> Self {
        self.limits = limits;
        // The connect timeout is the client's own.
        self.client = OnceLock::new();
        self
    }

    /// The bounds of each response (see [`limits`](Anthropic::limits)).
    pub fn model_limits(&self) -> ModelLimits {
        self.limits
    }

    /// The `max_tokens` of each request that does not set its own (default
    /// [`DEFAULT_MAX_TOKENS`]).
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // A request as an agent makes it (recorded by a scripted model).
    /// let scripted = ScriptedModel::new().record_requests().text("Hello!");
    /// Agent::builder("helper").model(scripted.clone()).build()?.run("Hi").await?;
    ///
    /// let model = Anthropic::new("claude-sonnet-4-5").max_tokens(8_192);
    /// assert_eq!(model.default_max_tokens(), 8_192);
    /// assert_eq!(request_body(&scripted.requests()[0], &model, false)?["max_tokens"], 8_192);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The `anthropic-version` header (default [`DEFAULT_VERSION`]).
    ///
    /// ```
    /// use std::io::{BufRead, BufReader};
    /// use phaseo_agent::{Agent, RetryPolicy};
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that reads one request's headers, then hangs up.
    /// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let url = format!("http://{}", server.local_addr().unwrap());
    /// let headers = std::thread::spawn(move || {
    ///     let lines = BufReader::new(server.accept().unwrap().0).lines().map_while(Result::ok);
    ///     lines.take_while(|line| !line.is_empty()).collect::<Vec<_>>()
    /// });
    /// let model = Anthropic::new("claude-sonnet-4-5").base_url(url).api_key("sk-ant-...").version("2099-01-01");
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build().unwrap();
    /// assert!(agent.run("Hi").await.is_err()); // the server hung up
    /// assert!(headers.join().unwrap().iter().any(|h| h.eq_ignore_ascii_case("anthropic-version: 2099-01-01")));
    /// # }
    /// ```
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Another header sent with each request; a header named like one this provider sends
    /// (`x-api-key`, `anthropic-version`, `content-type`) replaces it.
    ///
    /// ```
    /// use std::io::{BufRead, BufReader};
    /// use phaseo_agent::{Agent, RetryPolicy};
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that reads one request's headers, then hangs up.
    /// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let url = format!("http://{}", server.local_addr().unwrap());
    /// let headers = std::thread::spawn(move || {
    ///     let lines = BufReader::new(server.accept().unwrap().0).lines().map_while(Result::ok);
    ///     lines.take_while(|line| !line.is_empty()).collect::<Vec<_>>()
    /// });
    /// let model = Anthropic::new("claude-sonnet-4-5").base_url(url)
    ///     .header("anthropic-beta", "token-efficient-tools-2025-02-19");
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build().unwrap();
    /// assert!(agent.run("Hi").await.is_err()); // the server hung up
    /// let headers = headers.join().unwrap();
    /// assert!(headers.iter().any(|h| h.eq_ignore_ascii_case("anthropic-beta: token-efficient-tools-2025-02-19")));
    /// # }
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Whether to send the run id ([`RequestMeta::run_id`](crate::RequestMeta::run_id), an
    /// opaque id such as `run_18f2c3a4b5d6e7f8_0`) as `metadata.user_id` (default `false`).
    /// Anthropic uses `user_id` to tell users apart when it looks into abuse; it must not hold
    /// anything that identifies a person, and a run id does not.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    /// use phaseo_agent::provider::anthropic::{Anthropic, request_body};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // A request as an agent makes it (recorded by a scripted model).
    /// let scripted = ScriptedModel::new().record_requests().text("Hello!");
    /// let done = Agent::builder("helper").model(scripted.clone()).build()?.run("Hi").await?;
    /// let request = &scripted.requests()[0];
    ///
    /// let body = request_body(request, &Anthropic::new("claude-sonnet-4-5").send_metadata(true), false)?;
    /// assert_eq!(body["metadata"]["user_id"], done.state.run_id());
    /// let body = request_body(request, &Anthropic::new("claude-sonnet-4-5"), false)?;
    /// assert!(body.get("metadata").is_none()); // off by default
    /// # Ok(())
    /// # }
    /// ```
    pub fn send_metadata(mut self, send: bool) -> Self {
        self.send_metadata = send;
        self
    }

    /// The configured model name.
    pub fn model_name(&self) -> &str {
        &self.model
    }

    /// The configured `max_tokens`.
    pub fn default_max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// Where requests go: `{base_url}/v1/messages`.
    pub fn url(&self) -> String {
        format!("{}/v1/messages", self.base_url)
    }

    fn client(&self) -> &reqwest::Client {
        self.client
            .get_or_init(|| http::client(self.limits.connect_time()))
    }

    /// The headers of a request (content-type is added by `post_json`): the built-in ones unless
    /// a configured header has the same name, then the configured ones.
    fn request_headers(&self) -> Vec<(&str, String)> {
        let overridden = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let mut headers = Vec::with_capacity(self.headers.len() + 2);
        if let Some(key) = &self.api_key {
            if !overridden("x-api-key") {
                headers.push(("x-api-key", key.clone()));
            }
        }
        if !overridden("anthropic-version") {
            headers.push(("anthropic-version", self.version.clone()));
        }
        headers.extend(self.headers.iter().map(|(n, v)| (n.as_str(), v.clone())));
        headers
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let has_key = self.api_key.is_some()
            || self
                .headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("x-api-key"));
        if !has_key && self.base_url == DEFAULT_BASE_URL {
            return Err(ModelError::new(
                ModelErrorKind::Authentication,
                "no Anthropic API key: set ANTHROPIC_API_KEY (with Anthropic::from_env) or call \
                 Anthropic::api_key",
            ));
        }
        http::post_json(
            self.client(),
            &self.url(),
            &self.request_headers(),
            body,
            &self.limits,
        )
        .await
    }
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("limits", &self.limits)
            .field("max_tokens", &self.max_tokens)
            .field("version", &self.version)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("send_metadata", &self.send_metadata)
            .finish()
    }
}

impl Model for Anthropic {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(http::within(&self.limits, async move {
            let body = request_body(request, self, false)?;
            let response = self.post(&body).await?;
            let json = http::json_body(response, &self.limits).await?;
            parse_response(&json)
        }))
    }

    fn respond_streaming<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
        deltas: &'a DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(http::within(&self.limits, async move {
            let body = request_body(request, self, true)?;
            let response = self.post(&body).await?;
            let mut events = http::Events::new(response, &self.limits);
            let mut assembler = StreamAssembler::new();
            while let Some(event) = events.next().await {
                let (name, data) = event?;
                for delta in assembler.push(&name, &data)? {
                    deltas.send(delta);
                }
                if assembler.is_complete() {
                    break;
                }
            }
            assembler.finish()
        }))
    }
}

// Requests.

/// The Messages API body of `request`, as `config` sends it: the model (the request's, else
/// `config`'s), `max_tokens` (the request's, else `config`'s), `system`, `messages`, `tools`,
/// `tool_choice`, `temperature`, `metadata` (when `config` sends it) and, when `stream`,
/// `"stream": true`. See the [module docs](self) for how the conversation is mapped.
///
/// Fails with [`ModelErrorKind::BadRequest`] when a tool's parameter schema cannot be an
/// Anthropic `input_schema` (its root is a union, or not an object).
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
    let max_tokens = request.max_output_tokens.unwrap_or(config.max_tokens);
    body.insert("max_tokens".into(), json!(max_tokens));
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
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), number_f32(temperature));
    }
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

/// An `f32` as the decimal it was written as (`0.7`, not `0.699999988079071`).
fn number_f32(value: f32) -> Value {
    value
        .to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
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

/// A call's argument text as the `input` object (see the [module docs](self)).
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

// Responses.

/// A Messages API response body as a [`ModelResponse`]: text, tool calls, finish reason, usage
/// and id (see the [module docs](self)). A body of `"type": "error"` is the [`ModelError`] it
/// describes; a body without a `content` array is [`ModelErrorKind::InvalidResponse`].
///
/// ```
/// use phaseo_agent::FinishReason;
/// use phaseo_agent::provider::anthropic::parse_response;
/// use serde_json::json;
///
/// let response = parse_response(&json!({
///     "id": "msg_01",
///     "type": "message",
///     "role": "assistant",
///     "content": [
///         {"type": "text", "text": "Checking."},
///         {"type": "tool_use", "id": "toolu_01", "name": "get_status", "input": {"service": "api"}}
///     ],
///     "stop_reason": "tool_use",
///     "usage": {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 30}
/// }))
/// .unwrap();
/// assert_eq!(response.text.as_deref(), Some("Checking."));
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// let usage = response.usage.unwrap();
/// assert_eq!((usage.input_tokens, usage.cached_input_tokens), (120, Some(20)));
/// ```
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        return Err(stream_error(body));
    }
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the response has no `content` array"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            Some("tool_use") => {
                let id = string_field(block, "id")?;
                let name = string_field(block, "name")?;
                let arguments = match block.get("input") {
                    None | Some(Value::Null) => "{}".to_owned(),
                    Some(input) => input.to_string(),
                };
                tool_calls.push(ToolCall::raw(id, name, arguments));
            }
            _ => {}
        }
    }
    let mut usage = WireUsage::default();
    if let Some(wire) = body.get("usage") {
        usage.update(wire);
    }
    Ok(ModelResponse {
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        finish_reason: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason),
        usage: usage.to_usage(),
        id: body.get("id").and_then(Value::as_str).map(str::to_owned),
    })
}

/// A `stop_reason` as a [`FinishReason`].
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

fn string_field(block: &Value, key: &str) -> Result<String, ModelError> {
    block
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| invalid(format!("a `tool_use` block has no string `{key}`")))
}

/// Anthropic's token counts, as far as they were given.
#[derive(Debug, Clone, Copy, Default)]
struct WireUsage {
    input: Option<u64>,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output: Option<u64>,
}

impl WireUsage {
    /// Takes the counts `wire` gives (they are running totals: a later count replaces an earlier).
    fn update(&mut self, wire: &Value) {
        let count = |key: &str| wire.get(key).and_then(Value::as_u64);
        self.input = count("input_tokens").or(self.input);
        self.cache_creation = count("cache_creation_input_tokens").or(self.cache_creation);
        self.cache_read = count("cache_read_input_tokens").or(self.cache_read);
        self.output = count("output_tokens").or(self.output);
    }

    fn to_usage(self) -> Option<Usage> {
        if self.input.is_none() && self.output.is_none() && self.cache_read.is_none() {
            return None;
        }
        let input = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_creation.unwrap_or(0))
            .saturating_add(self.cache_read.unwrap_or(0));
        Some(Usage {
            input_tokens: input,
            output_tokens: self.output.unwrap_or(0),
            cached_input_tokens: self.cache_read,
        })
    }
}

/// An error body (`{"type": "error", "error": {"type": ..., "message": ...}}`) as a
/// [`ModelError`] of the kind its type has as an HTTP status (see the [module docs](self)). The
/// error has no status: the HTTP response itself succeeded.
fn stream_error(body: &Value) -> ModelError {
    let error = body.get("error");
    let kind_name = error
        .and_then(|e| e.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    let status = match kind_name {
        "invalid_request_error" => Some(400),
        "authentication_error" => Some(401),
        "billing_error" => Some(402),
        "permission_error" => Some(403),
        "not_found_error" => Some(404),
        "request_too_large" => Some(413),
        "rate_limit_error" => Some(429),
        "api_error" => Some(500),
        "timeout_error" => Some(504),
        "overloaded_error" => Some(529),
        _ => None,
    };
    let kind = status.map_or(ModelErrorKind::Other, |s| {
        ModelError::from_status(s, message).kind
    });
    ModelError::new(kind, format!("{kind_name}: {message}"))
}

// Streams.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::{RequestMeta, ToolDefinition};

    fn request(messages: Vec<Message>) -> ModelRequest<'static> {
        ModelRequest {
            model: None,
            instructions: "".into(),
            messages: messages.into(),
            tools: Vec::new().into(),
            temperature: None,
            max_output_tokens: None,
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: None,
            meta: RequestMeta::default(),
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

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
        assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
        assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
        assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
        assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
        assert_eq!(
            finish_reason("pause_turn"),
            FinishReason::Other("pause_turn".into())
        );
    }

    #[test]
    fn error_types_map_to_kinds() {
        let kind = |t: &str, m: &str| {
            stream_error(&json!({"type": "error", "error": {"type": t, "message": m}})).kind
        };
        assert_eq!(
            kind("overloaded_error", "Overloaded"),
            ModelErrorKind::Overloaded
        );
        assert_eq!(kind("api_error", "x"), ModelErrorKind::Overloaded);
        assert_eq!(kind("rate_limit_error", "x"), ModelErrorKind::RateLimited);
        assert_eq!(
            kind("invalid_request_error", "x"),
            ModelErrorKind::BadRequest
        );
        assert_eq!(
            kind(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            ModelErrorKind::ContextTooLong
        );
        assert_eq!(
            kind("authentication_error", "x"),
            ModelErrorKind::Authentication
        );
        assert_eq!(
            kind("permission_error", "x"),
            ModelErrorKind::Authentication
        );
        assert_eq!(
            kind("request_too_large", "x"),
            ModelErrorKind::ContextTooLong
        );
        assert_eq!(kind("timeout_error", "x"), ModelErrorKind::Timeout);
        assert_eq!(kind("not_found_error", "x"), ModelErrorKind::BadRequest);
        assert_eq!(kind("something_new", "x"), ModelErrorKind::Other);
    }

    #[test]
    fn a_blank_key_is_no_key() {
        // As for OpenAI: a blank key is not sent, and the default API is not asked without one.
        for blank in ["", "  "] {
            let model = Anthropic::new("m").api_key(blank);
            assert!(model.api_key.is_none(), "{blank:?}");
            assert!(
                !model
                    .request_headers()
                    .iter()
                    .any(|(n, _)| *n == "x-api-key"),
                "{blank:?}"
            );
        }
    }

    #[test]
    fn debug_hides_the_key() {
        let debug = format!("{:?}", Anthropic::new("m").api_key("secret-key"));
        assert!(!debug.contains("secret-key"), "{debug}");
    }

    #[test]
    fn configured_headers_replace_built_in_ones() {
        let model = Anthropic::new("m")
            .api_key("k")
            .version("2099-01-01")
            .header("Anthropic-Version", "2023-06-01")
            .header("anthropic-beta", "b");
        assert_eq!(
            model.request_headers(),
            vec![
                ("x-api-key", "k".to_owned()),
                ("Anthropic-Version", "2023-06-01".to_owned()),
                ("anthropic-beta", "b".to_owned()),
            ]
        );
    }
}
