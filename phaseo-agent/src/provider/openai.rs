//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`), whole and streamed:
//! the [`OpenAi`] model, and the pure mapping it is made of ([`request_body`],
//! [`parse_response`], [`StreamAssembler`]), which an application with its own HTTP client can
//! reuse.
//!
//! One client for every server that speaks the Chat Completions wire format; only the base URL,
//! the key and a few settings change:
//!
//! ```
//! use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
//!
//! // OpenAI: OPENAI_API_KEY (and OPENAI_BASE_URL, if set) from the environment.
//! let openai = OpenAi::from_env("gpt-4.1");
//!
//! // OpenRouter: its own key; `HTTP-Referer` and `X-Title` name your app on openrouter.ai.
//! let openrouter = OpenAi::new("anthropic/claude-sonnet-4.5")
//!     .base_url("https://openrouter.ai/api/v1")
//!     .api_key(std::env::var("OPENROUTER_API_KEY").unwrap_or_default())
//!     .header("HTTP-Referer", "https://example.com")
//!     .header("X-Title", "Ops agent");
//!
//! // Ollama (`ollama serve`): no key.
//! let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1");
//!
//! // vLLM (`vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes`).
//! let vllm = OpenAi::new("Qwen/Qwen3-8B").base_url("http://localhost:8000/v1");
//!
//! // LM Studio's local server.
//! let lm_studio = OpenAi::new("qwen/qwen3-8b").base_url("http://localhost:1234/v1");
//!
//! // llama.cpp's server (`llama-server -m model.gguf --jinja`, which serves one model whatever
//! // the name), or llama-cpp-python's (`python -m llama_cpp.server --chat_format
//! // chatml-function-calling`, port 8000).
//! let llama_cpp = OpenAi::new("local").base_url("http://localhost:8080/v1");
//!
//! // Azure OpenAI's v1 API, for a reasoning model that wants `max_completion_tokens`.
//! let azure = OpenAi::new("o4-mini")
//!     .base_url("https://my-resource.openai.azure.com/openai/v1")
//!     .header("api-key", "...")
//!     .max_tokens_field(MaxTokensField::MaxCompletionTokens);
//! # let _ = (openai, openrouter, ollama, vllm, lm_studio, llama_cpp, azure);
//! ```
//!
//! ```no_run
//! use phaseo_agent::Agent;
//! use phaseo_agent::provider::openai::OpenAi;
//!
//! # async fn example() -> Result<(), phaseo_agent::AgentError> {
//! let agent = Agent::builder("assistant").model(OpenAi::from_env("gpt-4.1")).build()?;
//! let result = agent.run("Say hello").await?;
//! println!("{}", result.output().unwrap_or_default());
//! # Ok(())
//! # }
//! ```
//!
//! # How a request is sent
//!
//! - `model`: the request's [`ModelRequest::model`] (the agent's `model_name`, or a next-turn
//!   override), else the name given to [`OpenAi::new`].
//! - The agent's instructions are a first `system` message (left out when empty). `system`, not
//!   OpenAI's newer `developer`: OpenAI reads `system` as `developer` for the models that want it,
//!   and compatible servers only know `system`.
//! - A user message is `{"role": "user", "content": text}`.
//! - An assistant turn is `{"role": "assistant", "content": text, "tool_calls": [...]}`, with
//!   `"content": ""` when it has no text (beside tool calls, or empty), **never `null`**: OpenAI
//!   and the other servers accept `""`, while llama-cpp-python's server refuses `null` with an
//!   HTTP 500. Each call is `{"id", "type": "function", "function": {"name", "arguments"}}` with
//!   the argument text as the model sent it, except that blank text is sent as `"{}"` (Ollama
//!   parses the arguments of past calls and refuses text that is not JSON).
//! - A tool result is `{"role": "tool", "tool_call_id": id, "content": text}`, in call order.
//! - Tools are `{"type": "function", "function": {"name", "description", "parameters"}}`
//!   (`description` left out when empty). A [strict](ToolDefinition::strict) tool's parameters are
//!   converted with [`Dialect::OpenAiStrict`] and the function gets `"strict": true`; should the
//!   conversion fail (the agent's `build()` refuses such a tool, so only a hand-made request can
//!   get here), the tool is sent as a plain one, with its canonical schema.
//! - With tools: `tool_choice` (`"auto"`, `"none"`, `"required"`, or
//!   `{"type": "function", "function": {"name": ...}}`), and `parallel_tool_calls` when the
//!   request sets it. [`ToolChoice::Required`] with a single tool offered is sent as that tool's
//!   named choice, which means the same and which more servers know (llama-cpp-python's function
//!   calling fails with an HTTP 500 on `"required"`). Without tools neither is sent (OpenAI
//!   refuses `parallel_tool_calls` without tools), and a `tool_choice` that needs a tool is
//!   refused before anything is sent.
//! - `temperature` when set (as the decimal it was written as: `0.2`, not `0.20000000298`).
//! - The output limit, when set, as `max_tokens` or `max_completion_tokens`: see
//!   [`MaxTokensField`].
//! - `user` only with [`OpenAi::send_metadata`].
//! - Streamed: `"stream": true` and `"stream_options": {"include_usage": true}`, so that the last
//!   chunk carries the token usage.
//!
//! # What comes back
//!
//! From `choices[0]`: `message.content` (a string; `null` and `""` are no text; an array of
//! `{"type": "text", "text"}` parts is joined), or `message.refusal` when the model refused
//! (it becomes the text, so the run ends with the model's words rather than as an empty answer);
//! `message.tool_calls` (id, `function.name`, `function.arguments`: a string as it is, an object
//! as its JSON text, as some servers send it); the legacy `message.function_call` when there are
//! no `tool_calls`. `finish_reason`: `stop` is [`FinishReason::Stop`], `tool_calls` and
//! `function_call` [`FinishReason::ToolCalls`], `length` [`FinishReason::Length`],
//! `content_filter` [`FinishReason::ContentFilter`], anything else [`FinishReason::Other`].
//! `usage`: `prompt_tokens`, `completion_tokens`, and `prompt_tokens_details.cached_tokens` (or
//! DeepSeek's `prompt_cache_hit_tokens`) as [`Usage::cached_input_tokens`]. The response `id`.
//! Reasoning (`reasoning`, `reasoning_content`, `reasoning_details`) and fields this crate does
//! not know are skipped.
//!
//! Streamed, each chunk's `choices[0].delta` is read the same way: text pieces become
//! [`ModelDelta::Text`]; tool-call pieces are matched by their `index` (a piece without one
//! continues the last call, or starts a new one when it brings a new id, or a name after the last
//! call's arguments). Servers differ in what they repeat: OpenAI and vLLM send a call's id and
//! name in its first piece only, Ollama sends each call whole in one piece, llama-cpp-python
//! repeats the id and the name in every piece. An id or name already known is not repeated in
//! the [`ModelDelta::ToolCall`]s (a different name is appended, for a server that streams the
//! name in pieces); the argument pieces are appended. A call whose id never came keeps an empty
//! id (the runtime gives it one). The usage comes from whichever chunk carries it (OpenAI's last
//! chunk has empty `choices`; llama.cpp's server puts it beside the `finish_reason`).
//! `data: [DONE]` ends the stream. A server that answers a streamed request with a whole JSON
//! body (`Content-Type: application/json`: it ignored `stream`) is read as a whole response,
//! handed out as one text delta and one delta per call.
//!
//! # Errors
//!
//! An HTTP error is mapped by its status ([`ModelError::from_status`]: 429 rate limited, 5xx
//! overloaded, both retried by the agent; 400, 401, 403, 404 not), with the body's
//! `error.message` (or vLLM's older top-level `message`) and the `retry-after-ms` or
//! `retry-after` header.
//!
//! An error *inside* a successful response is an error too: OpenRouter answers HTTP 200 with
//! `{"error": {"code": 502, "message": ...}}` when the model failed after the request was
//! accepted, and OpenAI, OpenRouter and vLLM send `data: {"error": {...}}` when a stream fails
//! mid-way (OpenRouter with `finish_reason: "error"`). A numeric `code` is read as the HTTP
//! status it names; otherwise the `code` or `type` decides: `rate_limit_exceeded` is rate
//! limited, `server_error`, `api_error`, `internal_server_error` and `overloaded_error` (and a
//! `finish_reason: "error"` with no error object) overloaded, `context_length_exceeded` context
//! too long, `invalid_request_error` a bad request, `authentication_error` and `invalid_api_key`
//! authentication, anything else [`ModelErrorKind::Other`].
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
//! A stream that ends before a `finish_reason` or `[DONE]` came is [`ModelErrorKind::Transport`]
//! (retried). A body or chunk that is not JSON, or whose `choices`, `tool_calls` or `function`
//! are not the shapes above, is [`ModelErrorKind::InvalidResponse`].
//!
//! # Server notes
//!
//! - **Ollama** ignores `tool_choice` and `parallel_tool_calls`, and reads only `max_tokens`.
//! - **vLLM** calls tools only when started with `--enable-auto-tool-choice` and a
//!   `--tool-call-parser`; a named `tool_choice` works without them (guided decoding).
//! - **llama.cpp's server** needs `--jinja` for tool calls; its older versions read only the
//!   string forms of `tool_choice` (a named choice counts as `"auto"`).
//! - **llama-cpp-python** needs a function-calling `--chat_format` (`chatml-function-calling`),
//!   which knows `"auto"`, `"none"` and a named tool but not `"required"` (an HTTP 500 with an
//!   empty message; see above for one tool); it never sends the usage of a stream.
//! - **OpenRouter** sends `: OPENROUTER PROCESSING` comments in streams (skipped).
//!
//! Sources: OpenAI's API reference for Chat Completions
//! (platform.openai.com/docs/api-reference/chat, its *streaming* and *function calling* guides),
//! OpenRouter's *API reference*, *Streaming* and *Errors* pages (openrouter.ai/docs), Ollama's
//! OpenAI layer (`openai/openai.go` and `middleware/openai.go` in github.com/ollama/ollama),
//! vLLM's `entrypoints/openai/protocol.py`, llama.cpp's `tools/server` code, and llama-cpp-python
//! 0.3.36's server, run and recorded (`tests/fixtures/openai/README.md` lists each shape's source).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use crate::error::{ModelError, ModelErrorKind};
use crate::limits::ModelLimits;
use crate::model::message::{Message, ToolCall};
#[cfg(doc)]
use crate::model::request::ToolDefinition;
use crate::model::request::{
    DeltaSink, FinishReason, Model, ModelDelta, ModelRequest, ModelResponse, ToolChoice, Usage,
};
use crate::provider::http;
use crate::schema::dialect::{Dialect, convert};

