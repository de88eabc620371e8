//! MCP's Streamable HTTP transport over the reqwest 0.12 client the providers use.
//!
//! rmcp speaks the protocol (sessions, the SSE reconnection, the worker) and asks an
//! [`StreamableHttpClient`] for the HTTP requests. Its own implementation is for reqwest 0.13,
//! which would put a second reqwest (and, with rustls, aws-lc-rs) into the tree; this is the same
//! contract over reqwest 0.12: a POST per message answered with JSON, an event stream or `202`, a
//! GET for the server's own stream, a DELETE to end the session, each response (a JSON body, or
//! one event of a stream) read within the client's `max_message_bytes`, and within the memory it
//! would take once parsed. An answer to a request that goes over either becomes a JSON-RPC error
//! for that request, recorded on the [`Router`] so the call fails with the limit at once; the
//! connection stays usable.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use reqwest::header::{
    ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
};
use reqwest::{RequestBuilder, Response, StatusCode};
use rmcp::model::{
    ClientJsonRpcMessage, ErrorData, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

use crate::limits::{
    Limit, LimitExceeded, ParseCost, mcp_parse_cost_exceeded, parse_budget_for, parsed_size_of,
};
use crate::mcp::client::observe::Router;

type Failure = StreamableHttpError<reqwest::Error>;

/// A reqwest 0.12 client as rmcp's HTTP client.
#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    /// The most bytes of one message (a JSON body, one event of a stream).
    max: usize,
    router: Arc<Router>,
}

impl Http {
    /// A client that follows only same-origin `307`/`308` redirects (they keep the method and
    /// body; another origin must not get the session id), and keeps no idle connections (a reused
    /// connection whose last body was not read to the end stalls on delayed ACKs).
    pub(crate) fn new(max: usize, router: Arc<Router>) -> Result<Self, reqwest::Error> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("more than 10 redirects")
            } else {
                attempt.follow()
            }
        });
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()
            .map(|client| Http {
                client,
                max,
                router,
            })
    }

    /// The answer to request `id` in place of one over `limit`: a JSON-RPC error, and the
    /// request recorded on the [`Router`] so that its call fails with the limit.
    fn refusal(&self, id: RequestId, limit: LimitExceeded) -> ServerJsonRpcMessage {
        refusal(&self.router, id, limit)
    }
}

/// See [`Http::refusal`].
fn refusal(router: &Router, id: RequestId, limit: LimitExceeded) -> ServerJsonRpcMessage {
    let message = limit.to_string();
    router.oversized(id.clone(), limit);
    JsonRpcMessage::error(ErrorData::internal_error(message, None), Some(id))
}

