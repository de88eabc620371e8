//! Anthropic Messages (`POST /v1/messages`), whole and streamed: the [`Anthropic`] model (an
//! [`HttpModel`] speaking [`MessagesApi`]), and the pure mapping it
//! is made of ([`request_body`], [`parse_response`], [`StreamAssembler`]), which an application
//! with its own HTTP stack can reuse.
//!
//! ```no_run
//! use phaseo_agent::Agent;
//! use phaseo_agent::provider::anthropic::Anthropic;
//!
//! # async fn example() -> Result<(), phaseo_agent::AgentError> {
//! // ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL, if set) from the environment.
//! let model = Anthropic::from_env("claude-sonnet-4-5").max_output_tokens(2_048);
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
//! `cache_read_input_tokens` and [`Usage::cache_creation_input_tokens`]
//! `cache_creation_input_tokens`. They then mean what they mean for other providers (the cached
//! tokens are part of the input).
//!
//! # Errors
//!
//! What every provider does with a request (HTTP errors and their statuses, `retry-after`,
//! redirects, the [`ModelLimits`](crate::limits::ModelLimits), a whole answer to a streamed
//! request) is [`HttpModel`]'s; Anthropic's 529 is overloaded, like a
//! 5xx. What is Anthropic's own: an `error` event in a stream (Anthropic sends one when it fails
//! after the response started, typically `overloaded_error`), and a whole body of
//! `"type": "error"`, become the kind their `error.type` would have as an HTTP status:
//! `overloaded_error` and `api_error` overloaded, `rate_limit_error` rate limited,
//! `timeout_error` a timeout, `invalid_request_error` and `not_found_error` a bad request (or
//! context too long when the message says so), `request_too_large` context too long,
//! `authentication_error` and `permission_error` authentication, `billing_error` a bad request;
//! an unknown type is [`ModelErrorKind::Other`]. A stream that ends before `message_stop` is
//! [`ModelErrorKind::Transport`] (retried).
//!
//! Sources: the Messages API reference (docs.anthropic.com/en/api/messages), *Streaming
//! Messages* (platform.claude.com/docs/en/build-with-claude/streaming), *How to implement tool
//! use* (platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use) and *Errors*
//! (docs.anthropic.com/en/api/errors).

// `config` (the model type and its settings) first; a stream's events are read with what whole
// responses use (`response`).
mod config;
mod request;
mod response;
mod stream;

use reqwest::header::{HeaderMap, HeaderName};

pub use config::{
    Anthropic, DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, DEFAULT_VERSION, MessagesApi,
};
pub use request::{RAW_ARGUMENTS_KEY, request_body};
pub use response::parse_response;
pub use stream::StreamAssembler;

#[cfg(doc)]
use crate::error::ModelErrorKind;
#[cfg(doc)]
use crate::model::request::{FinishReason, ToolChoice, Usage};
use crate::provider::shell::format::{Api, Bodies, Format, KeyHeader};
use crate::provider::shell::model::HttpModel;
use crate::provider::shell::wire::Wire;
#[cfg(doc)]
use crate::schema::dialect::Dialect;

/// The header of Anthropic's API key.
const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

impl Format for MessagesApi {
    const API: Api = Api::new(
        "Anthropic",
        "ANTHROPIC",
        DEFAULT_BASE_URL,
        "/v1/messages",
        "anthropic",
    );
    const KEY: KeyHeader = KeyHeader(X_API_KEY, "");
    const BODIES: Bodies<Self> = Bodies(request_body, parse_response);
    type Stream = StreamAssembler;

    fn headers(&self, headers: &mut HeaderMap) {
        headers.insert("anthropic-version", self.version.clone());
    }

    fn debug(model: &HttpModel<Self>, fields: &mut std::fmt::DebugStruct<'_, '_>) {
        fields.field("version", &model.wire.version);
    }
}

impl Wire for MessagesApi {}
