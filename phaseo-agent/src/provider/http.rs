//! What both providers share: the HTTP client, a request whose failure becomes a [`ModelError`]
//! (status, the provider's message, `retry-after`), and a response body read as server-sent events.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::error::{ModelError, ModelErrorKind};

/// The default client: rustls, a connect timeout of 10 s, and `timeout` for the whole request
/// (a streamed response's body included).
pub(crate) fn client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(timeout)
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Posts `body` as JSON with `headers` (`content-type: application/json` unless `headers` has
/// another); a transport failure or a non-2xx status is a [`ModelError`] (the status mapped by
/// [`ModelError::from_status`], the message taken from the body's `error.message` where there is
/// one, `retry-after` read from the headers).
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &Value,
) -> Result<reqwest::Response, ModelError> {
    let mut request = client.post(url).body(body.to_string());
    // reqwest appends headers: a `content-type` among `headers` replaces this one, not joins it.
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let text = response.text().await.unwrap_or_default();
    let mut error = ModelError::from_status(status.as_u16(), error_message(&text));
    if let Some(wait) = retry_after {
        error = error.with_retry_after(wait);
    }
    Err(error)
}

/// An environment variable's value, when it is set and not blank (for the providers' `from_env`).
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Reads a whole response body as JSON.
pub(crate) async fn json_body(response: reqwest::Response) -> Result<Value, ModelError> {
    let bytes = response.bytes().await.map_err(transport)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ModelError::new(
            ModelErrorKind::InvalidResponse,
            format!("the response is not JSON: {e}"),
        )
    })
}

/// A response body as server-sent events: each event's `event` name and `data`.
pub(crate) fn sse(
    response: reqwest::Response,
) -> impl Stream<Item = Result<(String, String), ModelError>> + Send {
    use eventsource_stream::Eventsource;
    response
        .bytes_stream()
        .eventsource()
        .map(|event| match event {
            Ok(event) => Ok((event.event, event.data)),
            Err(eventsource_stream::EventStreamError::Transport(e)) => Err(transport(e)),
            Err(e) => Err(ModelError::new(
                ModelErrorKind::InvalidResponse,
                format!("the event stream is malformed: {e}"),
            )),
        })
}

/// A transport failure: a timeout, or a connection that failed or broke. A request that could not
/// even be built (a base URL that is not a URL, a header name or value HTTP does not allow) is a
/// [`ModelErrorKind::BadRequest`] instead: it fails the same way again, so it is not retried.
pub(crate) fn transport(error: reqwest::Error) -> ModelError {
    let kind = if error.is_timeout() {
        ModelErrorKind::Timeout
    } else if error.is_builder() {
        ModelErrorKind::BadRequest
    } else {
        ModelErrorKind::Transport
    };
    // reqwest's Display names only the outermost cause ("error sending request"): add the rest.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ModelError::new(kind, message)
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
        None => {
            let mut end = body.len().min(2_000);
            while !body.is_char_boundary(end) {
                end -= 1;
            }
            body[..end].to_owned()
        }
    }
}

/// `retry-after-ms` (milliseconds, OpenAI) or `retry-after` (seconds; an HTTP date is ignored).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1_000.0));
    }
    number("retry-after").map(Duration::from_secs_f64)
}