fn headed(
    mut request: RequestBuilder,
    session: Option<&str>,
    auth: Option<String>,
    headers: HashMap<HeaderName, HeaderValue>,
) -> RequestBuilder {
    if let Some(session) = session {
        request = request.header(HEADER_SESSION_ID, session);
    }
    if let Some(token) = auth {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request
}

fn header(response: &Response, name: impl reqwest::header::AsHeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Whether a `Content-Type` is `expected`, parameters and case aside.
fn is_type(content_type: Option<&str>, expected: &str) -> bool {
    content_type
        .and_then(|t| t.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

/// What a failed status says, before the body: a challenge, or a status worth a retry.
fn status_failure(response: &Response) -> Option<Failure> {
    let status = response.status();
    if status == StatusCode::UNAUTHORIZED {
        let challenge = header(response, WWW_AUTHENTICATE)?;
        return Some(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            challenge,
        )));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        let retry_after = header(response, RETRY_AFTER).filter(|v| v.len() <= 128);
        return Some(HttpStatusError::new(status.as_u16(), retry_after).into());
    }
    None
}

/// A body read to the end, refused past `max` bytes (what it would cost once parsed is
/// [`too_costly`]'s to say).
async fn bounded(mut response: Response, max: usize) -> Result<Vec<u8>, Failure> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(StreamableHttpError::Client)?
    {
        if chunk.len() > max - body.len() {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Whether a body within `max` bytes would still cost more memory once parsed than
/// [`parse_budget_for`] `max` (`[[],[],..]` costs 30 to 100 times its text).
fn too_costly(body: &[u8], max: usize) -> bool {
    parsed_size_of(body) > parse_budget_for(max)
}

/// Why a server's event stream stopped early.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error("{0}")]
    Http(reqwest::Error),
    /// An event over `max_message_bytes`, or over what it may cost once parsed.
    #[error("an event of the server's stream went over a limit: {0}")]
    Limit(LimitExceeded),
}

/// The events of a response, none larger than `max` bytes (counted from the bytes on the wire,
/// before they are parsed) nor costing more than [`parse_budget_for`] `max` once parsed. Past
/// either, the stream ends; with `instead` (a request's id), after an answer to that request
/// saying which limit, recorded on the router.
fn events(
    response: Response,
    max: usize,
    instead: Option<(RequestId, Arc<Router>)>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    // Bytes since the last blank line (the end of an event), and whether the last byte ended a line.
    let mut size = 0usize;
    // What the event would cost once parsed: within its size, it can still cost gigabytes.
    let mut cost = ParseCost::default();
    let budget = parse_budget_for(max);
    let mut line_ended = false;
    // The limit an event went over, for the answer that replaces it.
    let hit = Arc::new(std::sync::OnceLock::new());
    let hit_seen = hit.clone();
    let mut failed = false;
    let limited = response.bytes_stream().scan((), move |(), chunk| {
        if failed {
            return future::ready(None);
        }
        let checked = match chunk {
            Err(e) => Err(StreamError::Http(e)),
            Ok(bytes) => {
                let mut over = None;
                for &byte in bytes.iter() {
                    match byte {
                        b'\r' => {}
                        b'\n' if line_ended => {
                            size = 0;
                            cost = ParseCost::default();
                        }
                        b'\n' => line_ended = true,
                        _ => {
                            line_ended = false;
                            size += 1;
                            cost.push(byte);
                            if size > max {
                                over = Some(LimitExceeded::count(Limit::McpMessageBytes, max));
                                break;
                            }
                            if cost.size() > budget {
                                over = Some(mcp_parse_cost_exceeded(max));
                                break;
                            }
                        }
                    }
                }
                match over {
                    Some(limit) => {
                        let _ = hit.set(limit.clone());
                        Err(StreamError::Limit(limit))
                    }
                    None => Ok(bytes),
                }
            }
        };
        failed = checked.is_err();
        future::ready(Some(checked))
    });
    let parsed = SseStream::from_bytes_stream(limited);
    let Some((id, router)) = instead else {
        return parsed.boxed();
    };
    // The event over a limit ends the stream; the request's answer says which. Any other error
    // (the connection lost) is rmcp's to handle, as it comes.
    let mut ended = false;
    parsed
        .scan((), move |(), event| {
            if ended {
                return future::ready(None);
            }
            let event = match (event, hit_seen.get()) {
                (Err(_), Some(limit)) => {
                    ended = true;
                    let answer = refusal(&router, id.clone(), limit.clone());
                    Ok(Sse {
                        event: None,
                        data: serde_json::to_string(&answer).ok(),
                        id: None,
                        retry: None,
                    })
                }
                (event, _) => event,
            };
            future::ready(Some(event))
        })
        .boxed()
}

impl StreamableHttpClient for Http {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failure> {
        let body = serde_json::to_vec(&message)?;
        let request = self
            .client
            .post(uri.as_ref())
            .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "))
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body);
        let request = headed(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        // Only a request waits for an answer; a notification or response needs none.
        let request_id = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let awaits_answer = request_id.is_some();
        let session = header(&response, HEADER_SESSION_ID);
        let content_type = header(&response, CONTENT_TYPE);
        if !status.is_success() {
            let mut limits = limits;
            limits.max_json_response_size = limits.max_json_response_size.min(self.max);
            return refused(response, content_type.as_deref(), session, limits).await;
        }
        if is_type(content_type.as_deref(), EVENT_STREAM_MIME_TYPE) {
            let instead = request_id.map(|id| (id, self.router.clone()));
            let events = events(response, self.max, instead);
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if is_type(content_type.as_deref(), JSON_MIME_TYPE) {
            let body = bounded(response, self.max).await;
            let over = match &body {
                Err(StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                    Some(LimitExceeded::count(Limit::McpMessageBytes, self.max))
                }
                // Within its size, a body can still cost gigabytes once parsed (`[[],[],..]`).
                Ok(body) if too_costly(body, self.max) => Some(mcp_parse_cost_exceeded(self.max)),
                _ => None,
            };
            let body = match (over, request_id) {
                (Some(limit), Some(id)) => {
                    let refusal = self.refusal(id, limit);
                    return Ok(StreamableHttpPostResponse::Json(refusal, session));
                }
                (Some(limit), None) => {
                    return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                        limit.to_string(),
                    )));
                }
                (None, _) => body?,
            };
            return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, session)),
                Err(_) if !awaits_answer => Ok(StreamableHttpPostResponse::Accepted),
                Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                    format!("the server's JSON is not a JSON-RPC message: {e}"),
                ))),
            };
        }
        if !awaits_answer {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        Err(StreamableHttpError::UnexpectedContentType(content_type))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failure> {
        let request = headed(
            self.client.delete(uri.as_ref()),
            Some(&session_id),
            auth_header,
            custom_headers,
        );
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        response
            .error_for_status()
            .map(drop)
            .map_err(StreamableHttpError::Client)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            self.max,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failure> {
        let mut request = self
            .client
            .get(uri.as_ref())
            .header(ACCEPT, [EVENT_STREAM_MIME_TYPE, JSON_MIME_TYPE].join(", "));
        if let Some(id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, id);
        }
        let request = headed(request, session_id.as_deref(), auth_header, custom_headers);
        let response = request.send().await.map_err(StreamableHttpError::Client)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if let Some(failure) = status_failure(&response) {
            return Err(failure);
        }
        let response = response
            .error_for_status()
            .map_err(StreamableHttpError::Client)?;
        let content_type = header(&response, CONTENT_TYPE);
        if !is_type(content_type.as_deref(), EVENT_STREAM_MIME_TYPE)
            && !is_type(content_type.as_deref(), JSON_MIME_TYPE)
        {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        Ok(events(response, max_sse_event_size.min(self.max), None))
    }
}

/// A POST the server refused: its JSON-RPC error when the body is one (the protocol's answer),
/// else the status and the start of the body.
async fn refused(
    response: Response,
    content_type: Option<&str>,
    session: Option<String>,
    limits: StreamableHttpResponseLimits,
) -> Result<StreamableHttpPostResponse, Failure> {
    let status = response.status();
    let early = match status_failure(&response) {
        Some(auth @ StreamableHttpError::AuthRequired(_)) => return Err(auth),
        other => other,
    };
    if is_type(content_type, JSON_MIME_TYPE) && status != StatusCode::TOO_MANY_REQUESTS {
        let max = limits.max_json_response_size;
        // A body that would cost too much once parsed is not parsed: the status says enough.
        let body = bounded(response, max).await.ok();
        if let Some(body) = body.filter(|body| !too_costly(body, max)) {
            if let Ok(error @ JsonRpcMessage::Error(_)) =
                serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(error, session));
            }
            if let Some(failure) = early {
                return Err(failure);
            }
            let shown = &body[..body.len().min(limits.max_error_response_size)];
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", String::from_utf8_lossy(shown)),
            )));
        }
    }
    Err(early.unwrap_or_else(|| {
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!("HTTP {status}")))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::McpClientLimits;

    /// An event stream of one event of `[[],[],..]`: within `max` bytes, but each `[]` a value
    /// once parsed.
    fn bomb(max: usize) -> Response {
        let mut body = b"data: [".to_vec();
        body.extend_from_slice(&b"[],".repeat(max / 4));
        body.extend_from_slice(b"[]]\n\n");
        assert!(body.len() < max);
        Response::from(hyper::Response::new(body))
    }

    #[tokio::test]
    async fn an_event_that_would_cost_too_much_once_parsed_is_answered_with_that_limit() {
        let max = 1 << 20;
        let router = Arc::new(Router::new(McpClientLimits::default()));
        let id = RequestId::Number(7);
        let answered: Vec<_> = events(bomb(max), max, Some((id.clone(), router.clone())))
            .collect()
            .await;
        let [Ok(answer)] = answered.as_slice() else {
            panic!("one answer: {answered:?}")
        };
        let text = answer.data.clone().unwrap_or_default();
        assert!(
            text.contains("costs more memory to parse than the limit of 67108864 bytes"),
            "{text}"
        );
        assert!(!text.contains("larger than"), "{text}");
        assert_eq!(
            router.exceeded(&id),
            Some(LimitExceeded::new(Limit::McpMessageParseCost, 64 << 20))
        );
    }

    #[tokio::test]
    async fn an_event_over_its_size_is_answered_with_the_size_limit() {
        let router = Arc::new(Router::new(McpClientLimits::default()));
        let id = RequestId::Number(8);
        let response = Response::from(hyper::Response::new(format!(
            "data: {}\n\n",
            "a".repeat(64)
        )));
        let answered: Vec<_> = events(response, 16, Some((id.clone(), router.clone())))
            .collect()
            .await;
        assert_eq!(answered.len(), 1, "{answered:?}");
        assert_eq!(
            router.exceeded(&id),
            Some(LimitExceeded::new(Limit::McpMessageBytes, 16))
        );
    }
}
