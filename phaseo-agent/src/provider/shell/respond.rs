//! A request, whole or streamed, the same for every wire format: the headers, the post, the body
//! read within the limits, and the streaming loop.

use std::sync::atomic::Ordering;

use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};
use crate::model::request::{DeltaSink, Model, ModelDelta, ModelInfo, ModelRequest, ModelResponse};
use crate::provider::http;
use crate::provider::shell::format::Assemble;
use crate::provider::shell::model::{HttpModel, Key};
use crate::provider::shell::wire::Wire;

impl<W: Wire> Model for HttpModel<W> {
    fn describe(&self) -> ModelInfo<'_> {
        let info = ModelInfo::new(W::API.provider).model(&self.model);
        match server_of(&self.base_url) {
            Some((address, port)) => info.server(address, port),
            None => info,
        }
    }

    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(http::within(&self.limits, async move {
            let body = (W::BODIES.0)(request, self, false)?;
            let response = self.post(request, &body, false).await?;
            (W::BODIES.1)(&http::json_body(response, &self.limits).await?)
        }))
    }

    fn respond_streaming<'a>(
        &'a self,
        request: &'a ModelRequest<'a>,
        deltas: &'a DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        if !self.streams() {
            return self.respond(request);
        }
        Box::pin(async move {
            match http::within(&self.limits, self.stream(request, deltas)).await {
                Ok(response) => Ok(response),
                Err(Streamed::Failed(error)) => Err(error),
                Err(Streamed::Refused(why)) => {
                    self.refused_stream.store(true, Ordering::Relaxed);
                    tracing::warn!(
                        model_type = W::API.model_type,
                        base_url = %self.base_url,
                        %why,
                        "the server refused to stream; the request is sent again whole, and \
                         later requests ask for whole answers"
                    );
                    // The refused stream's connection may go back to the pool as the server
                    // closes it (llama-cpp-python's does): a transport failure is tried once
                    // more, on a connection of its own.
                    match self.respond(request).await {
                        Err(error) if error.kind == ModelErrorKind::Transport => {
                            self.respond(request).await
                        }
                        answer => answer,
                    }
                }
            }
        })
    }
}

/// Why a streamed request gave no answer.
enum Streamed {
    /// The server will not stream it (see `HttpModel::streams`): the error that says so.
    Refused(ModelError),
    /// Any other failure, which is the request's.
    Failed(ModelError),
}

impl From<ModelError> for Streamed {
    fn from(error: ModelError) -> Self {
        Streamed::Failed(error)
    }
}

/// Whether an HTTP error answer to a streamed request says that the server does not stream.
fn refuses_streaming(error: &ModelError) -> bool {
    let message = error.message.to_ascii_lowercase();
    error.status.is_some()
        && message.contains("stream")
        && ["not support", "unsupported", "not implemented"]
            .iter()
            .any(|refusal| message.contains(refusal))
}

impl<W: Wire> HttpModel<W> {
    /// A streamed request: its deltas go to `deltas` as they come. A refusal to stream (an
    /// HTTP error that says so, or a stream that ends before its first event) is
    /// [`Streamed::Refused`].
    async fn stream(
        &self,
        request: &ModelRequest<'_>,
        deltas: &DeltaSink<'_>,
    ) -> Result<ModelResponse, Streamed> {
        let body = (W::BODIES.0)(request, self, true)?;
        let response = match self.post(request, &body, true).await {
            Err(error) if refuses_streaming(&error) => return Err(Streamed::Refused(error)),
            response => response?,
        };
        if http::is_json(&response) {
            // A server that ignored `stream` (or answered an error whole): one piece.
            let response = (W::BODIES.1)(&http::json_body(response, &self.limits).await?)?;
            for delta in whole_deltas(&response) {
                deltas.send(delta);
            }
            return Ok(response);
        }
        let mut events = http::Events::new(response, &self.limits);
        let mut stream = W::Stream::default();
        let mut read = 0_usize;
        // Before the first event, a stream that ends or breaks is a refusal: nothing went out.
        let refused = |error: ModelError, read: usize| {
            if read == 0 && error.kind == ModelErrorKind::Transport {
                Streamed::Refused(error)
            } else {
                Streamed::Failed(error)
            }
        };
        while let Some(event) = events.next().await {
            let (name, data) = event.map_err(|error| refused(error, read))?;
            read += 1;
            for delta in stream.event(&name, &data)? {
                deltas.send(delta);
            }
            if stream.is_complete() {
                break;
            }
        }
        stream.finish().map_err(|error| refused(error, read))
    }

