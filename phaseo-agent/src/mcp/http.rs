//! Streamable HTTP serving; its user docs are the `mcp` module's, under "Serving over HTTP".

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::limits::McpServerLimits;
use crate::mcp::server::{McpHandler, McpServer, ServeError};

mod sessions;
mod origin;
mod front;

use origin::Origins;

pub use front::{McpHttpBody, McpHttpService};
pub use sessions::{BoundedSessions, SessionTransport, SessionsError};

/// The shortest and longest pause after a failed accept.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

impl McpServer {
    /// The tools as a Streamable HTTP service (a tower service, [`McpHttpService`]) to mount in
    /// your own server, with sessions kept in memory. It checks each request as
    /// [`serve_http`](Self::serve_http) does, within [`McpServer::limits`]: the `Origin`, the
    /// number of sessions, a body's size and the time to send it, the calls running at once in a
    /// session. The time to send the headers and the number of connections are your server's to
    /// bound (see [the module docs](crate::mcp#serving-over-http)).
    /// Only requests whose `Host` is a loopback name are served, and only pages of loopback
    /// origins or [`McpServer::allowed_origins`] (guards against DNS rebinding and cross-site
    /// calls). For a server reached by another name, build rmcp's
    /// `StreamableHttpService::new(move || Ok(handler.for_session()), ..)` from
    /// [`McpServer::handler`] with your own `StreamableHttpServerConfig` (the checks of this
    /// service are then yours to make, but for the calls in a session, which the handler counts).
    ///
    /// ```
    /// use http_body_util::Full;
    /// use hyper::body::Bytes;
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    /// use tower_service::Service;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let mut service = McpServer::new(ping).http_service()?;
    /// // Mount it in axum (`Router::route_service("/mcp", service)`) or hyper; here, called as is.
    /// let request = hyper::Request::post("http://127.0.0.1/mcp")
    ///     .header("origin", "https://evil.example")
    ///     .body(Full::new(Bytes::from_static(b"{}")))?;
    /// assert_eq!(service.call(request).await?.status(), 403);
    /// # Ok(())
    /// # }
    /// ```
    pub fn http_service(&self) -> Result<McpHttpService, AgentError> {
        Ok(self.service(self.handler()?, CancellationToken::new()))
    }

    /// Serves the tools over Streamable HTTP at `addr` (any path), on a listener of its own, until
    /// [`HttpServing::shutdown`]. Bind `127.0.0.1:0` for a free port, and read it back from
    /// [`HttpServing::local_addr`]. Every one of [`McpServer::limits`] applies (see
    /// [the module docs](crate::mcp#serving-over-http)).
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::mcp::ServeError> {
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
        let service = self.service(handler, stop.child_token());
        let accepting = tokio::spawn(accept(listener, service, self.limits, stop.clone()));
        Ok(HttpServing {
            local_addr,
            stop,
            accepting,
        })
    }
}

impl McpServer {
    /// Our service in front of rmcp's service of `handler`, with sessions of its own; `stop`
    /// ends them.
    fn service(&self, handler: McpHandler, stop: CancellationToken) -> McpHttpService {
        let sessions = Arc::new(BoundedSessions::new(&self.limits));
        // The Origin is checked in front, by rmcp's rules only where they are ours (see
        // `origin`): its own check is left off. Its body limit stays, a second line behind ours.
        let config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop)
            .with_max_request_body_bytes(self.limits.body_bytes());
        // rmcp asks for a handler for each new session (and on other occasions): each one counts
        // its own calls.
        let factory = move || Ok(handler.for_session());
        let rmcp = StreamableHttpService::new(factory, sessions.clone(), config);
        let origins = Origins::new(&self.allowed_origins);
        McpHttpService::new(rmcp, sessions, self.limits, origins)
    }
}

/// Accepts connections until `stop`, at most `max_connections` open at once; then ends the ones
/// still open.
async fn accept(
    listener: TcpListener,
    service: McpHttpService,
    limits: McpServerLimits,
    stop: CancellationToken,
) {
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
        // The very service a user mounts: the checks on a request are made once, there.
        let service = TowerToHyperService::new(service.clone());
        connections.spawn(async move {
            let _place = place;
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
