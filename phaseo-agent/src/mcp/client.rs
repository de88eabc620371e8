//! Using an MCP server's tools as tools of an agent: [`McpClient`].
//!
//! A server's tools are ordinary [`Tool`]s: everything a tool of this process has applies to them
//! (approval, timeouts, the error policy, validators, hooks, output caps). What a call does:
//!
//! - **Arguments** are validated locally against the server's input schema, in the draft its
//!   `$schema` names (2020-12 without one), so arguments the schema refuses never reach the server.
//!   The model reads the schema normalised like any tool's ([`schema::normalize`]): no `$schema`,
//!   definitions inlined.
//! - **The output** is the result's `structuredContent` when the server sent one; otherwise its
//!   text content (the text blocks joined by newlines) as a JSON string; a result with other
//!   content (images, resources) is the content blocks as JSON.
//! - **`isError: true`** is the tool's error, with the result's text: under the default policy the
//!   model reads `{"error": "<text>"}`; under [`OnError::FailRun`] the run fails. A protocol error
//!   (an unknown tool, a server gone) is a tool error too.
//! - **Progress**: each `notifications/progress` the server sends for the call is the tool's
//!   progress ([`ToolContext::emit_progress`]), so a run streams it as a `tool.preliminary_result`
//!   event: `{"progress": 2, "total": 5, "message": "..."}` (`total` and `message` when sent).
//! - **Timeouts and cancellation**: a call abandoned before its result (its timeout, a dropped
//!   run, a sibling that failed the run) sends `notifications/cancelled` for its request.
//! - **`notifications/tools/list_changed`** makes the client list the tools again: [`McpClient::tools`]
//!   gives the new set. An agent keeps the tools it was built with; build it again (it is cheap) to
//!   give it the new set.
//!
//! [`schema::normalize`]: crate::schema::normalize
//! [`OnError::FailRun`]: crate::OnError::FailRun
//! [`ToolContext::emit_progress`]: crate::ToolContext::emit_progress

mod observe;
mod call;
mod http;

use std::ffi::OsStr;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, TokioChildProcess, Transport};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::{Mutex, watch};

use crate::mcp::client::call::Server;
use crate::mcp::client::http::Http;
use crate::mcp::client::observe::{Observed, Router};
use crate::tool::definition::Tool;

/// Why a connection to an MCP server, or a listing of its tools, failed.
///
/// ```
/// use phaseo_agent::mcp::{McpClient, McpClientError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let err = McpClient::command("/no/such/mcp-server", ["--stdio"]).await.unwrap_err();
/// assert!(matches!(err, McpClientError::Spawn { .. }));
/// assert!(err.to_string().starts_with("could not start the MCP server `/no/such/mcp-server`"));
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpClientError {
    /// The server's command could not be started.
    #[error("could not start the MCP server `{command}`: {source}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server did not complete MCP's initialisation (it exited, answered something else, or
    /// the transport failed).
    #[error("the MCP server did not initialise: {0}")]
    Initialize(String),
    /// A request to the server failed (here, `tools/list`).
    #[error("the MCP server failed {method}: {reason}")]
    Request {
        /// The MCP method.
        method: &'static str,
        /// What the server or the transport said.
        reason: String,
    },
}

/// A connection to an MCP server, whose tools an agent can use.
///
/// Connect to a server started from a command (stdio: [`command`](Self::command),
/// [`spawn`](Self::spawn)), at a URL (Streamable HTTP: [`url`](Self::url)), or over any rmcp
/// transport ([`connect`](Self::connect)); then give an agent its [`tools`](Self::tools). The
/// client lists the tools when it connects, and again when the server says they changed. See the
/// [module docs](self) for what a call does.
///
/// Dropping the client closes the connection; a server started from a command is ended with it.
///
/// ```
/// use phaseo_agent::mcp::McpClient;
/// use phaseo_agent::{Agent, ScriptedModel};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let files = McpClient::command("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."]).await?;
/// let agent = Agent::builder("assistant")
///     .model(ScriptedModel::new().text("Done."))
///     .tools(files.tools())
///     .build()?;
/// # let _ = agent;
/// # Ok(())
/// # }
/// ```
pub struct McpClient {
    service: RunningService<RoleClient, Handler>,
    shared: Arc<Shared>,
    process_id: Option<u32>,
}

/// What the client and its notification handler share.
struct Shared {
    router: Arc<Router>,
    tools: watch::Sender<Vec<Tool>>,
    /// One listing at a time, so that an older listing never replaces a newer one.
    listing: Mutex<()>,
}