    /// Posts `body` for `request` (its model may be in the URL), with [`request_headers`];
    /// without a key for the provider's own URL, or with a key no header can carry, nothing is
    /// sent.
    ///
    /// [`request_headers`]: HttpModel::request_headers
    async fn post(
        &self,
        request: &ModelRequest<'_>,
        body: &Value,
        stream: bool,
    ) -> Result<reqwest::Response, ModelError> {
        let has_key = match &self.key {
            Key::Unusable(error) => {
                return Err(ModelError::new(
                    ModelErrorKind::Authentication,
                    error.to_string(),
                ));
            }
            Key::Set(_) => true,
            Key::None => self.headers.iter().any(|(name, _)| *name == W::KEY.0),
        };
        let api = W::API;
        if !has_key && self.base_url == api.default_base_url {
            let (model_type, variable) = (api.model_type, api.variable("API_KEY"));
            return Err(ModelError::new(
                ModelErrorKind::Authentication,
                format!(
                    "no API key for {}: set {variable} (with {model_type}::from_env) or call \
                     {model_type}::api_key",
                    self.base_url
                ),
            ));
        }
        let model = request.model.as_deref().unwrap_or(&self.model);
        let url = W::url(&self.base_url, model, stream);
        let headers = self.request_headers();
        http::post_json(&self.client, &url, headers, body, &self.limits, stream).await
    }

    /// The headers of a request: `content-type: application/json`, the key, the format's own,
    /// then the configured ones, each of which replaces a header of its name before it.
    pub(crate) fn request_headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(self.headers.len() + 3);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Key::Set(key) = &self.key {
            headers.insert(W::KEY.0, key.clone());
        }
        self.wire.headers(&mut headers);
        for (name, _) in &self.headers {
            headers.remove(name);
        }
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        headers
    }

    /// The headers a request gets, as sorted text pairs (for tests).
    #[cfg(test)]
    pub(crate) fn sent_headers(&self) -> Vec<(String, String)> {
        let headers = self.request_headers();
        let text = |value: &HeaderValue| value.to_str().unwrap_or("<not text>").to_owned();
        let mut pairs: Vec<_> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), text(v)))
            .collect();
        pairs.sort();
        pairs
    }
}

/// The host and port of a base URL (`https://api.openai.com/v1`: `api.openai.com`, 443), read
/// off the text the settings checked: the port is the scheme's when the URL names none.
fn server_of(url: &str) -> Option<(&str, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 address: `[::1]:8080`.
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None if scheme.eq_ignore_ascii_case("https") => 443,
        None => 80,
    };
    (!host.is_empty()).then_some((host, port))
}