/// OpenAI's API address, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// How long a whole request may take when [`OpenAi::timeout`] is not set: 10 minutes, as
/// OpenAI's own SDKs (a long answer streams for minutes, and a local server on a CPU is slow).
/// The same as [`ModelLimits::default`]'s request time.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Which field carries the output token limit ([`ModelRequest::max_output_tokens`]).
///
/// OpenAI deprecated `max_tokens` for `max_completion_tokens`, and its reasoning models (o-series,
/// GPT-5) refuse `max_tokens`; compatible servers mostly know only `max_tokens` (Ollama and
/// llama-cpp-python ignore `max_completion_tokens` without a word, so the limit would be lost).
/// The default therefore follows the base URL: `max_completion_tokens` for OpenAI's own
/// ([`DEFAULT_BASE_URL`]), `max_tokens` for every other. Set it with
/// [`OpenAi::max_tokens_field`] for a server that wants the other one (Azure OpenAI with a
/// reasoning model, say).
///
/// ```
/// use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
///
/// let openai = OpenAi::new("gpt-4.1");
/// assert_eq!(openai.effective_max_tokens_field(), MaxTokensField::MaxCompletionTokens);
/// let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1");
/// assert_eq!(ollama.effective_max_tokens_field().as_str(), "max_tokens");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: every compatible server, and OpenAI's older models.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI (required by its reasoning models), vLLM, OpenRouter.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// A model behind an OpenAI-compatible Chat Completions endpoint: a [`Model`] for an agent.
///
/// Configured with builder methods (see the [module docs](self) for OpenAI, OpenRouter, Ollama,
/// vLLM, LM Studio and llama.cpp); cloning shares the HTTP client once it is built.
///
/// - [`api_key`](OpenAi::api_key): sent as `Authorization: Bearer <key>`; an empty key is no
///   key. Without one, a request to OpenAI's own URL fails at once with
///   [`ModelErrorKind::Authentication`] (nothing is sent); to any other URL (a local server) it is
///   sent without the header.
/// - [`base_url`](OpenAi::base_url): default [`DEFAULT_BASE_URL`]; requests go to
///   `{base_url}/chat/completions`, so the URL includes the `/v1`.
/// - [`limits`](OpenAi::limits): the bounds of a response ([`ModelLimits`]): its size, one
///   event's size, the silence between its pieces, the whole request's time and connecting.
///   Redirects are not followed (see [`ModelErrorKind::BadRequest`] in the
///   [module docs](self)).
/// - [`timeout`](OpenAi::timeout): the whole request's time, a streamed body included; default
///   [`DEFAULT_TIMEOUT`], 10 minutes (the same setting as the limits' request time).
/// - [`header`](OpenAi::header): any other header (OpenRouter's `HTTP-Referer` and `X-Title`,
///   Azure's `api-key`, a proxy's own); one named like a built-in header replaces it.
/// - [`max_tokens_field`](OpenAi::max_tokens_field): see [`MaxTokensField`].
/// - [`send_metadata`](OpenAi::send_metadata): off by default; when on, the agent and run ids go
///   in `user`.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::provider::openai::OpenAi;
///
/// let model = OpenAi::new("gpt-4.1")
///     .api_key("sk-...")
///     .base_url("http://localhost:8000/v1/")
///     .timeout(Duration::from_secs(120));
/// assert_eq!(model.model_name(), "gpt-4.1");
/// assert_eq!(model.url(), "http://localhost:8000/v1/chat/completions");
/// // The key is never printed.
/// assert!(!format!("{model:?}").contains("sk-"));
/// ```
#[derive(Clone)]
pub struct OpenAi {
    model: String,
    api_key: Option<String>,
    base_url: String,
    limits: ModelLimits,
    headers: Vec<(String, String)>,
    max_tokens_field: Option<MaxTokensField>,
    send_metadata: bool,
    client: OnceLock<reqwest::Client>,
}

