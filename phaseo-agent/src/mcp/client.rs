//! The MCP client (`McpClient`); its user docs are the `mcp` module's, under "Using a server's tools".

mod observe;
mod call;
mod http;
mod list;
mod stdio;

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, PoisonError};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::{Mutex, watch};

use crate::limits::{Limit, LimitExceeded, McpClientLimits};
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
    /// the transport failed). The source is the transport's or rmcp's error.
    #[error("the MCP server did not initialise")]
    Initialize(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A request to the server failed (here, `tools/list`).
    #[error("the MCP server failed {method}: {reason}")]
    Request {
        /// The MCP method.
        method: &'static str,
        /// What the server or the transport said.
        reason: String,
    },
    /// The server went over one of the client's [`McpClientLimits`] while connecting or listing
    /// its tools (a silent `initialize`, endless pages, too many tools, a message too large).
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::limits::{Limit, McpClientLimits};
    /// use phaseo_agent::mcp::{McpClient, McpClientError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A server that never answers: the other end of the pipe is kept open, and silent.
    /// let (ours, _silent) = tokio::io::duplex(4096);
    /// let limits = McpClientLimits::default().connect_timeout(Duration::from_millis(50));
    /// let err = McpClient::builder().limits(limits).connect(ours).await.unwrap_err();
    /// let McpClientError::Limit { source, .. } = &err else { panic!("{err}") };
    /// assert_eq!(source.limit, Limit::McpConnectTime);
    /// assert!(err.to_string().contains("`McpClientLimits::connect_timeout`"));
    /// # }
    /// ```
    #[error("the MCP server `{server}` went over a limit: {source}")]
    Limit {
        /// The server: its name from `initialize`, else its command or URL.
        server: String,
        /// The limit, and the setting that raises it.
        source: LimitExceeded,
    },
}

/// A tool a server offers that the client left out, because its input schema goes over one of
/// the client's [`McpClientLimits`] ([`McpClient::refused`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the MCP server `{server}`'s tool `{tool}` is left out: {limit}")]
#[non_exhaustive]
pub struct RefusedTool {
    /// The server: its name from `initialize`, else its command or URL.
    pub server: String,
    /// The tool's name, as the server gave it.
    pub tool: String,
    /// The limit its schema goes over, and the setting that raises it.
    pub limit: LimitExceeded,
}

/// How to connect to an MCP server: the [`McpClientLimits`] (and, over HTTP, a bearer token)
/// first, then the way to reach it, which connects: [`command`](Self::command),
/// [`spawn`](Self::spawn), [`url`](Self::url) or [`connect`](Self::connect).
///
/// [`McpClient::command`] and the other constructors of [`McpClient`] are this builder with the
/// default limits.
///
/// ```no_run
/// use std::time::Duration;
/// use phaseo_agent::limits::McpClientLimits;
/// use phaseo_agent::mcp::McpClient;
///
/// # async fn example() -> Result<(), phaseo_agent::mcp::McpClientError> {
/// let limits = McpClientLimits::default()
///     .connect_timeout(Duration::from_secs(5))
///     .max_message_bytes(4 * 1024 * 1024);
/// let client = McpClient::builder()
///     .limits(limits)
///     .command("my-mcp-server", ["--stdio"])
///     .await?;
/// # let _ = client;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct McpClientBuilder {
    limits: McpClientLimits,
    bearer: Option<String>,
}

