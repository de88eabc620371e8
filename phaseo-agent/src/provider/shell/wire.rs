//! What a provider is: a wire format ([`Wire`]), whose hooks ([`Format`]) the shell calls.

use crate::provider::shell::format::Format;
#[cfg(doc)]
use crate::provider::shell::model::HttpModel;

/// A wire format an [`HttpModel`] speaks: `ChatCompletions` (OpenAI-compatible, behind the
/// `openai` feature) or `MessagesApi` (Anthropic, behind `anthropic`).
///
/// The format holds its provider's own settings (`OpenAi::max_tokens_field`,
/// `Anthropic::max_tokens`, ...) and its mapping: the URL and the key's header, the request body,
/// a whole response, a stream's events and the errors inside them. Everything else (settings,
/// headers, the request, limits, redirects, retries' `retry-after`, the streaming loop) is the
/// [`HttpModel`]'s, the same for every format.
///
/// Sealed: the formats are this crate's. A model with another API implements
/// [`Model`](crate::Model) itself.
///
/// ```
/// use phaseo_agent::Model;
/// use phaseo_agent::provider::{HttpModel, Wire};
/// use phaseo_agent::provider::openai::OpenAi;
///
/// // Whatever the format, an `HttpModel` is a model with the same settings.
/// fn local<W: Wire>(model: HttpModel<W>) -> impl Model {
///     model.base_url("http://localhost:8080/v1").send_metadata(true)
/// }
/// let model = local(OpenAi::new("qwen3:8b"));
/// # let _ = model;
/// ```
pub trait Wire: Format {}
