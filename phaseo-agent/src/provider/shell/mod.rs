//! What every provider shares, written once: the settings of an [`HttpModel`](model::HttpModel)
//! (`model`, `settings`), the headers it checks when they are set (`header`), its sampling
//! defaults and how they are sent (`sampling`), what a wire format must say (`format`, `wire`),
//! and the request, the streaming loop and its fall-back to a whole answer (`respond`).
//!
//! A provider (`openai`, `anthropic`) is a [`Wire`](wire::Wire) format: its URL and key header,
//! its request body, its whole response, its stream's events and the errors inside them.

// `model` (the data, with its checked headers and sampling defaults) first: the wire format's
// hooks (`format`) take it; `settings` and `respond` need both.
pub(crate) mod header;
pub(crate) mod sampling;
pub(crate) mod model;
pub(crate) mod format;
pub(crate) mod wire;
mod settings;
mod respond;