impl std::fmt::Debug for McpClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: only whether there is one.
        f.debug_struct("McpClientBuilder")
            .field("limits", &self.limits)
            .field("bearer", &self.bearer.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl McpClientBuilder {
    /// The bounds on what the server may send (the defaults without this).
    pub fn limits(mut self, limits: McpClientLimits) -> Self {
        self.limits = limits;
        self
    }

    /// A bearer token for [`url`](Self::url), sent as `Authorization: Bearer <token>` on every
    /// request.
    pub fn bearer(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// Starts `program` with `args` as an MCP server over stdio, and connects to it (see
    /// [`McpClient::command`]).
    pub async fn command<I, S>(
        self,
        program: impl AsRef<OsStr>,
        args: I,
    ) -> Result<McpClient, McpClientError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        self.spawn(command).await
    }

    /// [`command`](Self::command) for a command set up by hand (see [`McpClient::spawn`]).
    ///
    /// Each line the server writes is bounded by
    /// [`max_message_bytes`](McpClientLimits::max_message_bytes): a longer one ends the
    /// connection (as soon as it is that long, without reading the rest), and what waited for an
    /// answer fails with the limit.
    pub async fn spawn(
        self,
        command: tokio::process::Command,
    ) -> Result<McpClient, McpClientError> {
        let program = command
            .as_std()
            .get_program()
            .to_string_lossy()
            .into_owned();
        let router = Arc::new(Router::new(self.limits));
        let (child, transport) = stdio::spawn(command, self.limits.message_bytes(), router.clone())
            .map_err(|source| McpClientError::Spawn {
                command: program.clone(),
                source,
            })?;
        let mut client = observed(transport, router, self.limits, program).await?;
        client.child = Some(child);
        Ok(client)
    }

    /// Connects to the server at `url` over Streamable HTTP (see [`McpClient::url`]), with the
    /// bearer token if one was given. A response body, or one event of a stream, larger than
    /// [`max_message_bytes`](McpClientLimits::max_message_bytes) is refused as it is read.
    pub async fn url(self, url: &str) -> Result<McpClient, McpClientError> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(token) = self.bearer {
            config = config.auth_header(token);
        }
        let router = Arc::new(Router::new(self.limits));
        let client = Http::new(self.limits.message_bytes(), router.clone())
            .map_err(|e| McpClientError::Initialize(Box::new(e)))?;
        let transport = StreamableHttpClientTransport::with_client(client, config);
        observed(transport, router, self.limits, url.to_owned()).await
    }

    /// Connects over any rmcp client transport (see [`McpClient::connect`]).
    ///
    /// The transport reads the messages: its own bound on their size applies (rmcp's byte-stream
    /// transports drop a line over 16 MiB), not [`max_message_bytes`](McpClientLimits::max_message_bytes).
    /// Every other limit applies.
    pub async fn connect<T, E, A>(self, transport: T) -> Result<McpClient, McpClientError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let router = Arc::new(Router::new(self.limits));
        observed(
            transport.into_transport(),
            router,
            self.limits,
            "an MCP server".into(),
        )
        .await
    }
}

/// Connects over `transport` (its messages observed by `router`) and lists the tools.
async fn observed<T>(
    transport: T,
    router: Arc<Router>,
    limits: McpClientLimits,
    label: String,
) -> Result<McpClient, McpClientError>
where
    T: Transport<RoleClient> + 'static,
{
    let shared = Arc::new(Shared {
        router: router.clone(),
        limits,
        label,
        name: OnceLock::new(),
        tools: watch::Sender::new(Vec::new()),
        refused: std::sync::Mutex::default(),
        listing: Mutex::new(()),
        wanted: AtomicBool::new(false),
    });
    let handler = Handler {
        shared: shared.clone(),
    };
    let observed = Observed {
        inner: transport,
        router: router.clone(),
    };
    let service = match tokio::time::timeout(limits.connect_time(), handler.serve(observed)).await {
        Ok(Ok(service)) => service,
        Ok(Err(e)) => {
            return Err(match router.broken() {
                Some(source) => shared.limit(source),
                None => McpClientError::Initialize(Box::new(e)),
            });
        }
        Err(_) => {
            let source = LimitExceeded::time(Limit::McpConnectTime, limits.connect_time());
            return Err(shared.limit(source));
        }
    };
    let name = service
        .peer_info()
        .and_then(|peer| peer.server_info.as_ref().map(|info| info.name.clone()));
    if let Some(name) = name {
        if !name.is_empty() {
            // A name is for messages: a server's own may be any length.
            let _ = shared.name.set(name.chars().take(100).collect());
        }
    }
    shared.refresh(service.peer()).await?;
    Ok(McpClient {
        service,
        shared,
        child: None,
    })
}

/// A connection to an MCP server, whose tools an agent can use.
///
/// Connect to a server started from a command (stdio: [`command`](Self::command),
/// [`spawn`](Self::spawn)), at a URL (Streamable HTTP: [`url`](Self::url)), or over any rmcp
/// transport ([`connect`](Self::connect)); then give an agent its [`tools`](Self::tools). The
/// client lists the tools when it connects, and again when the server says they changed. See the
/// [module docs](crate::mcp#using-a-servers-tools) for what a call does.
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
    /// The server's process, for a client started from a command: killed when dropped.
    child: Option<tokio::process::Child>,
}

