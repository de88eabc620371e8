//! Serving a tool set over MCP's Streamable HTTP transport: rmcp's HTTP service (a tower
//! service), and a small HTTP/1 server of it on a TCP listener.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::mcp::server::{McpHandler, McpServer, ServeError};

/// rmcp's Streamable HTTP service of a tool set: a tower `Service` of HTTP requests, to mount in
/// any HTTP server built on tower or hyper (see [`McpServer::http_service`]).
pub type McpHttpService = StreamableHttpService<McpHandler, LocalSessionManager>;

impl McpServer {
    /// The tools as rmcp's Streamable HTTP service (a tower service), with sessions kept in
    /// memory and rmcp's defaults: only requests whose `Host` is a loopback name are served (a
    /// guard against DNS rebinding). For a server reached by another name, build
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
        Ok(service(self.handler()?, CancellationToken::new()))
    }

    /// Serves the tools over Streamable HTTP at `addr` (any path), on a listener of its own, until
    /// [`HttpServing::shutdown`]. Bind `127.0.0.1:0` for a free port, and read it back from
    /// [`HttpServing::local_addr`].
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
        let service = service(handler, stop.child_token());
        let accepting = tokio::spawn(accept(listener, service, stop.clone()));
        Ok(HttpServing {
            local_addr,
            stop,
            accepting,
        })
    }
}

fn service(handler: McpHandler, stop: CancellationToken) -> McpHttpService {
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop);
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// Accepts connections until `stop`; then ends the ones still open.
async fn accept(listener: TcpListener, service: McpHttpService, stop: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        // A failed accept (too many open files, a reset) loses that connection, not the server.
        let Ok((stream, _)) = accepted else { continue };
        let service = TowerToHyperService::new(service.clone());
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            // A client that goes away mid-request ends its connection; nothing to report.
            let _ = connection.await;
        });
        while connections.try_join_next().is_some() {}
    }
    connections.shutdown().await;
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