impl OpenAi {
    /// A model by name (`gpt-4.1`, `qwen3:8b`, ...), with no API key and the defaults.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAi {
            model: model.into(),
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            limits: ModelLimits::default(),
            headers: Vec::new(),
            max_tokens_field: None,
            send_metadata: false,
            client: OnceLock::new(),
        }
    }

    /// A model by name, with the API key of `OPENAI_API_KEY` and the base URL of
    /// `OPENAI_BASE_URL` when they are set (and not blank).
    pub fn from_env(model: impl Into<String>) -> Self {
        let mut openai = OpenAi::new(model);
        if let Some(key) = http::env_var("OPENAI_API_KEY") {
            openai = openai.api_key(key);
        }
        if let Some(url) = http::env_var("OPENAI_BASE_URL") {
            openai = openai.base_url(url);
        }
        openai
    }

    /// The API key, sent as `Authorization: Bearer <key>` (an empty key sends none).
    ///
    /// Without a key, a request to OpenAI's own URL fails at once, and nothing is sent:
    ///
    /// ```
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let model = OpenAi::new("gpt-4.1").api_key(""); // an empty key is no key
    /// let agent = Agent::builder("assistant").model(model).build().unwrap();
    /// let failed = agent.run("Hi").await.unwrap_err();
    /// let AgentError::Model(error) = &failed.error else { panic!("{failed}") };
    /// assert_eq!(error.kind, ModelErrorKind::Authentication);
    /// # }
    /// ```
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.api_key = (!key.trim().is_empty()).then_some(key);
        self
    }

    /// The API's address, with its `/v1` (default [`DEFAULT_BASE_URL`]); a trailing `/` is
    /// ignored.
    ///
    /// ```
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1/");
    /// assert_eq!(ollama.url(), "http://localhost:11434/v1/chat/completions");
    /// ```
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into().trim_end_matches('/').to_owned();
        self
    }

    /// How long a whole request may take, a streamed body included (default
    /// [`DEFAULT_TIMEOUT`]). A request that takes longer fails with [`ModelErrorKind::Timeout`],
    /// its [`ModelError::limit`] naming `ModelLimits::request_timeout`.
    ///
    /// One setting with the [limits](OpenAi::limits)' request time: `.timeout(t)` is
    /// `.limits(ModelLimits::default().request_timeout(t))` when no other limit was set, and
    /// otherwise changes only the request time of the limits set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::{Agent, AgentError, ModelErrorKind, RetryPolicy};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that takes connections and never answers.
    /// let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let model = OpenAi::new("local")
    ///     .base_url(format!("http://{}/v1", silent.local_addr().unwrap()))
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
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// let model = OpenAi::new("qwen3:8b")
    ///     .base_url("http://localhost:11434/v1")
    ///     .limits(ModelLimits::default().max_response_bytes(16 << 20).stream_idle_timeout(Duration::from_secs(60)));
    /// assert_eq!(model.model_limits().response_bytes(), 16 << 20);
    /// // `timeout` is the limits' request time.
    /// let model = model.timeout(Duration::from_secs(90));
    /// assert_eq!(model.model_limits().request_time(), Duration::from_secs(90));
    /// assert_eq!(model.model_limits().stream_idle(), Duration::from_secs(60));
    /// ```
    pub fn limits(mut self, limits: ModelLimits) -> Self {
        self.limits = limits;
        // The connect timeout is the client's own.
        self.client = OnceLock::new();
        self
    }

    /// The bounds of each response (see [`limits`](OpenAi::limits)).
    pub fn model_limits(&self) -> ModelLimits {
        self.limits
    }

    /// Another header sent with each request; a header named like one this provider sends
    /// (`authorization`, `content-type`) replaces it. A name or value HTTP does not allow fails
    /// each request with [`ModelErrorKind::BadRequest`].
    ///
    /// ```
    /// use std::io::{BufRead, BufReader};
    /// use phaseo_agent::{Agent, RetryPolicy};
    /// use phaseo_agent::provider::openai::OpenAi;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A local server that reads one request's headers, then hangs up.
    /// let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let url = format!("http://{}/v1", server.local_addr().unwrap());
    /// let headers = std::thread::spawn(move || {
    ///     let lines = BufReader::new(server.accept().unwrap().0).lines().map_while(Result::ok);
    ///     lines.take_while(|line| !line.is_empty()).collect::<Vec<_>>()
    /// });
    /// let model = OpenAi::new("local").base_url(url).header("X-Title", "Ops agent");
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build().unwrap();
    /// assert!(agent.run("Hi").await.is_err()); // the server hung up
    /// assert!(headers.join().unwrap().iter().any(|h| h.eq_ignore_ascii_case("x-title: Ops agent")));
    /// # }
    /// ```
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The field that carries the output token limit (default: by the base URL, see
    /// [`MaxTokensField`]).
    ///
    /// ```
    /// use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
    ///
    /// let azure = OpenAi::new("o4-mini")
    ///     .base_url("https://my-resource.openai.azure.com/openai/v1")
    ///     .max_tokens_field(MaxTokensField::MaxCompletionTokens);
    /// assert_eq!(azure.effective_max_tokens_field(), MaxTokensField::MaxCompletionTokens);
    /// ```
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = Some(field);
        self
    }

    /// Whether to send which agent and run a request is for (default `false`), as
    /// `"user": "<agent id>/<run id>"` (from [`RequestMeta`](crate::RequestMeta)).
    ///
    /// `user` because every compatible server accepts it (OpenAI, OpenRouter, vLLM,
    /// llama-cpp-python; Ollama ignores it), where OpenAI's `metadata` is refused unless the
    /// request also sets `store: true`, which keeps the completion on OpenAI's side. OpenAI reads
    /// `user` to tell end users apart in abuse reports and (before `prompt_cache_key`) to route
    /// prompt caching; the turn is left out so that the turns of one run share a value. Neither id
    /// holds anything about a person.
    ///
    /// ```
    /// use phaseo_agent::{Agent, ScriptedModel};
    /// use phaseo_agent::provider::openai::{OpenAi, request_body};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::AgentError> {
    /// // A request as an agent makes it (recorded by a scripted model).
    /// let scripted = ScriptedModel::new().record_requests().text("Hello!");
    /// let done = Agent::builder("helper").model(scripted.clone()).build()?.run("Hi").await?;
    /// let request = &scripted.requests()[0];
    ///
    /// let body = request_body(request, &OpenAi::new("gpt-4.1").send_metadata(true), false)?;
    /// assert_eq!(body["user"], format!("helper/{}", done.state.run_id()));
    /// let body = request_body(request, &OpenAi::new("gpt-4.1"), false)?;
    /// assert!(body.get("user").is_none()); // off by default
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

    /// Where requests go: `{base_url}/chat/completions`.
    pub fn url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    /// The field the output token limit goes in: the one set with
    /// [`max_tokens_field`](OpenAi::max_tokens_field), else the default for the base URL.
    pub fn effective_max_tokens_field(&self) -> MaxTokensField {
        self.max_tokens_field
            .unwrap_or(if self.base_url == DEFAULT_BASE_URL {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            })
    }

    fn client(&self) -> &reqwest::Client {
        self.client
            .get_or_init(|| http::client(self.limits.connect_time()))
    }

    /// The headers of a request (content-type is added by `post_json`): authorization unless a
    /// configured header has its name, then the configured ones.
    fn request_headers(&self) -> Vec<(&str, String)> {
        let mut headers = Vec::with_capacity(self.headers.len() + 1);
        if let Some(key) = &self.api_key {
            if !self.has_header("authorization") {
                headers.push(("authorization", format!("Bearer {key}")));
            }
        }
        headers.extend(self.headers.iter().map(|(n, v)| (n.as_str(), v.clone())));
        headers
    }

    fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response, ModelError> {
        let has_key = self.api_key.is_some() || self.has_header("authorization");
        if !has_key && self.base_url == DEFAULT_BASE_URL {
            return Err(ModelError::new(
                ModelErrorKind::Authentication,
                "no OpenAI API key: set OPENAI_API_KEY (with OpenAi::from_env) or call \
                 OpenAi::api_key",
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

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("limits", &self.limits)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .field("max_tokens_field", &self.effective_max_tokens_field())
            .field("send_metadata", &self.send_metadata)
            .finish()
    }
}

impl Model for OpenAi {
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
            if is_json(&response) {
                // A server that ignored `stream` (or answered an error whole): one piece.
                let response = parse_response(&http::json_body(response, &self.limits).await?)?;
                for delta in whole_deltas(&response) {
                    deltas.send(delta);
                }
                return Ok(response);
            }
            let mut events = http::Events::new(response, &self.limits);
            let mut assembler = StreamAssembler::new();
            while let Some(event) = events.next().await {
                let (name, data) = event?;
                if name == "error" {
                    // A server that names the event (the data may not be OpenAI's error shape).
                    return Err(event_error(&data));
                }
                for delta in assembler.push(&data)? {
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

/// Whether a response's body is JSON rather than an event stream.
fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// The deltas of a whole response: its text, then each call in one piece.
fn whole_deltas(response: &ModelResponse) -> Vec<ModelDelta> {
    let mut deltas = Vec::with_capacity(response.tool_calls.len() + 1);
    if let Some(text) = response.text.as_ref().filter(|t| !t.is_empty()) {
        deltas.push(ModelDelta::Text { text: text.clone() });
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        deltas.push(ModelDelta::ToolCall {
            index,
            id: (!call.id.is_empty()).then(|| call.id.clone()),
            name: Some(call.name.clone()),
            arguments: call.arguments.clone(),
        });
    }
    deltas
}

// Requests.

/// The Chat Completions body of `request`, as `config` sends it (see the [module docs](self)):
/// `model`, `messages`, `tools`, `tool_choice` and `parallel_tool_calls` (with tools only),
/// `temperature`, the output limit (in the field of
/// [`OpenAi::effective_max_tokens_field`]), `user` (with [`OpenAi::send_metadata`]) and, when
/// `stream`, `"stream": true` with `"stream_options": {"include_usage": true}`.
///
/// Fails with [`ModelErrorKind::BadRequest`], before anything is sent, when there is no model
/// name, when the temperature is not a finite number, or when `tool_choice` names a tool that is
/// not offered (or requires a tool and none is offered).
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
    if let Some(temperature) = request.temperature {
        let number = temperature
            .to_string()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .ok_or_else(|| bad_request(format!("the temperature {temperature} is not a number")))?;
        body.insert("temperature".into(), Value::Number(number));
    }
    if let Some(max) = request.max_output_tokens {
        body.insert(
            config.effective_max_tokens_field().as_str().into(),
            json!(max),
        );
    }
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

// Responses.

/// A Chat Completions response body as a [`ModelResponse`]: text, tool calls, finish reason,
/// usage and id of `choices[0]` (see the [module docs](self)).
///
/// An `error` in the body (OpenRouter answers HTTP 200 with one when the model failed) is the
/// [`ModelError`] it describes; a body without a `choices[0].message` object, or with a tool
/// call that has no function name, is [`ModelErrorKind::InvalidResponse`].
///
/// ```
/// use phaseo_agent::FinishReason;
/// use phaseo_agent::provider::openai::parse_response;
/// use serde_json::json;
///
/// let response = parse_response(&json!({
///     "id": "chatcmpl-1",
///     "object": "chat.completion",
///     "choices": [{
///         "index": 0,
///         "message": {
///             "role": "assistant",
///             "content": null,
///             "tool_calls": [{
///                 "id": "call_1",
///                 "type": "function",
///                 "function": {"name": "get_status", "arguments": "{\"service\":\"api\"}"}
///             }]
///         },
///         "finish_reason": "tool_calls"
///     }],
///     "usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 64}}
/// }))
/// .unwrap();
/// assert_eq!(response.text, None);
/// assert_eq!(response.tool_calls[0].arguments, r#"{"service":"api"}"#);
/// assert_eq!(response.finish_reason, Some(FinishReason::ToolCalls));
/// let usage = response.usage.unwrap();
/// assert_eq!((usage.input_tokens, usage.output_tokens, usage.cached_input_tokens), (100, 20, Some(64)));
/// assert_eq!(response.id.as_deref(), Some("chatcmpl-1"));
/// ```
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    if let Some(error) = body_error(body) {
        return Err(error);
    }
    let choice = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| invalid("the response has no `choices`"))?;
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    if let Some(error) = choice_error(choice, finish) {
        return Err(error);
    }
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| invalid("`choices[0]` has no `message` object"))?;
    let mut text = content_text(message.get("content"), || "message.content".into())?;
    if text.is_none() {
        text = content_text(message.get("refusal"), || "message.refusal".into())?;
    }
    let mut tool_calls = Vec::new();
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, call) in calls.iter().enumerate() {
                tool_calls.push(whole_call(call, i)?);
            }
        }
        Some(_) => return Err(invalid("`message.tool_calls` is not an array")),
    }
    if tool_calls.is_empty() {
        if let Some(function) = message.get("function_call").filter(|f| f.is_object()) {
            let (name, arguments) = function_parts(function, "`message.function_call`")?;
            tool_calls.push(ToolCall::raw("", name, arguments));
        }
    }
    Ok(ModelResponse {
        text,
        tool_calls,
        finish_reason: finish.map(finish_reason),
        usage: body.get("usage").and_then(usage),
        id: response_id(body),
    })
}