/// What the client and its notification handler share.
struct Shared {
    router: Arc<Router>,
    limits: McpClientLimits,
    /// The server's command or URL, for messages until it gives its name.
    label: String,
    /// The server's name from `initialize`.
    name: OnceLock<String>,
    tools: watch::Sender<Vec<Tool>>,
    /// The tools of the last listing left out for their schema.
    refused: std::sync::Mutex<Vec<RefusedTool>>,
    /// One listing at a time, so that an older listing never replaces a newer one.
    listing: Mutex<()>,
    /// A `list_changed` asked for a listing that has not started yet: later ones need no other.
    wanted: AtomicBool,
}

impl Shared {
    fn server(&self) -> String {
        self.name.get().unwrap_or(&self.label).clone()
    }

    fn limit(&self, source: LimitExceeded) -> McpClientError {
        McpClientError::Limit {
            server: self.server(),
            source,
        }
    }

    /// Lists the server's tools (every page, within the limits) and makes them the current set;
    /// a tool whose schema goes over the limits is left out, and listed as refused.
    async fn refresh(
        &self,
        peer: &rmcp::service::Peer<RoleClient>,
    ) -> Result<Vec<Tool>, McpClientError> {
        let _one = self.listing.lock().await;
        // This listing answers every `list_changed` that came before it.
        self.wanted.store(false, Ordering::Release);
        let listed = list::all_tools(peer, &self.router, &self.limits)
            .await
            .map_err(|failure| match failure {
                list::Failure::Limit(source) => self.limit(source),
                list::Failure::Request(reason) => McpClientError::Request {
                    method: "tools/list",
                    reason,
                },
            })?;
        let server = Server {
            peer: peer.clone(),
            router: self.router.clone(),
        };
        let mut tools = Vec::with_capacity(listed.len());
        let mut refused = Vec::new();
        for listed in listed {
            let name = listed.name.to_string();
            match call::tool(&server, listed, &self.limits) {
                Ok(tool) => tools.push(tool),
                Err(limit) => refused.push(RefusedTool {
                    server: self.server(),
                    tool: name,
                    limit,
                }),
            }
        }
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner) = refused;
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
        // A listing already due (waiting for the one running) will see this change too.
        if self.shared.wanted.swap(true, Ordering::AcqRel) {
            return;
        }
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
        Self::builder().command(program, args).await
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
        Self::builder().spawn(command).await
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
        Self::builder().url(url).await
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
        Self::builder().bearer(token).url(url).await
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
        Self::builder().connect(transport).await
    }

    /// A client with limits of its own (or a bearer token) before it connects; the constructors
    /// above are this with the defaults.
    ///
    /// ```
    /// use phaseo_agent::limits::McpClientLimits;
    /// use phaseo_agent::mcp::McpClient;
    /// use rmcp::model::{ServerCapabilities, ServerConfig};
    /// use rmcp::{ServerHandler, ServiceExt};
    ///
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
    /// let client = McpClient::builder()
    ///     .limits(McpClientLimits::default().max_tools(50))
    ///     .connect(ours)
    ///     .await?;
    /// assert!(client.tools().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder() -> McpClientBuilder {
        McpClientBuilder::default()
    }

    /// The server's tools, as of the last listing: when the client connected, or when the server
    /// last said they changed. Each is a [`Tool`]; set approval, a timeout or anything else on it
    /// as on any tool.
    ///
    /// A tool whose name is not a valid tool id (1 to 64 of `a-z A-Z 0-9 _ -`) is refused when an
    /// agent is built with it; leave it out, or rename it by wrapping, if a server has one.
    ///
    /// A tool whose input schema goes over the client's limits (its size, or its values or depth
    /// once its `$ref`s are inlined: see [`McpClientLimits::max_schema_nodes`]) is not here: it
    /// is in [`refused`](Self::refused), with the limit, so that nothing is left out silently.
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

    /// The tools of the last listing that were left out because their input schema goes over
    /// the client's limits, each with the server, the tool and the limit (whose message names the
    /// setting that raises it). The server's other tools are in [`tools`](Self::tools) as usual.
    ///
    /// ```no_run
    /// # async fn example(client: phaseo_agent::mcp::McpClient) {
    /// for refused in client.refused() {
    ///     eprintln!("{refused}");
    /// }
    /// # }
    /// ```
    pub fn refused(&self) -> Vec<RefusedTool> {
        self.shared
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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

    /// Lists the server's tools again, now, and makes them the current set (within the same
    /// limits as when the client connected).
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
        self.child.as_ref().and_then(tokio::process::Child::id)
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
            .field("process_id", &self.process_id())
            .finish_non_exhaustive()
    }
}
