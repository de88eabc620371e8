//! The hooks of a wire format ([`Format`], [`Assemble`]) and the facts it declares: public
//! items of a module no other crate can reach, so that only this crate implements or calls them
//! (the [`Wire`](crate::provider::shell::wire::Wire) trait is sealed by them).

use reqwest::header::{HeaderMap, HeaderName};
use serde_json::Value;

use crate::error::ModelError;
use crate::model::request::{ModelDelta, ModelRequest, ModelResponse};
use crate::provider::shell::model::HttpModel;

/// What a provider is called, where its API is, and how its key is sent: the facts of a
/// [`Format`], the same kind for every provider.
pub struct Api {
    /// The model type's name, for messages and `Debug` (`OpenAi`).
    pub(crate) model_type: &'static str,
    /// The prefix of the environment variables `from_env` reads (`OPENAI`: `OPENAI_API_KEY`,
    /// `OPENAI_BASE_URL`).
    pub(crate) env: &'static str,
    /// The provider's own address: without a key, a request there fails at once.
    pub(crate) default_base_url: &'static str,
    /// Where requests go, after the base URL (`/chat/completions`).
    pub(crate) path: &'static str,
    /// The provider's name in telemetry (`gen_ai.provider.name`: `openai`, `anthropic`). A
    /// compatible server (Ollama, vLLM, llama.cpp's) speaks the same wire and is named alike, as
    /// the conventions do.
    pub(crate) provider: &'static str,
}

impl Api {
    /// The facts of a provider: its model type's name, its environment variables' prefix, its
    /// own address and its requests' path.
    pub(crate) const fn new(
        model_type: &'static str,
        env: &'static str,
        default_base_url: &'static str,
        path: &'static str,
        provider: &'static str,
    ) -> Self {
        Api {
            model_type,
            env,
            default_base_url,
            path,
            provider,
        }
    }

    /// The environment variable of `what` (`API_KEY`, `BASE_URL`).
    pub(crate) fn variable(&self, what: &str) -> String {
        format!("{}_{what}", self.env)
    }
}

/// The header an API key goes in, and what goes before the key there (`Bearer `), if anything.
pub struct KeyHeader(pub(crate) HeaderName, pub(crate) &'static str);

/// The bodies of a format: the request's it sends (each provider's public `request_body`) and
/// the whole response's it reads (each provider's public `parse_response`).
pub struct Bodies<W>(pub(crate) RequestBody<W>, pub(crate) ParseResponse);

/// A request's body, or why it cannot be sent ([`ModelErrorKind::BadRequest`]).
///
/// [`ModelErrorKind::BadRequest`]: crate::ModelErrorKind::BadRequest
pub type RequestBody<W> = fn(&ModelRequest<'_>, &HttpModel<W>, bool) -> Result<Value, ModelError>;

/// A whole response's body as a response, or the error it carries.
pub type ParseResponse = fn(&Value) -> Result<ModelResponse, ModelError>;

/// The mapping of one provider's API (see [`Wire`](crate::provider::Wire)).
pub trait Format: Clone + Default + Send + Sync + 'static {
    /// The provider's names and addresses.
    const API: Api;
    /// The header the key goes in.
    const KEY: KeyHeader;
    /// The request's body and the reading of a whole response.
    const BODIES: Bodies<Self>;

    /// Reads a streamed response's events.
    type Stream: Assemble;

    /// Where a request for `model` goes, streamed or not; `base_url` has no trailing `/`.
    fn url(base_url: &str, model: &str, stream: bool) -> String {
        let _ = (model, stream);
        format!("{base_url}{}", Self::API.path)
    }

    /// The format's own headers (a version, say), beside the key and `content-type`; a
    /// configured header of the same name replaces each.
    fn headers(&self, headers: &mut HeaderMap) {
        let _ = headers;
    }

    /// The format's own settings, for `Debug`.
    fn debug(model: &HttpModel<Self>, fields: &mut std::fmt::DebugStruct<'_, '_>);
}

/// A streamed response, read one server-sent event at a time.
pub trait Assemble: Default + Send {
    /// Reads one event (its name and data) and returns the deltas it carries, or the error
    /// it is (or carries).
    fn event(&mut self, name: &str, data: &str) -> Result<Vec<ModelDelta>, ModelError>;

    /// Whether the response is whole: the events after this are not read.
    fn is_complete(&self) -> bool;

    /// The whole response, once the events are over (or it is complete).
    fn finish(self) -> Result<ModelResponse, ModelError>;
}