/// One call of `message.tool_calls`.
fn whole_call(call: &Value, position: usize) -> Result<ToolCall, ModelError> {
    let function = call
        .get("function")
        .filter(|f| f.is_object())
        .ok_or_else(|| invalid(format!("tool call {position} has no `function` object")))?;
    let (name, arguments) = function_parts(function, &format!("tool call {position}"))?;
    let id = call.get("id").and_then(Value::as_str).unwrap_or_default();
    Ok(ToolCall::raw(id, name, arguments))
}

/// A function's name (required) and argument text.
fn function_parts(function: &Value, what: &str) -> Result<(String, String), ModelError> {
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid(format!("{what} has no function name")))?;
    let arguments = function
        .get("arguments")
        .map(arguments_text)
        .unwrap_or_default();
    Ok((name.to_owned(), arguments))
}

/// Argument text: a string as it is, `null` as nothing, anything else (an object, as some
/// servers send it) as its JSON text.
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Message text: a string (`""` is none), `null`, or an array of parts whose `text` is joined.
/// `what` names the field for an error; it is only called to write one.
fn content_text(
    content: Option<&Value>,
    what: impl FnOnce() -> String,
) -> Result<Option<String>, ModelError> {
    let text = match content {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        Some(_) => return Err(invalid(format!("`{}` is not a string", what()))),
    };
    Ok((!text.is_empty()).then_some(text))
}

