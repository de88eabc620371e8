//! What `serve_http` does with a request before rmcp's service sees it: refuse a new session past
//! the limit (503), and read the body within its time and size limits (408, 413).
//!
//! rmcp's service reads a body with no time limit, and answers a session past the limit with
//! 500: a server of our own can do better, and does it here.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::time::Instant;

use rmcp::transport::StreamableHttpService;

use crate::limits::{Limit, LimitExceeded, McpServerLimits};
use crate::mcp::http::sessions::BoundedSessions;
use crate::mcp::server::McpHandler;

/// The most bytes past the limit read (and dropped) so the client reads its 413 rather than a
/// reset connection; a client that sends more has its connection closed.
const DRAINED: usize = 16 * 1024 * 1024;

/// The front of one server: its rmcp service, its sessions and its limits.
pub(crate) struct Front {
    pub(crate) service: StreamableHttpService<McpHandler, BoundedSessions>,
    pub(crate) sessions: Arc<BoundedSessions>,
    pub(crate) limits: McpServerLimits,
}

impl Front {
    /// Answers one request.
    pub(crate) async fn handle(&self, request: Request<Incoming>) -> Response<Reply> {
        let deadline = Instant::now() + self.limits.body_read_time();
        let opens_session =
            request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
        if opens_session && self.sessions.full().await {
            return self.no_more_sessions();
        }
        let (parts, body) = request.into_parts();
        let body = match read(body, self.limits.body_bytes(), deadline).await {
            Ok(body) => body,
            Err(refusal) => return refusal.response(self.limits.body_read_time()),
        };
        let request = Request::from_parts(parts, Whole(Some(body)));
        let response = self.service.handle(request).await;
        response.map(|body| Reply::Rmcp(Box::pin(body)))
    }

    fn no_more_sessions(&self) -> Response<Reply> {
        // A session nobody uses is gone after the idle timeout: a place is free by then at the
        // latest.
        let retry = self.limits.session_idle().as_secs().clamp(1, 300);
        let mut response = text(
            StatusCode::SERVICE_UNAVAILABLE,
            self.sessions.refusal().to_string(),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from(retry));
        response
    }
}

/// A body sent at once: a request's body read whole, or a text of ours.
pub(crate) struct Whole(Option<Bytes>);

impl Body for Whole {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.get_mut().0.take().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// An answer's body: rmcp's (an event stream, or its own errors), or a text of ours.
pub(crate) enum Reply {
    /// rmcp's answer.
    Rmcp(Pin<Box<dyn Body<Data = Bytes, Error = Infallible> + Send>>),
    /// A text of ours.
    Text(Whole),
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Reply::Rmcp(body) => body.as_mut().poll_frame(cx),
            Reply::Text(text) => Pin::new(text).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Rmcp(body) => body.is_end_stream(),
            Reply::Text(text) => text.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Rmcp(body) => body.size_hint(),
            Reply::Text(text) => text.size_hint(),
        }
    }
}

/// A plain-text answer.
fn text(status: StatusCode, message: String) -> Response<Reply> {
    let mut response = Response::new(Reply::Text(Whole(Some(Bytes::from(message)))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Why a body was not read.
enum Refusal {
    TooLarge(usize),
    TooSlow,
    Broken(String),
}

impl Refusal {
    fn response(self, wait: Duration) -> Response<Reply> {
        let (status, message) = match self {
            Refusal::TooLarge(max) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                LimitExceeded::new(Limit::HttpBodyBytes, max as u64).to_string(),
            ),
            Refusal::TooSlow => (
                StatusCode::REQUEST_TIMEOUT,
                LimitExceeded::time(Limit::HttpBodyReadTime, wait).to_string(),
            ),
            Refusal::Broken(why) => (
                StatusCode::BAD_REQUEST,
                format!("the request's body could not be read: {why}"),
            ),
        };
        let mut response = text(status, message);
        // What is left of the body is not read: the connection cannot carry another request.
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
        response
    }
}

/// Reads a body whole: at most `max` bytes, by `deadline`. A body over the limit is read on (and
/// dropped) up to [`DRAINED`] more bytes, so the client, still sending, reads its 413.
async fn read(body: Incoming, max: usize, deadline: Instant) -> Result<Bytes, Refusal> {
    if body.size_hint().lower() > max as u64 {
        drain(body, DRAINED, deadline).await;
        return Err(Refusal::TooLarge(max));
    }
    let mut body = body;
    let mut whole = Vec::new();
    loop {
        let frame = tokio::time::timeout_at(deadline, next_frame(&mut body)).await;
        let Ok(frame) = frame else {
            return Err(Refusal::TooSlow);
        };
        match frame {
            None => return Ok(Bytes::from(whole)),
            Some(Err(e)) => return Err(Refusal::Broken(e.to_string())),
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if data.len() > max - whole.len() {
                    drop(whole);
                    drain(body, DRAINED, deadline).await;
                    return Err(Refusal::TooLarge(max));
                }
                whole.extend_from_slice(&data);
            }
        }
    }
}

/// Reads and drops up to `most` bytes of a body, until `deadline`.
async fn drain(mut body: Incoming, most: usize, deadline: Instant) {
    let mut left = most;
    let draining = async {
        while let Some(Ok(frame)) = next_frame(&mut body).await {
            let size = frame.data_ref().map_or(0, Bytes::len);
            if size > left {
                break;
            }
            left -= size;
        }
    };
    let _ = tokio::time::timeout_at(deadline, draining).await;
}

async fn next_frame(body: &mut Incoming) -> Option<Result<Frame<Bytes>, hyper::Error>> {
    std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
}
