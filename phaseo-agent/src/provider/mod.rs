//! Model providers: real models over HTTP, behind cargo features.
//!
//! - `openai` (module `openai`): OpenAI-compatible Chat Completions (OpenAI, OpenRouter, Ollama, vLLM,
//!   LM Studio, llama.cpp's server), whole and streamed;
//! - `anthropic` (module `anthropic`): Anthropic Messages, whole and streamed.
//!
//! Each provider's mapping is made of pure, public functions (a request to wire JSON, wire JSON to
//! a response, a stream event to deltas), so an application with its own HTTP client can reuse it.
//!
//! Stage 3, above `error`, `model` and `schema` (a provider converts each tool's schema to its
//! dialect); uses no later stage.

// `sse` before `http`, which reads its events with it.
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) mod sse;
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) mod http;
#[cfg(feature = "openai")]
pub mod openai;
#[cfg(feature = "anthropic")]
pub mod anthropic;