/// A `finish_reason` as a [`FinishReason`].
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The token counts of a `usage` object, if it has any.
fn usage(wire: &Value) -> Option<Usage> {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64);
    let input = count(wire.get("prompt_tokens"));
    let output = count(wire.get("completion_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let cached = count(
        wire.get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens")),
    )
    .or_else(|| count(wire.get("prompt_cache_hit_tokens")));
    Some(Usage {
        input_tokens: input.unwrap_or(0),
        output_tokens: output.unwrap_or(0),
        cached_input_tokens: cached,
    })
}

fn response_id(body: &Value) -> Option<String> {
    body.get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ModelErrorKind::InvalidResponse, message)
}

/// The error a body (or a chunk) carries instead of an answer: `"error": {...}` or a string, or
/// vLLM's older top-level `{"object": "error", ...}`.
fn body_error(body: &Value) -> Option<ModelError> {
    match body.get("error") {
        Some(error @ Value::Object(_)) => Some(error_object(error)),
        Some(Value::String(message)) => Some(ModelError::new(
            ModelErrorKind::Other,
            format!("the response is an error: {message}"),
        )),
        _ if body.get("object").and_then(Value::as_str) == Some("error") => {
            Some(error_object(body))
        }
        _ => None,
    }
}

/// A choice that failed: OpenRouter's `finish_reason: "error"`, with or without an `error`.
fn choice_error(choice: &Value, finish: Option<&str>) -> Option<ModelError> {
    if let Some(error) = choice.get("error").filter(|e| e.is_object()) {
        return Some(error_object(error));
    }
    (finish == Some("error")).then(|| {
        ModelError::new(
            ModelErrorKind::Overloaded,
            "the provider ended the response with finish_reason \"error\"",
        )
    })
}

