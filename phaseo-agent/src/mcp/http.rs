//! Serving a tool set over MCP's Streamable HTTP transport: rmcp's HTTP service (a tower
//! service), and a small HTTP/1 server of it on a TCP listener.
//!
//! What a client may cost is bounded by [`McpServerLimits`](crate::limits::McpServerLimits) ([`McpServer::limits`]):
//!
//! | what | [`serve_http`](McpServer::serve_http) | [`http_service`](McpServer::http_service) |
//! |---|---|---|
//! | sessions kept ([`max_sessions`](crate::limits::McpServerLimits::max_sessions)) | 503 with `Retry-After` past it | 500 past it |
//! | a session unused ([`session_idle_timeout`](crate::limits::McpServerLimits::session_idle_timeout)) | ended; its id answers 404 | the same |
//! | a body's size ([`max_body_bytes`](crate::limits::McpServerLimits::max_body_bytes)) | 413, before any of it reaches a tool | 413 (rmcp's text) |
//! | a body's time ([`body_read_timeout`](crate::limits::McpServerLimits::body_read_timeout)) | 408, the connection closed | your server's |
//! | the headers' time ([`header_read_timeout`](crate::limits::McpServerLimits::header_read_timeout)) | the connection closed | your server's |
//! | connections ([`max_connections`](crate::limits::McpServerLimits::max_connections)) | past it, new ones wait in the listen backlog | your server's |
//!
//! Each refusal's text names the setting that raises it. Both check `Host` and `Origin` against
//! DNS rebinding and cross-site calls: only loopback `Host` names are served (rmcp's rule), and a
//! request whose `Origin` is not a loopback origin nor one of
//! [`McpServer::allowed_origins`] is refused with 403 before it reaches a tool.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::mcp::server::{McpHandler, McpServer, ServeError};

mod sessions;
mod front;

pub use sessions::{BoundedSessions, SessionsError};

/// rmcp's Streamable HTTP service of a tool set: a tower `Service` of HTTP requests, to mount in
/// any HTTP server built on tower or hyper (see [`McpServer::http_service`]).
pub type McpHttpService = StreamableHttpService<McpHandler, BoundedSessions>;

/// The origins of pages served from this machine: always allowed.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// The shortest and longest pause after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

impl McpServer {
    /// The tools as rmcp's Streamable HTTP service (a tower service), with sessions kept in
    /// memory, bounded by [`McpServer::limits`] (their number and idle time, a body's size; the
    /// time and connection limits are the HTTP server's, yours: see [the module docs](self)).
    /// Only requests whose `Host` is a loopback name are served, and only pages of loopback
    /// origins or [`McpServer::allowed_origins`] (guards against DNS rebinding and cross-site
    /// calls). For a server reached by another name, build
    /// `StreamableHttpService::new(move || Ok(handler.clone()), ..)` from
    /// [`McpServer::handler`] with your own `StreamableHttpServerConfig`.
    ///
    /// ```
    /// use phaseo_agent::mcp::server::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let service = McpServer::new(ping).http_service()?;
    /// # let _ = service;
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn http_service(&self) -> Result<McpHttpService, AgentError> {
        let sessions = Arc::new(BoundedSessions::new(&self.limits));
        Ok(self.service(self.handler()?, sessions, CancellationToken::new()))
    }

    /// Serves the tools over Streamable HTTP at `addr` (any path), on a listener of its own, until
    /// [`HttpServing::shutdown`]. Bind `127.0.0.1:0` for a free port, and read it back from
    /// [`HttpServing::local_addr`]. Every one of [`McpServer::limits`] applies (see
    /// [the module docs](self)).
    ///
    /// ```
    /// use phaseo_agent::mcp::server::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::mcp::server::ServeError> {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let http = McpServer::new(ping).serve_http("127.0.0.1:0").await?;
    /// assert!(http.local_addr().ip().is_loopback());
    /// http.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn serve_http(&self, addr: impl ToSocketAddrs) -> Result<HttpServing, ServeError> {
        let handler = self.handler()?;
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let sessions = Arc::new(BoundedSessions::new(&self.limits));
        let service = self.service(handler, sessions.clone(), stop.child_token());
        let front = Arc::new(front::Front {
            service,
            sessions,
            limits: self.limits,
        });
        let accepting = tokio::spawn(accept(listener, front, stop.clone()));
        Ok(HttpServing {
            local_addr,
            stop,
            accepting,
        })
    }
}

impl McpServer {
    /// rmcp's service of `handler`, with these sessions, the body limit and the origin check.
    fn service(
        &self,
        handler: McpHandler,
        sessions: Arc<BoundedSessions>,
        stop: CancellationToken,
    ) -> McpHttpService {
        let origins = LOOPBACK_ORIGINS
            .iter()
            .map(|origin| (*origin).to_owned())
            .chain(self.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop)
            .with_max_request_body_bytes(self.limits.body_bytes())
            .with_allowed_origins(origins)
            .enforce_origin_validation();
        StreamableHttpService::new(move || Ok(handler.clone()), sessions, config)
    }
}

/// Accepts connections until `stop`, at most `max_connections` open at once; then ends the ones
/// still open.
async fn accept(listener: TcpListener, front: Arc<front::Front>, stop: CancellationToken) {
    let limits = front.limits;
    let places = Arc::new(Semaphore::new(limits.connections().max(1)));
    let mut connections = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF.0;
    loop {
        // Past the limit, nothing is accepted: the kernel's listen backlog holds the rest.
        let place = tokio::select! {
            () = stop.cancelled() => break,
            place = places.clone().acquire_owned() => place,
        };
        let Ok(place) = place else { break };
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff = ACCEPT_BACKOFF.0;
                stream
            }
            // That connection is lost, not the server.
            Err(e) if lost_connection(&e) => continue,
            // Out of file descriptors (or memory): accepting again at once fails again, and
            // would spin. A pause lets connections close.
            Err(_) => {
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF.1);
                continue;
            }
        };
        let front = front.clone();
        connections.spawn(async move {
            let _place = place;
            let service = hyper::service::service_fn(move |request| {
                let front = front.clone();
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_time())
                .serve_connection(TokioIo::new(stream), service);
            // A client that goes away mid-request ends its connection; nothing to report.
            let _ = connection.await;
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
}

/// An accept error that concerns one connection only (the client gave up before it was
/// accepted).
fn lost_connection(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
    )
}

/// A Streamable HTTP server running ([`McpServer::serve_http`]).
pub struct HttpServing {
    local_addr: SocketAddr,
    stop: CancellationToken,
    accepting: tokio::task::JoinHandle<()>,
}

impl HttpServing {
    /// The address it listens on.
    ///
    /// An example is on [`McpServer::serve_http`].
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, ends the sessions and the open connections, and waits for them.
    ///
    /// An example is on [`McpServer::serve_http`].
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.accepting.await;
    }
}
