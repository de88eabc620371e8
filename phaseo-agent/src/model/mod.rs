//! Models: the conversation, the [`Model`](request::Model) interface, and the scripted model.
//!
//! Stage 1, above `error` only. Providers (an OpenAI-compatible client, Anthropic) go here, one file
//! each, built on `request`.

pub(crate) mod message;
pub(crate) mod request;
pub(crate) mod scripted;
