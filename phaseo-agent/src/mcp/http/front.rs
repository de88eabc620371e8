//! [`McpHttpService`]: what is checked of a request before rmcp's service sees it, for
//! `serve_http` and for a service mounted in the user's own server alike. In order: the `Origin`
//! (403), a new session past the limit (503 with `Retry-After`), the body read within its time
//! (408) and size (413).
//!
//! rmcp's service does some of this, less well: it matches origins by exact host, answers a
//! session past the limit with 500, reads a body with no time limit, and refuses one too large
//! with a text that names no setting.

use std::convert::Infallible;
use std::error::Error;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Buf, Bytes, Frame, SizeHint};
use hyper::{Method, Request, Response, StatusCode, header};
use rmcp::transport::StreamableHttpService;
use tokio::time::Instant;

use crate::limits::{Limit, LimitExceeded, McpServerLimits};
use crate::mcp::http::origin::Origins;
use crate::mcp::http::sessions::BoundedSessions;
use crate::mcp::server::McpHandler;

/// The most bytes past the limit read (and dropped) so the client reads its 413 rather than a
/// reset connection; a client that sends more has its connection closed.
const DRAINED: usize = 16 * 1024 * 1024;

/// What a refused `Origin` is told.
const FORBIDDEN_ORIGIN: &str = "this page's origin may not call the server: only pages of this \
machine and those of `McpServer::allowed_origins` may";

type BoxError = Box<dyn Error + Send + Sync>;

/// The Streamable HTTP service of a tool set ([`McpServer::http_service`]): a tower `Service` of
/// HTTP requests (`http` 1 types, any body), to mount in any server built on tower or hyper
/// (axum's `Router::route_service`, hyper-util's `TowerToHyperService`). Cheap to clone: clones
/// share the sessions.
///
/// Before rmcp's service sees a request it checks, as [`McpServer::serve_http`] does (it serves
/// this same service): the `Origin` (403), a new session past
/// [`max_sessions`](McpServerLimits::max_sessions) (503 with `Retry-After`), the body read within
/// [`body_read_timeout`](McpServerLimits::body_read_timeout) (408) and at most
/// [`max_body_bytes`](McpServerLimits::max_body_bytes) (413). Each refusal's text names the
/// setting that raises it. The header read timeout and the connection count are your server's
/// to bound: a service sees requests, not connections.
///
/// [`McpServer::http_service`]: crate::mcp::server::McpServer::http_service
/// [`McpServer::serve_http`]: crate::mcp::server::McpServer::serve_http
#[derive(Clone)]
pub struct McpHttpService {
    front: Arc<Front>,
}

/// What one server's service holds: rmcp's service, its sessions, its limits and origins.
struct Front {
    rmcp: StreamableHttpService<McpHandler, BoundedSessions>,
    sessions: Arc<BoundedSessions>,
    limits: McpServerLimits,
    origins: Origins,
}

impl McpHttpService {
    pub(crate) fn new(
        rmcp: StreamableHttpService<McpHandler, BoundedSessions>,
        sessions: Arc<BoundedSessions>,
        limits: McpServerLimits,
        origins: Origins,
    ) -> Self {
        let front = Front {
            rmcp,
            sessions,
            limits,
            origins,
        };
        McpHttpService {
            front: Arc::new(front),
        }
    }
}

impl std::fmt::Debug for McpHttpService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpService")
            .field("limits", &self.front.limits)
            .finish_non_exhaustive()
    }
}

impl<B> tower_service::Service<Request<B>> for McpHttpService
where
    B: Body + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<McpHttpBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<McpHttpBody>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let front = self.front.clone();
        Box::pin(async move { Ok(front.handle(request).await) })
    }
}

