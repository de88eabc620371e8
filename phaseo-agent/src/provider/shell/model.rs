//! The data of a provider: [`HttpModel`], the same for every wire format.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use reqwest::header::{HeaderName, HeaderValue};

use crate::limits::ModelLimits;
use crate::provider::http::Client;
use crate::provider::shell::header::HeaderError;
use crate::provider::shell::sampling::Sampling;

/// A model behind an HTTP API, speaking the wire format `W`: a [`Model`](crate::Model) for an
/// agent.
///
/// Used through its aliases: [`OpenAi`](crate::provider::openai::OpenAi) is
/// `HttpModel<ChatCompletions>` (OpenAI-compatible Chat Completions) and
/// [`Anthropic`](crate::provider::anthropic::Anthropic) is `HttpModel<MessagesApi>` (Anthropic
/// Messages). Every setting below means the same for both; each provider's module lists its own
/// settings and how it maps a request.
///
/// - [`api_key`](HttpModel::api_key): sent in the provider's key header. Without one, a request to
///   the provider's own URL fails at once with [`ModelErrorKind::Authentication`] (nothing is
///   sent); to any other URL (a local server, a proxy) it is sent without the header.
/// - [`base_url`](HttpModel::base_url): where the API is (each provider's `DEFAULT_BASE_URL`).
/// - [`header`](HttpModel::header): any other header; one named like a header the provider sends
///   replaces it.
/// - [`limits`](HttpModel::limits) and [`timeout`](HttpModel::timeout): the bounds of each
///   response ([`ModelLimits`]).
/// - [`temperature`](HttpModel::temperature), [`top_p`](HttpModel::top_p),
///   [`max_output_tokens`](HttpModel::max_output_tokens), [`stop`](HttpModel::stop) and
///   [`seed`](HttpModel::seed): the sampling defaults of every request; a request's own (a
///   run's first turn, a tool's next-turn override) takes precedence.
/// - [`streaming`](HttpModel::streaming): whether a streamed run asks the server to stream (on
///   by default; a server that refuses is asked whole, see [`streams`](HttpModel::streams)).
/// - [`send_metadata`](HttpModel::send_metadata): whether the agent's and run's ids go with each
///   request (off by default).
/// - [`http_client`](HttpModel::http_client): your own `reqwest::Client`; by default, one of this
///   crate's that never follows a redirect.
///
/// Setters that take a header (`api_key`, `header`) return a [`Result`]: a name or value HTTP
/// cannot carry is a [`HeaderError`] there, never a failure of every request. Cloning shares the
/// HTTP client once it is built. `Debug` shows every setting but never the key or a header's
/// value.
///
/// # What a request does
///
/// It is posted as JSON to the provider's URL, with the key header, the provider's own headers
/// and the configured ones. Then:
///
/// - **A redirect is not followed.** Following one would send the key, the headers and (on 307
///   and 308) the whole conversation wherever the server points, another host included, and an
///   API endpoint never legitimately redirects a `POST`. A 3xx is
///   [`ModelErrorKind::BadRequest`] (not retried) with its status, naming where it pointed
///   (without the query) and saying to set `base_url` to the final address. With your own client,
///   see [`http_client`](HttpModel::http_client).
/// - **An HTTP error** is mapped by its status ([`ModelError::from_status`]: 429 rate limited, 529
///   and 5xx overloaded, both retried by the agent; 400, 401, 403, 404 not), with the body's
///   `error.message` (or another message field the provider uses) and the `retry-after-ms` or
///   `retry-after` header. A `retry-after` that is not a non-negative number (an HTTP date, say)
///   is ignored, and one over a day is read as a day.
/// - **Responses are read within the [`ModelLimits`]**: a body or stream over
///   `max_response_bytes`, or one event over `max_event_bytes`, is
///   [`ModelErrorKind::LimitExceeded`] (not retried); silence over `stream_idle_timeout` (before
///   a streamed response's headers, or between two pieces) and a request over `request_timeout`
///   are
///   [`ModelErrorKind::Timeout`] (retried); [`ModelError::limit`] says which. An error body is
///   read up to 64 KiB.
/// - **Streamed**, the body is read as server-sent events by the provider's stream assembler,
///   each delta handed out as it comes. A server that answers a streamed request with a whole JSON
///   body (`Content-Type: application/json`: it ignored `stream`) is read as a whole response,
///   handed out as one text delta and one delta per call. A server that refuses to stream (an
///   HTTP error that says so, or a stream that ends before its first event) is asked the same
///   request whole, once, and whole from then on: see [`streams`](HttpModel::streams).
/// - A base URL that does not make a URL is [`ModelErrorKind::BadRequest`], before anything is
///   sent.
///
/// [`ModelErrorKind::Authentication`]: crate::ModelErrorKind::Authentication
/// [`ModelErrorKind::BadRequest`]: crate::ModelErrorKind::BadRequest
/// [`ModelErrorKind::LimitExceeded`]: crate::ModelErrorKind::LimitExceeded
/// [`ModelErrorKind::Timeout`]: crate::ModelErrorKind::Timeout
/// [`ModelError::from_status`]: crate::ModelError::from_status
/// [`ModelError::limit`]: crate::ModelError::limit
#[derive(Clone)]
pub struct HttpModel<W> {
    /// The model name sent when the request names none.
    pub(crate) model: String,
    pub(crate) key: Key,
    /// Without a trailing `/`.
    pub(crate) base_url: String,
    pub(crate) limits: ModelLimits,
    /// The configured headers, checked, in the order they were set.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) send_metadata: bool,
    pub(crate) client: Client,
    /// The sampling defaults, each sent when a request does not set its own.
    pub(crate) sampling: Sampling,
    /// Whether a streamed run asks the server to stream (the `streaming` setting).
    pub(crate) streaming: bool,
    /// Set when the server refused to stream: later streamed runs ask for whole answers. Shared
    /// by clones (an agent holds one), and new for another base URL.
    pub(crate) refused_stream: Arc<AtomicBool>,
    /// The wire format, with its own settings.
    pub(crate) wire: W,
}

/// The API key, as the value of the provider's key header.
#[derive(Clone)]
pub(crate) enum Key {
    None,
    /// The whole header value (`Bearer <key>`, say), marked sensitive.
    Set(HeaderValue),
    /// The key `from_env` read could not be a header value: each request fails with this, and
    /// nothing is sent (a key left out would fail as a missing key, which it is not).
    Unusable(HeaderError),
}
