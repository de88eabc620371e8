//! [`OpenAi`] and its own settings: the field of the output token limit ([`MaxTokensField`]).

use std::time::Duration;

use crate::provider::shell::model::HttpModel;
#[cfg(doc)]
use crate::{limits::ModelLimits, model::request::ModelRequest};

/// OpenAI's API address, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// How long a whole request may take when [`OpenAi::timeout`] is not set: 3 minutes,
/// [`ModelLimits::default`]'s request time (its docs say why: the longest ordinary turn takes one
/// to three, and a stuck one should fail in minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);

/// A model behind an OpenAI-compatible Chat Completions endpoint: a [`Model`](crate::Model) for
/// an agent.
///
/// An [`HttpModel`] speaking [`ChatCompletions`]: its settings are the [`HttpModel`]'s (key,
/// base URL, headers, limits, sampling defaults, streaming, metadata, HTTP client), plus
/// [`max_tokens_field`](OpenAi::max_tokens_field). See the [module docs](super) for OpenAI,
/// OpenRouter, Ollama, vLLM, LM Studio and llama.cpp, and for how a request is mapped.
///
/// - [`api_key`](OpenAi::api_key): sent as `Authorization: Bearer <key>`.
/// - [`base_url`](OpenAi::base_url): default [`DEFAULT_BASE_URL`]; requests go to
///   `{base_url}/chat/completions`, so the URL includes the `/v1`.
/// - [`timeout`](OpenAi::timeout): default [`DEFAULT_TIMEOUT`], 3 minutes.
/// - [`header`](OpenAi::header): OpenRouter's `HTTP-Referer` and `X-Title`, Azure's `api-key`, a
///   proxy's own.
/// - [`temperature`](OpenAi::temperature), [`top_p`](OpenAi::top_p),
///   [`max_output_tokens`](OpenAi::max_output_tokens), [`stop`](OpenAi::stop) and
///   [`seed`](OpenAi::seed): the defaults of requests that set none (unset: the server's own).
///   Set `max_output_tokens` for a small local model, which may otherwise write until its
///   context is full.
/// - [`streaming`](OpenAi::streaming): whether a streamed run asks the server to stream (a
///   server that refuses is asked whole; see [`streams`](OpenAi::streams)).
/// - [`send_metadata`](OpenAi::send_metadata): when on, `"user": "<agent id>/<run id>"`.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::provider::openai::OpenAi;
///
/// # fn main() -> Result<(), phaseo_agent::provider::HeaderError> {
/// let model = OpenAi::new("gpt-4.1")
///     .api_key("sk-...")?
///     .base_url("http://localhost:8000/v1/")
///     .timeout(Duration::from_secs(120));
/// assert_eq!(model.model_name(), "gpt-4.1");
/// assert_eq!(model.url(), "http://localhost:8000/v1/chat/completions");
/// // The key is never printed.
/// assert!(!format!("{model:?}").contains("sk-"));
/// # Ok(())
/// # }
/// ```
pub type OpenAi = HttpModel<ChatCompletions>;

/// The wire format of [`OpenAi`]: OpenAI-compatible Chat Completions, with its own setting, the
/// field of the output token limit ([`OpenAi::max_tokens_field`]).
#[derive(Debug, Clone, Default)]
pub struct ChatCompletions {
    pub(crate) max_tokens_field: Option<MaxTokensField>,
}

/// Which field carries the output token limit ([`ModelRequest::max_output_tokens`]).
///
/// OpenAI deprecated `max_tokens` for `max_completion_tokens`, and its reasoning models (o-series,
/// GPT-5) refuse `max_tokens`; compatible servers mostly know only `max_tokens` (Ollama and
/// llama-cpp-python ignore `max_completion_tokens` without a word, so the limit would be lost).
/// The default therefore follows the base URL: `max_completion_tokens` for OpenAI's own
/// ([`DEFAULT_BASE_URL`]), `max_tokens` for every other. Set it with
/// [`OpenAi::max_tokens_field`] for a server that wants the other one (Azure OpenAI with a
/// reasoning model, say).
///
/// ```
/// use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
///
/// let openai = OpenAi::new("gpt-4.1");
/// assert_eq!(openai.effective_max_tokens_field(), MaxTokensField::MaxCompletionTokens);
/// let ollama = OpenAi::new("qwen3:8b").base_url("http://localhost:11434/v1");
/// assert_eq!(ollama.effective_max_tokens_field().as_str(), "max_tokens");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: every compatible server, and OpenAI's older models.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI (required by its reasoning models), vLLM, OpenRouter.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

impl HttpModel<ChatCompletions> {
    /// The field that carries the output token limit (default: by the base URL, see
    /// [`MaxTokensField`]).
    ///
    /// ```
    /// use phaseo_agent::provider::openai::{MaxTokensField, OpenAi};
    ///
    /// let azure = OpenAi::new("o4-mini")
    ///     .base_url("https://my-resource.openai.azure.com/openai/v1")
    ///     .max_tokens_field(MaxTokensField::MaxCompletionTokens);
    /// assert_eq!(azure.effective_max_tokens_field(), MaxTokensField::MaxCompletionTokens);
    /// ```
    pub fn max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.wire.max_tokens_field = Some(field);
        self
    }

    /// The field the output token limit goes in: the one set with
    /// [`max_tokens_field`](OpenAi::max_tokens_field), else the default for the base URL.
    pub fn effective_max_tokens_field(&self) -> MaxTokensField {
        self.wire
            .max_tokens_field
            .unwrap_or(if self.base_url == DEFAULT_BASE_URL {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ModelErrorKind;
    use crate::model::message::Message;
    use crate::model::request::{Model, ModelRequest};

    fn request() -> ModelRequest<'static> {
        ModelRequest {
            messages: vec![Message::User {
                content: "Hi".into(),
            }]
            .into(),
            ..ModelRequest::default()
        }
    }

    /// `from_env`'s reading, with these variables.
    fn from(variables: &[(&str, &str)]) -> OpenAi {
        let read = |name: &str| {
            let found = variables.iter().find(|(n, _)| *n == name);
            found.map(|(_, value)| (*value).to_owned())
        };
        OpenAi::from_variables("gpt-4.1", read)
    }

    #[test]
    fn from_env_reads_the_key_trimmed_and_the_base_url() {
        let model = from(&[
            ("OPENAI_API_KEY", "sk-test\n"),
            ("OPENAI_BASE_URL", "http://localhost:11434/v1/"),
        ]);
        assert_eq!(model.url(), "http://localhost:11434/v1/chat/completions");
        assert_eq!(
            model.sent_headers(),
            [
                ("authorization".to_owned(), "Bearer sk-test".to_owned()),
                ("content-type".to_owned(), "application/json".to_owned()),
            ]
        );
    }

    #[tokio::test]
    async fn a_key_from_env_that_no_header_can_carry_fails_each_request_unsent() {
        // A discard port: were anything sent, the error would be a transport one.
        let model = from(&[
            ("OPENAI_API_KEY", "sk-one\nsk-two"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ]);
        assert!(format!("{model:?}").contains("<unusable>"));
        let error = model.respond(&request()).await.unwrap_err();
        assert_eq!(error.kind, ModelErrorKind::Authentication, "{error}");
        assert!(error.message.contains("OPENAI_API_KEY"), "{error}");
        assert!(!error.message.contains("sk-"), "{error}");
        // A key set afterwards replaces it.
        let model = model.api_key("sk-three").unwrap();
        assert!(format!("{model:?}").contains("<redacted>"));
    }
}