/// The deltas of a whole response: its text, then each call in one piece.
fn whole_deltas(response: &ModelResponse) -> Vec<ModelDelta> {
    let mut deltas = Vec::with_capacity(response.tool_calls.len() + 1);
    if let Some(text) = response.text.as_ref().filter(|t| !t.is_empty()) {
        deltas.push(ModelDelta::Text { text: text.clone() });
    }
    for (index, call) in response.tool_calls.iter().enumerate() {
        deltas.push(ModelDelta::ToolCall {
            index,
            id: (!call.id.is_empty()).then(|| call.id.clone()),
            name: Some(call.name.clone()),
            arguments: call.arguments.clone(),
        });
    }
    deltas
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_of_reads_host_and_port() {
        use super::server_of;
        assert_eq!(
            server_of("https://api.openai.com/v1"),
            Some(("api.openai.com", 443))
        );
        assert_eq!(
            server_of("http://127.0.0.1:8011/v1"),
            Some(("127.0.0.1", 8011))
        );
        assert_eq!(server_of("http://[::1]:9/v1"), Some(("::1", 9)));
        assert_eq!(server_of("http://user:pw@host/v1"), Some(("host", 80)));
        assert_eq!(server_of("nonsense"), None);
    }

    use reqwest::header::HeaderName;

    use super::*;
    use crate::provider::shell::format::{Api, Bodies, KeyHeader};

    /// A format with a version header, to see what replaces what.
    #[derive(Clone, Default)]
    struct Versioned;

    impl crate::provider::shell::format::Format for Versioned {
        const API: Api = Api::new(
            "Versioned",
            "TEST",
            "https://api.example.com",
            "/v1/test",
            "test",
        );
        const KEY: KeyHeader = KeyHeader(HeaderName::from_static("x-api-key"), "");
        const BODIES: Bodies<Self> = Bodies(
            |_, _, _| Ok(Value::Null),
            |_| Err(ModelError::other("none")),
        );
        type Stream = NoStream;

        fn headers(&self, headers: &mut HeaderMap) {
            headers.insert("test-version", HeaderValue::from_static("1"));
        }

        fn debug(_: &HttpModel<Self>, _: &mut std::fmt::DebugStruct<'_, '_>) {}
    }

    impl Wire for Versioned {}

    #[derive(Default)]
    struct NoStream;

    impl Assemble for NoStream {
        fn event(&mut self, _: &str, _: &str) -> Result<Vec<ModelDelta>, ModelError> {
            Ok(Vec::new())
        }

        fn is_complete(&self) -> bool {
            true
        }

        fn finish(self) -> Result<ModelResponse, ModelError> {
            Err(ModelError::other("not used"))
        }
    }

    #[test]
    fn configured_headers_replace_built_in_ones_and_repeat_among_themselves() {
        let model = HttpModel::<Versioned>::new("m")
            .api_key("k")
            .unwrap()
            .header("Test-Version", "2")
            .unwrap()
            .header("x-beta", "a")
            .unwrap()
            .header("x-beta", "b")
            .unwrap();
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(
            model.sent_headers(),
            owned(&[
                ("content-type", "application/json"),
                ("test-version", "2"),
                ("x-api-key", "k"),
                ("x-beta", "a"),
                ("x-beta", "b"),
            ])
        );
        let plain = HttpModel::<Versioned>::new("m");
        assert_eq!(
            plain.sent_headers(),
            owned(&[("content-type", "application/json"), ("test-version", "1")])
        );
    }

    #[test]
    fn a_blank_key_is_no_key_and_a_key_is_trimmed_and_sensitive() {
        for blank in ["", "  ", "\n"] {
            let model = HttpModel::<Versioned>::new("m").api_key(blank).unwrap();
            assert!(matches!(model.key, Key::None), "{blank:?}");
            assert!(!model.request_headers().contains_key("x-api-key"));
        }
        let model = HttpModel::<Versioned>::new("m")
            .api_key(" secret-key\r\n")
            .unwrap();
        let key = &model.request_headers()["x-api-key"];
        assert_eq!(key, "secret-key");
        assert!(key.is_sensitive());
    }

    #[test]
    fn debug_shows_neither_the_key_nor_header_values() {
        let model = HttpModel::<Versioned>::new("m")
            .api_key("secret-key")
            .unwrap()
            .header("x-token", "secret-token")
            .unwrap();
        let debug = format!("{model:?}");
        assert!(!debug.contains("secret"), "{debug}");
        assert!(debug.starts_with("Versioned {"), "{debug}");
        assert!(debug.contains("x-token"), "{debug}");
    }
}
