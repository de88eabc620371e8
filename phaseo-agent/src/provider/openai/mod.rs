//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`), whole and streamed:
//! the [`OpenAi`] model (an [`HttpModel`] speaking
//! [`ChatCompletions`]), and the pure mapping it is made of ([`request_body`],
//! [`parse_response`], [`StreamAssembler`]), which an application with its own HTTP stack can
//! reuse.
//!
//! One client for every server that speaks the Chat Completions wire format; only the base URL,
//! the key and a few settings change:
//!
//! ```
//! use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
//!
//! # fn main() -> Result<(), phaseo_agent::provider::HeaderError> {
//! // OpenAI: OPENAI_API_KEY (and OPENAI_BASE_URL, if set) from the environment.
//! let openai = OpenAi::from_env("gpt-4.1");
//!
//! // OpenRouter: its own key; `HTTP-Referer` and `X-Title` name your app on openrouter.ai.
//! let openrouter = OpenAi::new("anthropic/claude-sonnet-4.5")
//!     .base_url("https://openrouter.ai/api/v1")
//!     .api_key(std::env::var("OPENROUTER_API_KEY").unwrap_or_default())?
//!     .header("HTTP-Referer", "https://example.com")?
//!     .header("X-Title", "Ops agent")?;
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
//!     .header("api-key", "...")?
//!     .max_tokens_field(MaxTokensField::MaxCompletionTokens);
//! # let _ = (openai, openrouter, ollama, vllm, lm_studio, llama_cpp, azure);
//! # Ok(())
//! # }
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
//! DeepSeek's `prompt_cache_hit_tokens`) as [`Usage::cached_input_tokens`], and
//! `completion_tokens_details.reasoning_tokens` as [`Usage::reasoning_output_tokens`]. The response
//! `id`, and the `model` that answered ([`ModelResponse::model`](crate::ModelResponse::model)).
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
//! `data: [DONE]` ends the stream. Each chunk is read once, into values borrowed from its text
//! (the stream's reader, [`StreamAssembler`], has no second path for unusual chunks).
//!
//! # Errors
//!
//! What every provider does with a request (HTTP errors, `retry-after`, redirects, the
//! [`ModelLimits`](crate::limits::ModelLimits), a whole answer to a streamed request) is
//! [`HttpModel`]'s; what is OpenAI's own follows.
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
//! A stream that ends before a `finish_reason` or `[DONE]` came is [`ModelErrorKind::Transport`]
//! (retried). A body or chunk that is not JSON (or has a key twice), or whose `choices`,
//! `tool_calls` or `function` are not the shapes above, is [`ModelErrorKind::InvalidResponse`].
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
//!   empty message; see above for one tool); it never sends the usage of a stream. It does not
//!   stream a turn whose tool choice is `"auto"` when the model calls a tool: its event stream
//!   ends before the first event, and the provider asks for that turn, and every later one,
//!   whole (see [`HttpModel::streams`]).
//! - **OpenRouter** sends `: OPENROUTER PROCESSING` comments in streams (skipped).
//!
//! Sources: OpenAI's API reference for Chat Completions
//! (platform.openai.com/docs/api-reference/chat, its *streaming* and *function calling* guides),
//! OpenRouter's *API reference*, *Streaming* and *Errors* pages (openrouter.ai/docs), Ollama's
//! OpenAI layer (`openai/openai.go` and `middleware/openai.go` in github.com/ollama/ollama),
//! vLLM's `entrypoints/openai/protocol.py`, llama.cpp's `tools/server` code, and llama-cpp-python
//! 0.3.36's server, run and recorded (`tests/fixtures/openai/README.md` lists each shape's source).

// `config` (the model type and its settings) first; a stream's chunks are read with what whole
// responses use (`response`).
mod config;
mod request;
mod response;
mod chunk;
mod stream;

use reqwest::header::AUTHORIZATION;

pub use config::{ChatCompletions, DEFAULT_BASE_URL, DEFAULT_TIMEOUT, MaxTokensField, OpenAi};
pub use request::request_body;
pub use response::parse_response;
pub use stream::StreamAssembler;

#[cfg(doc)]
use crate::error::ModelErrorKind;
#[cfg(doc)]
use crate::model::request::{
    FinishReason, ModelDelta, ModelRequest, ToolChoice, ToolDefinition, Usage,
};
use crate::provider::shell::format::{Api, Bodies, Format, KeyHeader};
use crate::provider::shell::model::HttpModel;
use crate::provider::shell::wire::Wire;
#[cfg(doc)]
use crate::schema::dialect::Dialect;

impl Format for ChatCompletions {
    const API: Api = Api::new(
        "OpenAi",
        "OPENAI",
        DEFAULT_BASE_URL,
        "/chat/completions",
        "openai",
    );
    const KEY: KeyHeader = KeyHeader(AUTHORIZATION, "Bearer ");
    const BODIES: Bodies<Self> = Bodies(request_body, parse_response);
    type Stream = StreamAssembler;

    fn debug(model: &HttpModel<Self>, fields: &mut std::fmt::DebugStruct<'_, '_>) {
        fields.field("max_tokens_field", &model.effective_max_tokens_field());
    }
}

impl Wire for ChatCompletions {}
