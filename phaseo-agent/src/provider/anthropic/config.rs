//! [`Anthropic`] and its own setting: the `anthropic-version`.

use std::time::Duration;

use reqwest::header::HeaderValue;

use crate::provider::shell::header::{self, HeaderError};
use crate::provider::shell::model::HttpModel;
#[cfg(doc)]
use crate::{limits::ModelLimits, model::request::ModelRequest};

/// The API's address when none is configured.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent when none is configured.
pub const DEFAULT_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when neither the request nor [`Anthropic::max_output_tokens`] sets
/// one (the API requires it).
pub const DEFAULT_MAX_TOKENS: u32 = 4_096;
/// How long a whole request may take when [`Anthropic::timeout`] is not set: 3 minutes,
/// [`ModelLimits::default`]'s request time (its docs say why: the longest ordinary turn takes one
/// to three, and a stuck one should fail in minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);

/// An Anthropic model over the Messages API: a [`Model`](crate::Model) for an agent.
///
/// An [`HttpModel`] speaking [`MessagesApi`]: its settings are the [`HttpModel`]'s (key, base
/// URL, headers, limits, sampling defaults, metadata, HTTP client), plus
/// [`version`](Anthropic::version). See the [module docs](super) for how a conversation is
/// mapped.
///
/// - [`api_key`](Anthropic::api_key): sent as `x-api-key`.
/// - [`base_url`](Anthropic::base_url): default [`DEFAULT_BASE_URL`]; requests go to
///   `{base_url}/v1/messages`.
/// - [`timeout`](Anthropic::timeout): default [`DEFAULT_TIMEOUT`], 3 minutes.
/// - [`max_output_tokens`](Anthropic::max_output_tokens): Anthropic requires `max_tokens` on
///   every request. Default [`DEFAULT_MAX_TOKENS`], 4,096: the output limit of the Claude 3
///   models (Haiku, Opus), the lowest of the models still served, so every model accepts the
///   default; and enough for an agent's turns (tool calls and short answers), while a runaway
///   answer stops early. Raise it for long answers. A request's
///   [`ModelRequest::max_output_tokens`] (a tool's next-turn override) takes precedence.
/// - [`temperature`](Anthropic::temperature), [`top_p`](Anthropic::top_p) and
///   [`stop`](Anthropic::stop) (sent as `stop_sequences`): the defaults of requests that set
///   none; [`seed`](Anthropic::seed) is not sent (the API has none).
/// - [`version`](Anthropic::version): the `anthropic-version` header, default
///   [`DEFAULT_VERSION`].
/// - [`header`](Anthropic::header): `anthropic-beta`, a proxy's own.
/// - [`send_metadata`](Anthropic::send_metadata): when on, the run id is sent as
///   `metadata.user_id`.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::provider::anthropic::Anthropic;
///
/// # fn main() -> Result<(), phaseo_agent::provider::HeaderError> {
/// let model = Anthropic::new("claude-sonnet-4-5")
///     .api_key("sk-ant-...")?
///     .base_url("http://localhost:8080")
///     .timeout(Duration::from_secs(120))
///     .max_output_tokens(8_192)
///     .header("anthropic-beta", "token-efficient-tools-2025-02-19")?;
/// assert_eq!(model.model_name(), "claude-sonnet-4-5");
/// assert_eq!(model.url(), "http://localhost:8080/v1/messages");
/// // The key is never printed.
/// assert!(!format!("{model:?}").contains("sk-ant"));
/// # Ok(())
/// # }
/// ```
pub type Anthropic = HttpModel<MessagesApi>;

/// The wire format of [`Anthropic`]: Anthropic Messages, with its own setting, the
/// `anthropic-version` ([`Anthropic::version`]).
#[derive(Debug, Clone)]
pub struct MessagesApi {
    pub(crate) version: HeaderValue,
}

impl Default for MessagesApi {
    fn default() -> Self {
        MessagesApi {
            version: HeaderValue::from_static(DEFAULT_VERSION),
        }
    }
}

impl HttpModel<MessagesApi> {
    /// The `anthropic-version` header (default [`DEFAULT_VERSION`]). Like any header, a value
    /// with a control character is a [`HeaderError`] here, and the whitespace around it is
    /// dropped.
    ///
    /// ```
    /// use std::io::{BufRead, BufReader};
    /// use phaseo_agent::{Agent, RetryPolicy};
    /// use phaseo_agent::provider::anthropic::Anthropic;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // A local server that reads one request's headers, then hangs up.
    /// let server = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let url = format!("http://{}", server.local_addr()?);
    /// let headers = std::thread::spawn(move || {
    ///     let lines = BufReader::new(server.accept().unwrap().0).lines().map_while(Result::ok);
    ///     lines.take_while(|line| !line.is_empty()).collect::<Vec<_>>()
    /// });
    /// let model = Anthropic::new("claude-sonnet-4-5").base_url(url).api_key("sk-ant-...")?.version("2099-01-01")?;
    /// let agent = Agent::builder("assistant").model(model).model_retries(RetryPolicy::none()).build()?;
    /// assert!(agent.run("Hi").await.is_err()); // the server hung up
    /// assert!(headers.join().unwrap().iter().any(|h| h.eq_ignore_ascii_case("anthropic-version: 2099-01-01")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn version(mut self, version: impl AsRef<str>) -> Result<Self, HeaderError> {
        let (_, mut value) = header::header("anthropic-version", version.as_ref())?;
        // A version is no secret: `Debug` shows it.
        value.set_sensitive(false);
        self.wire.version = value;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_and_version_go_in_their_headers_and_configured_ones_replace_them() {
        let model = Anthropic::new("m")
            .api_key("k")
            .unwrap()
            .version("2099-01-01")
            .unwrap();
        let pairs = model.sent_headers();
        assert!(
            pairs.contains(&("x-api-key".into(), "k".into())),
            "{pairs:?}"
        );
        assert!(pairs.contains(&("anthropic-version".into(), "2099-01-01".into())));
        let model = model.header("Anthropic-Version", "2023-06-01").unwrap();
        let versions: Vec<_> = model
            .sent_headers()
            .into_iter()
            .filter(|(n, _)| n == "anthropic-version")
            .collect();
        assert_eq!(
            versions,
            [("anthropic-version".into(), "2023-06-01".into())]
        );
    }

    #[test]
    fn a_version_with_a_control_character_is_refused_when_set() {
        let error = Anthropic::new("m")
            .version("2023-06-01\r\nx-evil: 1")
            .unwrap_err();
        assert_eq!(error.name(), "anthropic-version");
        assert!(format!("{:?}", Anthropic::new("m")).contains("2023-06-01"));
    }
}