impl Shared {
    /// Lists the server's tools (every page) and makes them the current set.
    async fn refresh(
        &self,
        peer: &rmcp::service::Peer<RoleClient>,
    ) -> Result<Vec<Tool>, McpClientError> {
        let _one = self.listing.lock().await;
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| McpClientError::Request {
                method: "tools/list",
                reason: e.to_string(),
            })?;
        let server = Server {
            peer: peer.clone(),
            router: self.router.clone(),
        };
        let tools: Vec<Tool> = listed.into_iter().map(|t| call::tool(&server, t)).collect();
        self.tools.send_replace(tools.clone());
        Ok(tools)
    }
}

/// The client's side of the protocol: who it is, and what it does on the server's notifications.
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("phaseo-agent", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // A failed listing keeps the set as it was; the next notification tries again.
        let _ = self.shared.refresh(&context.peer).await;
    }
}

impl McpClient {
    /// Starts `program` with `args` as an MCP server over stdio, and connects to it. Its stderr
    /// is passed through to this process's; the process is ended when the client is dropped.
    ///
    /// ```no_run
    /// use phaseo_agent::mcp::McpClient;
    ///
    /// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let everything = McpClient::command("npx", ["-y", "@modelcontextprotocol/server-everything"]).await?;
    /// assert!(everything.tools().iter().any(|tool| tool.id() == "echo"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn command<I, S>(program: impl AsRef<OsStr>, args: I) -> Result<Self, McpClientError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        Self::spawn(command).await
    }

    /// [`command`](Self::command) for a command set up by hand (environment, working directory).
    ///
    /// ```no_run
    /// use phaseo_agent::mcp::McpClient;
    ///
    /// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let mut command = tokio::process::Command::new("my-mcp-server");
    /// command.env("API_TOKEN", "...").current_dir("/srv/tools");
    /// let client = McpClient::spawn(command).await?;
    /// # let _ = client;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn spawn(command: tokio::process::Command) -> Result<Self, McpClientError> {
        let program = command
            .as_std()
            .get_program()
            .to_string_lossy()
            .into_owned();
        let (child, _) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|source| McpClientError::Spawn {
                command: program,
                source,
            })?;
        let process_id = child.id();
        let mut client = Self::connect(child).await?;
        client.process_id = process_id;
        Ok(client)
    }

    /// Connects to the server at `url` over Streamable HTTP (MCP's HTTP transport: a POST per
    /// message, answered with JSON or an event stream, and a session the server may give).
    ///
    /// The requests go through reqwest with rustls, as the providers' do; only same-origin
    /// `307`/`308` redirects are followed.
    ///
    /// ```no_run
    /// use phaseo_agent::mcp::McpClient;
    ///
    /// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let client = McpClient::url("http://127.0.0.1:3001/mcp").await?;
    /// # let _ = client;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn url(url: &str) -> Result<Self, McpClientError> {
        Self::http(StreamableHttpClientTransportConfig::with_uri(url)).await
    }

    /// [`url`](Self::url) with a bearer token, sent as `Authorization: Bearer <token>` on every
    /// request.
    ///
    /// ```no_run
    /// use phaseo_agent::mcp::McpClient;
    ///
    /// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let token = std::env::var("TOOLS_TOKEN").unwrap_or_default();
    /// let client = McpClient::url_with_bearer("https://tools.example.com/mcp", &token).await?;
    /// # let _ = client;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn url_with_bearer(url: &str, token: &str) -> Result<Self, McpClientError> {
        Self::http(StreamableHttpClientTransportConfig::with_uri(url).auth_header(token)).await
    }

    async fn http(config: StreamableHttpClientTransportConfig) -> Result<Self, McpClientError> {
        let client = Http::new().map_err(|e| {
            McpClientError::Initialize(format!("the HTTP client could not be built: {e}"))
        })?;
        Self::connect(StreamableHttpClientTransport::with_client(client, config)).await
    }

    /// Connects over any rmcp client transport: one end of a `tokio::io::duplex`, a
    /// `(reader, writer)` pair, a child process, Streamable HTTP.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpClient;
    /// use rmcp::model::{ServerCapabilities, ServerConfig};
    /// use rmcp::{ServerHandler, ServiceExt};
    ///
    /// /// A server with no tools, written with rmcp.
    /// struct Empty;
    /// impl ServerHandler for Empty {
    ///     fn get_info(&self) -> ServerConfig {
    ///         ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let (ours, theirs) = tokio::io::duplex(4096);
    /// tokio::spawn(async move {
    ///     if let Ok(server) = Empty.serve(theirs).await {
    ///         let _ = server.waiting().await;
    ///     }
    /// });
    /// let client = McpClient::connect(ours).await?;
    /// assert!(client.tools().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect<T, E, A>(transport: T) -> Result<Self, McpClientError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        Self::observed(transport.into_transport()).await
    }

    async fn observed<T>(transport: T) -> Result<Self, McpClientError>
    where
        T: Transport<RoleClient> + 'static,
    {
        let router = Arc::new(Router::default());
        let shared = Arc::new(Shared {
            router: router.clone(),
            tools: watch::Sender::new(Vec::new()),
            listing: Mutex::new(()),
        });
        let handler = Handler {
            shared: shared.clone(),
        };
        let observed = Observed {
            inner: transport,
            router,
        };
        let service = handler
            .serve(observed)
            .await
            .map_err(|e| McpClientError::Initialize(e.to_string()))?;
        shared.refresh(service.peer()).await?;
        Ok(McpClient {
            service,
            shared,
            process_id: None,
        })
    }

    /// The server's tools, as of the last listing: when the client connected, or when the server
    /// last said they changed. Each is a [`Tool`]; set approval, a timeout or anything else on it
    /// as on any tool.
    ///
    /// A tool whose name is not a valid tool id (1 to 64 of `a-z A-Z 0-9 _ -`) is refused when an
    /// agent is built with it; leave it out, or rename it by wrapping, if a server has one.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use phaseo_agent::mcp::McpClient;
    /// use phaseo_agent::Tool;
    ///
    /// # async fn example(client: McpClient) {
    /// let tools: Vec<Tool> = client
    ///     .tools()
    ///     .into_iter()
    ///     .map(|tool| match tool.id() {
    ///         "delete_file" => tool.require_approval(),
    ///         _ => tool.timeout(Duration::from_secs(30)),
    ///     })
    ///     .collect();
    /// # let _ = tools;
    /// # }
    /// ```
    pub fn tools(&self) -> Vec<Tool> {
        self.shared.tools.borrow().clone()
    }

    /// One of the server's tools, by its id, as of the last listing (see
    /// [`tools`](Self::tools)); only that tool is cloned.
    ///
    /// ```no_run
    /// # async fn example(client: phaseo_agent::mcp::McpClient) {
    /// let delete = client.tool("delete_file").map(|tool| tool.require_approval());
    /// # let _ = delete;
    /// # }
    /// ```
    pub fn tool(&self, id: &str) -> Option<Tool> {
        self.shared
            .tools
            .borrow()
            .iter()
            .find(|t| t.id() == id)
            .cloned()
    }

    /// Lists the server's tools again, now, and makes them the current set.
    ///
    /// ```no_run
    /// # async fn example(client: phaseo_agent::mcp::McpClient) -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let tools = client.refresh().await?;
    /// assert_eq!(tools.len(), client.tools().len());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn refresh(&self) -> Result<Vec<Tool>, McpClientError> {
        self.shared.refresh(self.service.peer()).await
    }

    /// Resolves when the set of tools next changes (after this call: create the future before
    /// whatever makes the server change its tools).
    ///
    /// ```no_run
    /// # async fn example(client: phaseo_agent::mcp::McpClient) {
    /// let changed = client.changed();
    /// // ... something makes the server add a tool and send tools/list_changed ...
    /// changed.await;
    /// let tools = client.tools();
    /// # let _ = tools;
    /// # }
    /// ```
    pub fn changed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut tools = self.shared.tools.subscribe();
        tools.mark_unchanged();
        async move {
            // The sender lives as long as the client: an error means the client is gone.
            let _ = tools.changed().await;
        }
    }

    /// The id of the server's process, for a client started from a command.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
    /// let client = phaseo_agent::mcp::McpClient::command("my-mcp-server", ["--stdio"]).await?;
    /// assert!(client.process_id().is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn process_id(&self) -> Option<u32> {
        self.process_id
    }

    /// The name and version the server gave when it initialised.
    ///
    /// ```no_run
    /// # async fn example(client: phaseo_agent::mcp::McpClient) {
    /// if let Some((name, version)) = client.server_info() {
    ///     println!("connected to {name} {version}");
    /// }
    /// # }
    /// ```
    pub fn server_info(&self) -> Option<(String, String)> {
        let peer = self.service.peer_info()?;
        let info = peer.server_info.as_ref()?;
        Some((info.name.clone(), info.version.clone()))
    }
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.server_info())
            .field("tools", &self.shared.tools.borrow().len())
            .field("process_id", &self.process_id)
            .finish_non_exhaustive()
    }
}