impl Front {
    /// Answers one request.
    async fn handle<B>(&self, request: Request<B>) -> Response<McpHttpBody>
    where
        B: Body + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let deadline = Instant::now() + self.limits.body_read_time();
        if !self.origins.allow(request.headers().get(header::ORIGIN)) {
            return text(StatusCode::FORBIDDEN, FORBIDDEN_ORIGIN.to_owned());
        }
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
        let request = Request::from_parts(parts, Full::new(body));
        self.rmcp.handle(request).await.map(McpHttpBody)
    }

    fn no_more_sessions(&self) -> Response<McpHttpBody> {
        // A session nobody uses is gone after the idle timeout (one running a call is kept):
        // a place may be free by then.
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

/// The body of an answer of [`McpHttpService`]: rmcp's (JSON, or an event stream that lasts as
/// long as the call), or a text of ours.
pub struct McpHttpBody(BoxBody<Bytes, Infallible>);

impl std::fmt::Debug for McpHttpBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpBody").finish_non_exhaustive()
    }
}

impl Body for McpHttpBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// A plain-text answer.
fn text(status: StatusCode, message: String) -> Response<McpHttpBody> {
    let mut response = Response::new(McpHttpBody(Full::new(Bytes::from(message)).boxed()));
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
    fn response(self, wait: Duration) -> Response<McpHttpBody> {
        let (status, message) = match self {
            Refusal::TooLarge(max) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                LimitExceeded::count(Limit::HttpBodyBytes, max).to_string(),
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

/// One piece of a body: its data (none for trailers), or why it could not be read.
type Piece = Result<Option<Bytes>, String>;

/// The next piece of a body, or `None` at its end; `Err` past `deadline`.
async fn next<B>(body: Pin<&mut B>, deadline: Instant) -> Result<Option<Piece>, ()>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut body = body;
    let frame = tokio::time::timeout_at(deadline, body.frame()).await;
    // The frame becomes bytes here, so nothing of the body's own types is held across a wait.
    frame.map_err(drop).map(|frame| {
        frame.map(|frame| match frame {
            Ok(frame) => Ok(frame
                .into_data()
                .ok()
                .map(|mut data| data.copy_to_bytes(data.remaining()))),
            Err(e) => Err(e.into().to_string()),
        })
    })
}

/// Reads a body whole: at most `max` bytes, by `deadline`. A body over the limit is read on (and
/// dropped) up to [`DRAINED`] more bytes, so the client, still sending, reads its 413.
async fn read<B>(body: B, max: usize, deadline: Instant) -> Result<Bytes, Refusal>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut body = pin!(body);
    if body.size_hint().lower() > max as u64 {
        drain(body, deadline).await;
        return Err(Refusal::TooLarge(max));
    }
    let mut whole = Vec::new();
    loop {
        let Ok(piece) = next(body.as_mut(), deadline).await else {
            return Err(Refusal::TooSlow);
        };
        match piece {
            None => return Ok(Bytes::from(whole)),
            Some(Err(why)) => return Err(Refusal::Broken(why)),
            Some(Ok(None)) => {}
            Some(Ok(Some(data))) => {
                if data.len() > max - whole.len() {
                    drop(whole);
                    drain(body, deadline).await;
                    return Err(Refusal::TooLarge(max));
                }
                whole.extend_from_slice(&data);
            }
        }
    }
}

/// Reads and drops up to [`DRAINED`] bytes of a body, until `deadline`.
async fn drain<B>(mut body: Pin<&mut B>, deadline: Instant)
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut left = DRAINED;
    while let Ok(Some(Ok(data))) = next(body.as_mut(), deadline).await {
        let size = data.map_or(0, |data| data.len());
        if size > left {
            break;
        }
        left -= size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_is_what_tower_and_axum_mount() {
        // axum's `route_service` asks for a `Service` that is `Clone + Send + Sync + 'static`,
        // whose future is `Send`, and whose body is `Send + 'static`.
        fn mountable<S, B>()
        where
            S: tower_service::Service<Request<B>, Error = Infallible>
                + Clone
                + Send
                + Sync
                + 'static,
            S::Future: Send + 'static,
            S::Response: Send + 'static,
        {
        }
        fn sendable<T: Send + Sync + 'static>() {}
        mountable::<McpHttpService, hyper::body::Incoming>();
        mountable::<McpHttpService, Full<Bytes>>();
        mountable::<McpHttpService, http_body_util::Empty<Bytes>>();
        sendable::<McpHttpBody>();
    }
}
