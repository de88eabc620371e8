//! The HTTP under every provider: the client (this crate's or the user's), a post whose failure
//! becomes a [`ModelError`] (status, the provider's message, `retry-after`, a redirect), and a
//! response body read within the [`ModelLimits`]: whole as JSON, or as server-sent events.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind, with_causes};
use crate::limits::{
    Limit, LimitExceeded, MAX_COST_PER_BYTE, ModelLimits, parse_budget_for, parsed_size_of,
};
use crate::provider::sse::{SseEvent, SseParser};

/// How much of an error body (a 4xx or 5xx) is read: its message is what is kept, and a server
/// that sends more is not read further.
pub(crate) const ERROR_BODY_BYTES: usize = 64 * 1024;

/// The longest `retry-after` kept: a day. A server's larger value (up to `1e300` seconds) is
/// read as this: longer than any agent waits, so the run fails at once, and small enough that
/// adding it to an `Instant` cannot overflow.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// A provider's HTTP client: this crate's, built on first use, or the user's (see
/// `HttpModel::http_client`).
#[derive(Clone)]
pub(crate) enum Client {
    /// This crate's: rustls, the limits' connect time, and no redirects (see [`client_with`]).
    /// Cloning a provider shares it once it is built.
    Ours(OnceLock<reqwest::Client>),
    /// The user's, as given: its redirects, connecting, proxies and TLS are its own.
    Users(reqwest::Client),
}

impl Default for Client {
    fn default() -> Self {
        Client::Ours(OnceLock::new())
    }
}

impl Client {
    /// The client to send with, this crate's built with `limits`' connect time.
    fn get(&self, limits: &ModelLimits) -> &reqwest::Client {
        match self {
            Client::Ours(client) => client.get_or_init(|| client_with(limits.connect_time())),
            Client::Users(client) => client,
        }
    }

    /// The limits changed: this crate's client is built again (its connect time is its own).
    pub(crate) fn limits_changed(&mut self) {
        if let Client::Ours(client) = self {
            *client = OnceLock::new();
        }
    }

    /// Whether the client is the user's.
    pub(crate) fn is_users(&self) -> bool {
        matches!(self, Client::Users(_))
    }
}

/// This crate's client: rustls, `connect` to open a connection, and no redirects.
///
/// No redirect is followed: an API endpoint never legitimately redirects a POST, and following
/// one would send the key, the configured headers and (on 307 and 308) the whole conversation to
/// wherever the server points, even another host. The time limits are the providers' own (see
/// [`within`] and [`Body`]), so that each error names its setting.
fn client_with(connect: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(connect)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        // Only rustls failing to start fails this, and `reqwest::Client::new()` panics then too;
        // a fallback client would follow redirects.
        .expect("the HTTP client starts (its TLS backend initialises)")
}

/// Runs a whole request (sending, and reading the body) within `limits`' request time.
pub(crate) async fn within<T, E: From<ModelError>>(
    limits: &ModelLimits,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let time = limits.request_time();
    tokio::time::timeout(time, request)
        .await
        .unwrap_or_else(|_| {
            let hit = LimitExceeded::time(Limit::RequestTime, time);
            Err(ModelError::limit_exceeded(hit).into())
        })
}

/// Posts `body` as JSON to `url` with `headers`. A streamed request (`stream`) waits for the
/// response's headers at most `limits`' idle time; a whole one only within the request time
/// (see [`within`]), since a server sends a whole answer's headers once the answer is written.
/// A URL that is not one, a transport failure, a redirect (answered, or
/// followed by a user's client) or a non-2xx status is a [`ModelError`] (the status mapped by
/// [`ModelError::from_status`], the message taken from the first [`ERROR_BODY_BYTES`] of the
/// body, its `error.message` where there is one, `retry-after` read from the headers).
pub(crate) async fn post_json(
    client: &Client,
    url: &str,
    headers: HeaderMap,
    body: &Value,
    limits: &ModelLimits,
    stream: bool,
) -> Result<reqwest::Response, ModelError> {
    let url = http_url(url)?;
    let request = client
        .get(limits)
        .post(url.clone())
        .headers(headers)
        .body(body.to_string());
    let idle = limits.stream_idle();
    let sent = if stream {
        tokio::time::timeout(idle, request.send())
            .await
            .map_err(|_| idle_error(idle))?
    } else {
        request.send().await
    };
    let response = sent.map_err(|error| {
        if error.is_connect() && error.is_timeout() && !client.is_users() {
            let wait = limits.connect_time();
            ModelError::limit_exceeded(LimitExceeded::time(Limit::ConnectTime, wait))
        } else {
            transport(error)
        }
    })?;
    if *response.url() != url {
        return Err(followed(&url, response.url()));
    }
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    if status.is_redirection() {
        return Err(redirect(&response));
    }
    let retry_after = retry_after(response.headers());
    let mut body = Body::new(response, limits);
    let text = body.read_up_to(ERROR_BODY_BYTES).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let mut error = ModelError::from_status(status.as_u16(), error_message(&text));
    if let Some(wait) = retry_after {
        error = error.with_retry_after(wait);
    }
    Err(error)
}

