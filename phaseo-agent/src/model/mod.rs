//! Models: the conversation, the [`Model`](request::Model) interface, and the scripted model.
//!
//! Stage 1, above `error` only. The providers that implement [`Model`](request::Model) over HTTP
//! are in `provider`.

pub(crate) mod message;
pub(crate) mod request;
pub(crate) mod scripted;