/// An error object (`{"message", "type", "code", ...}`) as a [`ModelError`] (see the
/// [module docs](self)): a numeric `code` as an HTTP status, else its `code` or `type`.
fn error_object(error: &Value) -> ModelError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no message)");
    let code = error.get("code");
    let status = code.and_then(|c| {
        c.as_u64()
            .or_else(|| c.as_str().and_then(|s| s.parse::<u64>().ok()))
            .and_then(|n| u16::try_from(n).ok())
            .filter(|n| (400..=599).contains(n))
    });
    if let Some(status) = status {
        return ModelError::from_status(status, message);
    }
    let labels = [
        code.and_then(Value::as_str),
        error.get("type").and_then(Value::as_str),
    ];
    let kind = labels
        .iter()
        .flatten()
        .find_map(|label| error_kind(label, message))
        .unwrap_or(ModelErrorKind::Other);
    let message = match labels.iter().flatten().next() {
        Some(label) => format!("{label}: {message}"),
        None => message.to_owned(),
    };
    ModelError::new(kind, message)
}

/// The kind an error `code` or `type` names, if this crate knows it.
fn error_kind(label: &str, message: &str) -> Option<ModelErrorKind> {
    Some(match label {
        "rate_limit_exceeded" | "rate_limit_error" => ModelErrorKind::RateLimited,
        "server_error"
        | "api_error"
        | "internal_server_error"
        | "internal_error"
        | "overloaded_error"
        | "service_unavailable" => ModelErrorKind::Overloaded,
        "context_length_exceeded" => ModelErrorKind::ContextTooLong,
        "invalid_request_error" | "BadRequestError" => ModelError::from_status(400, message).kind,
        "authentication_error" | "invalid_api_key" | "permission_error" => {
            ModelErrorKind::Authentication
        }
        "timeout" | "timeout_error" => ModelErrorKind::Timeout,
        _ => return None,
    })
}

/// The data of an SSE event named `error`: an error object if it is one, else its text.
fn event_error(data: &str) -> ModelError {
    match serde_json::from_str::<Value>(data) {
        Ok(value) => body_error(&value)
            .unwrap_or_else(|| ModelError::new(ModelErrorKind::Other, http::error_message(data))),
        Err(_) => ModelError::new(ModelErrorKind::Other, http::error_message(data)),
    }
}