/// `url` parsed, if it is an `http` or `https` URL with a host; else a
/// [`ModelErrorKind::BadRequest`] (a base URL to fix), before anything is sent.
fn http_url(url: &str) -> Result<reqwest::Url, ModelError> {
    let refused = |why: String| {
        ModelError::new(
            ModelErrorKind::BadRequest,
            format!(
                "the base URL does not make an HTTP address ({why}): set base_url to one such as \
                 http://localhost:8080/v1"
            ),
        )
    };
    let parsed = reqwest::Url::parse(url).map_err(|error| refused(error.to_string()))?;
    match parsed.scheme() {
        "http" | "https" if parsed.has_host() => Ok(parsed),
        "http" | "https" => Err(refused("it has no host".to_owned())),
        scheme => Err(refused(format!(
            "its scheme is `{scheme}`, not http or https"
        ))),
    }
}

/// Whether a response's body is JSON rather than an event stream.
pub(crate) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

/// The error of a redirect, which is not followed (see [`client_with`]): a configuration to fix,
/// so [`ModelErrorKind::BadRequest`] (not retried, like a 404 for a wrong path). It names the
/// status and where it pointed, without the query or fragment (they may hold a token).
fn redirect(response: &reqwest::Response) -> ModelError {
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let target = match &location {
        Some(location) => format!("to {}", bare(location)),
        None => "without a location".to_owned(),
    };
    let status = response.status().as_u16();
    ModelError::new(
        ModelErrorKind::BadRequest,
        format!(
            "the server answered with a redirect {target}, which is not followed (it would \
             send the key and the conversation elsewhere): set base_url to the final address"
        ),
    )
    .with_status(status)
}

/// The error of a response from another address than `asked`: a user's client followed a
/// redirect. Not retried (the client would follow it again), and the response is not read.
fn followed(asked: &reqwest::Url, answered: &reqwest::Url) -> ModelError {
    ModelError::new(
        ModelErrorKind::BadRequest,
        format!(
            "the response came from {}, not from {}: the client given to http_client followed a \
             redirect, which may have sent the key, the headers and the conversation there; \
             build it with .redirect(reqwest::redirect::Policy::none()), and set base_url to the \
             final address",
            bare(answered.as_str()),
            bare(asked.as_str()),
        ),
    )
}

/// An address for a message: without its query or fragment (they may hold a token), cut.
fn bare(url: &str) -> &str {
    cut(url.split(['?', '#']).next().unwrap_or_default(), 500)
}

fn idle_error(idle: Duration) -> ModelError {
    ModelError::limit_exceeded(LimitExceeded::time(Limit::StreamIdle, idle))
}

fn too_large(limit: usize) -> ModelError {
    ModelError::limit_exceeded(LimitExceeded::count(Limit::ResponseBytes, limit))
}

/// A response body read chunk by chunk: each chunk within the idle time, all of them within the
/// response size.
pub(crate) struct Body {
    response: reqwest::Response,
    idle: Duration,
    max: usize,
    read: usize,
}

impl Body {
    pub(crate) fn new(response: reqwest::Response, limits: &ModelLimits) -> Self {
        Body {
            response,
            idle: limits.stream_idle(),
            max: limits.response_bytes(),
            read: 0,
        }
    }

    /// The next chunk, or `None` at the end.
    async fn chunk(&mut self) -> Result<Option<impl AsRef<[u8]> + use<>>, ModelError> {
        let chunk = tokio::time::timeout(self.idle, self.response.chunk())
            .await
            .map_err(|_| idle_error(self.idle))?
            .map_err(transport)?;
        if let Some(chunk) = &chunk {
            self.read = self.read.saturating_add(chunk.as_ref().len());
            if self.read > self.max {
                return Err(too_large(self.max));
            }
        }
        Ok(chunk)
    }

    /// Up to `max` bytes of the body (the rest is not read).
    async fn read_up_to(&mut self, max: usize) -> Result<Vec<u8>, ModelError> {
        let mut bytes = Vec::new();
        while bytes.len() < max {
            let Some(chunk) = self.chunk().await? else {
                break;
            };
            let chunk = chunk.as_ref();
            let take = chunk.len().min(max - bytes.len());
            bytes.extend_from_slice(&chunk[..take]);
        }
        Ok(bytes)
    }
}

/// Reads a whole response body as JSON, refusing one over the response size: at once when its
/// `content-length` says so, else when the bytes read pass it.
pub(crate) async fn json_body(
    response: reqwest::Response,
    limits: &ModelLimits,
) -> Result<Value, ModelError> {
    let max = limits.response_bytes();
    let announced = response.content_length().map(usize::try_from);
    if announced.is_some_and(|length| length.map_or(true, |length| length > max)) {
        return Err(too_large(max));
    }
    // The announced length (within the limit) is allocated once: growing by doubling would
    // hold the old and the new buffer together near the end.
    let mut body = Body::new(response, limits);
    let mut bytes = Vec::with_capacity(announced.and_then(Result::ok).unwrap_or(0));
    while let Some(chunk) = body.chunk().await? {
        bytes.extend_from_slice(chunk.as_ref());
    }
    check_parse_cost(&bytes, Limit::ResponseBytes, max)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ModelError::new(
            ModelErrorKind::InvalidResponse,
            format!("the response is not JSON: {e}"),
        )
    })
}

