//! Model providers: real models over HTTP, behind cargo features.
//!
//! - `openai` (module `openai`): OpenAI-compatible Chat Completions (OpenAI, OpenRouter, Ollama, vLLM,
//!   LM Studio, llama.cpp's server), whole and streamed;
//! - `anthropic` (module `anthropic`): Anthropic Messages, whole and streamed.
//!
//! Both are one type, [`HttpModel`], speaking a different [`Wire`] format: `OpenAi` is
//! `HttpModel<ChatCompletions>` and `Anthropic` is `HttpModel<MessagesApi>`. What they share is
//! written once: the settings (model name, key, base URL, headers, [limits](crate::limits),
//! metadata, the HTTP client), the request (its headers, the post, bounded bodies, redirects,
//! `retry-after`) and the streaming loop. A wire format is only its mapping: the URL and the key's
//! header, the request body, a whole response, a stream's events and the errors inside them.
//!
//! Each provider's mapping is made of pure, public functions (a request to wire JSON, wire JSON to
//! a response, a stream event to deltas), so an application with its own HTTP stack can reuse it;
//! an application that only wants its own `reqwest` client (proxies, TLS roots, a shared pool)
//! hands it to [`HttpModel::http_client`].
//!
//! Stage 3, above `error`, `model` and `schema` (a provider converts each tool's schema to its
//! dialect); uses no later stage.

// `sse` before `http`, which reads its events with it; `shell` (what every provider shares)
// before the providers.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) mod sse;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) mod http;
#[cfg(any(feature = "openai", feature = "anthropic"))]
mod shell;
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(feature = "anthropic")]
pub mod anthropic;

#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use shell::header::HeaderError;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use shell::model::HttpModel;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use shell::wire::Wire;

/// The `reqwest` this crate is built with (0.12), for building a client to hand to
/// [`HttpModel::http_client`] without a version of your own to keep in step.
///
/// ```
/// use phaseo_agent::provider::openai::OpenAi;
/// use phaseo_agent::provider::reqwest;
///
/// let client = reqwest::Client::builder()
///     .redirect(reqwest::redirect::Policy::none())
///     .build()
///     .unwrap();
/// let model = OpenAi::new("gpt-4.1").http_client(client);
/// # let _ = model;
/// ```
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub use reqwest;