// Streams.

/// One tool call as its pieces arrive (the `index` the server gave it is in
/// `StreamAssembler::by_index`).
#[derive(Debug)]
struct CallParts {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed response (`"stream": true`) from the `data` of its server-sent events,
/// handing out [`ModelDelta`]s as they come (see the [module docs](self) for what is read).
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
    /// Fails with the error a chunk carries (`{"error": ...}`, or OpenRouter's
    /// `finish_reason: "error"`), and with [`ModelErrorKind::InvalidResponse`] for data that is
    /// not JSON or a chunk whose `choices`, `delta`, `tool_calls` or tool-call `index` have
    /// another shape.
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
        if let Some(deltas) = self.push_typical(data) {
            return Ok(deltas);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            invalid(format!(
                "chunk {} of the stream is not JSON ({e}): {}",
                self.chunks,
                cut(data)
            ))
        })?;
        if !chunk.is_object() {
            return Err(invalid(format!(
                "chunk {} of the stream is not a JSON object: {}",
                self.chunks,
                cut(data)
            )));
        }
        if let Some(error) = body_error(&chunk) {
            return Err(error);
        }
        if self.id.is_none() {
            self.id = response_id(&chunk);
        }
        if let Some(usage) = chunk.get("usage").and_then(usage) {
            self.usage = Some(usage);
        }
        let mut deltas = Vec::new();
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(deltas),
            Some(Value::Array(choices)) => choices,
            Some(_) => {
                return Err(invalid(format!(
                    "`choices` of chunk {} is not an array",
                    self.chunks
                )));
            }
        };
        // One answer is asked for (no `n`): the choice of index 0.
        let choice = choices
            .iter()
            .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        let Some(choice) = choice else {
            return Ok(deltas);
        };
        let finish = choice.get("finish_reason").and_then(Value::as_str);
        if let Some(error) = choice_error(choice, finish) {
            return Err(error);
        }
        match choice.get("delta") {
            None | Some(Value::Null) => {}
            Some(delta @ Value::Object(_)) => {
                let calls = self.calls.len();
                self.delta(delta, &mut deltas)?;
                // A server that goes on after it said the answer was finished is broken: what
                // follows (a call cut before `[DONE]`, say) must not be run.
                if self.finish_reason.is_some() && (!deltas.is_empty() || self.calls.len() > calls)
                {
                    return Err(invalid(format!(
                        "chunk {} adds to the answer after its `finish_reason`",
                        self.chunks
                    )));
                }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "`delta` of chunk {} is not an object",
                    self.chunks
                )));
            }
        }
        if let Some(reason) = finish {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(deltas)
    }

    /// A typical chunk (text, or tool-call pieces with an `index`; no usage, error or legacy
    /// field), read into borrowing typed structs rather than a `Value` tree: the deltas, or `None`
    /// (nothing changed) for any other chunk, which [`push`](Self::push) reads in full.
    fn push_typical(&mut self, data: &str) -> Option<Vec<ModelDelta>> {
        let chunk: TypicalChunk<'_> = serde_json::from_str(data).ok()?;
        if chunk.error.is_some()
            || chunk.usage.is_some()
            || chunk.object.as_deref() == Some("error")
        {
            return None;
        }
        let choice = chunk
            .choices
            .as_ref()
            .and_then(|choices| choices.iter().find(|c| c.index.unwrap_or(0) == 0));
        if let Some(choice) = choice {
            if choice.error.is_some() || choice.finish_reason.as_deref() == Some("error") {
                return None;
            }
            if let Some(delta) = &choice.delta {
                let brings_something = delta.content.as_deref().is_some_and(|t| !t.is_empty())
                    || delta.tool_calls.as_ref().is_some_and(|p| !p.is_empty());
                if self.finish_reason.is_some() && brings_something {
                    return None;
                }
                let pieces_indexed = delta
                    .tool_calls
                    .as_ref()
                    .is_none_or(|pieces| pieces.iter().all(|p| p.index.is_some()));
                if delta.refusal.is_some() || delta.function_call.is_some() || !pieces_indexed {
                    return None;
                }
            }
        }
        // From here on, the chunk is taken.
        if self.id.is_none() {
            self.id = chunk
                .id
                .filter(|id| !id.is_empty())
                .map(|id| id.into_owned());
        }
        let mut deltas = Vec::new();
        let Some(choice) = choice else {
            return Some(deltas);
        };
        if let Some(delta) = &choice.delta {
            if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
                self.text.push_str(text);
                deltas.push(ModelDelta::Text {
                    text: text.to_owned(),
                });
            }
            if let Some(pieces) = &delta.tool_calls {
                self.saw_tool_calls = true;
                for piece in pieces {
                    let index = piece.index.unwrap_or(0);
                    let position = match self.by_index.get(&index) {
                        Some(&position) => position,
                        None => self.new_call(Some(index)),
                    };
                    let function = piece.function.as_ref();
                    self.call_parts(
                        position,
                        piece.id.as_deref().filter(|id| !id.is_empty()),
                        function.and_then(|f| f.name.as_deref()),
                        function.and_then(|f| f.arguments.as_deref()).unwrap_or(""),
                        &mut deltas,
                    );
                }
            }
        }
        if let Some(reason) = &choice.finish_reason {
            self.finish_reason = Some(reason.clone().into_owned());
        }
        Some(deltas)
    }

    fn delta(&mut self, delta: &Value, deltas: &mut Vec<ModelDelta>) -> Result<(), ModelError> {
        // Error messages name the chunk; they are written only when there is an error.
        let what = ChunkNo(self.chunks);
        for key in ["content", "refusal"] {
            if let Some(text) = content_text(delta.get(key), || format!("delta.{key} of {what}"))? {
                self.text.push_str(&text);
                deltas.push(ModelDelta::Text { text });
            }
        }
        match delta.get("tool_calls") {
            None | Some(Value::Null) => {
                // The legacy form, only from a server that never sent `tool_calls`
                // (llama-cpp-python sends both, the same call twice).
                if let Some(function) = delta.get("function_call").filter(|f| f.is_object()) {
                    if !self.saw_tool_calls {
                        let position = match self.calls.len() {
                            0 => self.new_call(None),
                            n => n - 1,
                        };
                        self.call_piece(position, None, function, deltas);
                    }
                }
            }
            Some(Value::Array(pieces)) => {
                self.saw_tool_calls = true;
                for piece in pieces {
                    self.tool_call_piece(piece, what, deltas)?;
                }
            }
            Some(_) => {
                return Err(invalid(format!(
                    "`delta.tool_calls` of {what} is not an array"
                )));
            }
        }
        Ok(())
    }

    fn tool_call_piece(
        &mut self,
        piece: &Value,
        what: ChunkNo,
        deltas: &mut Vec<ModelDelta>,
    ) -> Result<(), ModelError> {
        if !piece.is_object() {
            return Err(invalid(format!("a tool call of {what} is not an object")));
        }
        let wire_index = match piece.get("index") {
            None | Some(Value::Null) => None,
            Some(index) => Some(index.as_i64().ok_or_else(|| {
                invalid(format!(
                    "a tool call of {what} has an `index` that is not an integer"
                ))
            })?),
        };
        let id = piece
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let position = match wire_index {
            Some(index) => match self.by_index.get(&index) {
                Some(&position) => position,
                None => self.new_call(Some(index)),
            },
            // No index: the call with this id; else a new call when the piece brings a new id, or
            // a name after the last call got its arguments (two whole calls in a row); else the
            // last call.
            None => {
                let name = piece
                    .get("function")
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
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
        };
        let function = match piece.get("function") {
            None | Some(Value::Null) => &Value::Null,
            Some(function @ Value::Object(_)) => function,
            Some(_) => {
                return Err(invalid(format!(
                    "a tool call of {what} has a `function` that is not an object"
                )));
            }
        };
        self.call_piece(position, id, function, deltas);
        Ok(())
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

    /// Adds a piece (id, function name, argument text) to the call at `position`.
    fn call_piece(
        &mut self,
        position: usize,
        id: Option<&str>,
        function: &Value,
        deltas: &mut Vec<ModelDelta>,
    ) {
        let arguments = function
            .get("arguments")
            .map(arguments_text)
            .unwrap_or_default();
        let name = function.get("name").and_then(Value::as_str);
        self.call_parts(position, id, name, &arguments, deltas);
    }

    /// Adds the parts of a piece to the call at `position`, and its delta when it brings anything.
    fn call_parts(
        &mut self,
        position: usize,
        id: Option<&str>,
        name: Option<&str>,
        arguments: &str,
        deltas: &mut Vec<ModelDelta>,
    ) {
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
        call.arguments.push_str(arguments);
        if new_id.is_some() || new_name.is_some() || !arguments.is_empty() {
            deltas.push(ModelDelta::ToolCall {
                index: position,
                id: new_id,
                name: new_name,
                arguments: arguments.to_owned(),
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
        })
    }
}

/// The start of some data, for an error message (200 bytes at most).
fn cut(data: &str) -> &str {
    http::cut(data, 200)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_and_types_map_to_kinds() {
        let kind = |error: Value| error_object(&error).kind;
        assert_eq!(
            kind(json!({"code": 429, "message": "m"})),
            ModelErrorKind::RateLimited
        );
        assert_eq!(
            kind(json!({"code": "503", "message": "m"})),
            ModelErrorKind::Overloaded
        );
        assert_eq!(
            kind(json!({"type": "server_error", "message": "m"})),
            ModelErrorKind::Overloaded
        );
        assert_eq!(
            kind(json!({"code": "context_length_exceeded", "type": "invalid_request_error"})),
            ModelErrorKind::ContextTooLong
        );
        assert_eq!(
            kind(json!({"type": "invalid_request_error", "message": "bad"})),
            ModelErrorKind::BadRequest
        );
        assert_eq!(
            kind(json!({"code": "invalid_api_key"})),
            ModelErrorKind::Authentication
        );
        assert_eq!(kind(json!({"type": "mystery"})), ModelErrorKind::Other);
        assert_eq!(
            kind(json!({"code": 200, "message": "m"})),
            ModelErrorKind::Other
        );
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        let text = "é".repeat(150);
        assert!(cut(&text).len() <= 200);
        assert!(text.starts_with(cut(&text)));
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

/// A typical streamed chunk, borrowed from its text (see `StreamAssembler::push_typical`).
/// Fields that send a chunk to the full reading are kept as "present or not".
#[derive(serde::Deserialize)]
struct TypicalChunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<TypicalChoice<'a>>>,
    #[serde(default)]
    usage: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TypicalChoice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<TypicalDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct TypicalDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(default)]
    refusal: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    function_call: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<TypicalPiece<'a>>>,
}

#[derive(serde::Deserialize)]
struct TypicalPiece<'a> {
    #[serde(default)]
    index: Option<i64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<TypicalFunction<'a>>,
}

#[derive(serde::Deserialize)]
struct TypicalFunction<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}