/// Refuses text from a model server whose parsed form would take more memory than
/// [`parse_budget_for`] its limit: a `serde_json::Value` can take 30 to 100 times the memory of
/// its text (`[[],[],..]` or many tiny objects), so a body within its size could still cost
/// gigabytes once parsed. Text as real servers send it (strings, a few keys) costs about twice
/// its length, and passes.
pub(crate) fn check_parse_cost(text: &[u8], limit: Limit, max: usize) -> Result<(), ModelError> {
    let budget = parse_budget_for(max);
    if text.len().saturating_mul(MAX_COST_PER_BYTE) <= budget {
        return Ok(());
    }
    let cost = parsed_size_of(text);
    if cost <= budget {
        return Ok(());
    }
    let hit = LimitExceeded::count(limit, max);
    let mut error = ModelError::limit_exceeded(hit);
    error.message = format!(
        "{} bytes of JSON would take about {} MB once parsed, more than the {} MB allowed for a \
         limit of {max} bytes (raise it with `{}`)",
        text.len(),
        cost >> 20,
        budget >> 20,
        limit.setting()
    );
    Err(error)
}

/// A response body as server-sent events (see [`SseParser`]), within the limits: the stream's
/// bytes, each event's bytes, and the silence between chunks.
pub(crate) struct Events {
    body: Body,
    parser: SseParser,
    max_event: usize,
}

impl Events {
    pub(crate) fn new(response: reqwest::Response, limits: &ModelLimits) -> Self {
        Events {
            body: Body::new(response, limits),
            parser: SseParser::new(limits.event_bytes()),
            max_event: limits.event_bytes(),
        }
    }

    /// The next event's name and data, or `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Option<Result<SseEvent, ModelError>> {
        loop {
            if let Some(event) = self.parser.next() {
                let cost = check_parse_cost(event.1.as_bytes(), Limit::EventBytes, self.max_event);
                return Some(cost.map(|()| event));
            }
            let chunk = match self.body.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return None,
                Err(error) => return Some(Err(error)),
            };
            if self.parser.feed(chunk.as_ref()).is_err() {
                return Some(Err(ModelError::limit_exceeded(LimitExceeded::count(
                    Limit::EventBytes,
                    self.max_event,
                ))));
            }
        }
    }
}

/// An environment variable's value, when it is set and not blank (for the providers' `from_env`).
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// A transport failure: a timeout, or a connection that failed or broke. A request that could not
/// even be built (the URL and headers are checked before, so only what a user's client refuses)
/// is a [`ModelErrorKind::BadRequest`] instead: it fails the same way again, so it is not retried.
pub(crate) fn transport(error: reqwest::Error) -> ModelError {
    let kind = if error.is_timeout() {
        ModelErrorKind::Timeout
    } else if error.is_builder() {
        ModelErrorKind::BadRequest
    } else {
        ModelErrorKind::Transport
    };
    ModelError::new(kind, with_causes(error.to_string(), &error))
}

/// The provider's message in an error body: `error.message` (OpenAI, Anthropic and most
/// compatible servers), `error` when it is a string, a top-level `message` (vLLM before 0.10:
/// `{"object": "error", "message": ...}`) or `detail` string (FastAPI's own errors, such as a 404
/// for a wrong path), else (or when that message is blank) the body itself, cut to 2,000 bytes.
pub fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        let text = |key: &str| v.get(key).and_then(Value::as_str);
        let error = v.get("error");
        error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .or_else(|| error.and_then(Value::as_str))
            .or_else(|| text("message"))
            .or_else(|| text("detail"))
            .filter(|m| !m.trim().is_empty())
            .map(str::to_owned)
    });
    match message {
        Some(message) => message,
        None if body.trim().is_empty() => "(no message)".to_owned(),
        None => cut(body, 2_000).to_owned(),
    }
}

/// `retry-after-ms` (milliseconds, OpenAI) or `retry-after` (seconds), of the first header of
/// each name. A value that is not a non-negative decimal number (an HTTP date, a negative
/// number, `NaN`, `inf`, text) is ignored; one over [`MAX_RETRY_AFTER`] is read as that.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds = |name: &str, scale: f64| -> Option<Duration> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        if !value.is_finite() || value.is_sign_negative() {
            return None;
        }
        let wait = Duration::try_from_secs_f64(value / scale).unwrap_or(MAX_RETRY_AFTER);
        Some(wait.min(MAX_RETRY_AFTER))
    };
    seconds("retry-after-ms", 1_000.0).or_else(|| seconds("retry-after", 1.0))
}

/// The start of `text`, at most `max` bytes, on a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
