//! The MCP server (`McpServer`); its user docs are the `mcp` module's, under "Serving".

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model as m;
use rmcp::service::{RequestContext, RoleServer, RunningService, ServiceExt};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod lifecycle;
mod trace;

use crate::error::AgentError;
use crate::limits::{Limit, LimitExceeded, McpServerLimits};
use crate::mcp::server::lifecycle::Lifecycle;
use crate::mcp::server::trace::Traced;
use crate::model::message::ToolCall;
use crate::run::agent::{Agent, ApprovalPolicy, CallPredicate, needs_approval};
use crate::telemetry::semconv::{OUTCOME_ERROR, OUTCOME_REJECTED};
use crate::tool::call::{Later, Parsed};
use crate::tool::context::{ProgressSink, ScopeParts, ToolContext};
use crate::tool::definition::{IntoTools, Tool};
use crate::tool::invoke::{cap, invoke};
use crate::tool::resource::Resources;

/// What the text of a call refused for want of a person says.
pub const NO_ELICITATION: &str = "This tool needs a person's approval before it runs, and this \
MCP client cannot ask for one (it does not support elicitation)";

/// A tool set to serve over MCP: built from a list of tools ([`McpServer::new`]) or an agent
/// ([`McpServer::from_agent`]), then served over stdio, any byte stream, or Streamable HTTP.
///
/// See [the module docs](crate::mcp#serving) for what clients see.
///
/// ```
/// use phaseo_agent::mcp::McpServer;
/// use phaseo_agent::{Agent, ScriptedModel, Tool};
/// use serde_json::json;
///
/// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
/// let agent = Agent::builder("ops").model(ScriptedModel::new()).tool(ping).build()?;
/// let server = McpServer::from_agent(&agent);
/// assert_eq!(server.handler()?.tool_ids(), ["ping"]);
/// # Ok::<(), phaseo_agent::AgentError>(())
/// ```
#[derive(Clone)]
pub struct McpServer {
    tools: Vec<Tool>,
    resources: Resources,
    name: String,
    version: String,
    instructions: Option<String>,
    agent_id: Arc<str>,
    rules: Rules,
    pub(crate) limits: McpServerLimits,
    pub(crate) allowed_origins: Vec<String>,
}

/// What an agent adds to its tools' own settings.
#[derive(Clone, Default)]
struct Rules {
    approval: Option<Arc<ApprovalPolicy>>,
    human_review: Option<Arc<CallPredicate>>,
    default_timeout: Option<Duration>,
    max_output_chars: Option<usize>,
}

impl McpServer {
    /// A server of these tools (anything [`IntoTools`]: a tool, `#[tool]` functions, a tuple or
    /// `Vec` of them). Give the resources they use with [`resource`](Self::resource).
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::{Tool, tool};
    /// use serde_json::json;
    ///
    /// /// Add two numbers.
    /// #[tool]
    /// fn add(a: i64, b: i64) -> i64 {
    ///     a + b
    /// }
    ///
    /// let lookup = Tool::external("lookup", "Look a customer up", json!({"type": "object"}));
    /// let server = McpServer::new((add, lookup));
    /// assert_eq!(server.handler()?.tool_ids(), ["add"]); // external tools are not served
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn new(tools: impl IntoTools) -> Self {
        McpServer {
            tools: tools.into_tools(),
            resources: Resources::new(),
            name: "phaseo-agent".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            agent_id: "mcp".into(),
            rules: Rules::default(),
            limits: McpServerLimits::default(),
            allowed_origins: Vec::new(),
        }
    }

    /// A server of an agent's tools, with what the agent adds to them: its resources, its
    /// approval rule or policy and `human_review` (both ask the person, see the module docs), its
    /// default timeout and output cap. The server is named after the agent.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::{Agent, ScriptedModel, Tool};
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let agent = Agent::builder("ops").model(ScriptedModel::new()).tool(ping).build()?;
    /// assert_eq!(McpServer::from_agent(&agent).handler()?.tool_ids(), ["ping"]);
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn from_agent(agent: &Agent) -> Self {
        let inner = &agent.inner;
        McpServer {
            tools: inner.tools.clone(),
            resources: inner.resources.clone(),
            name: String::from(&*inner.id),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            agent_id: inner.id.clone(),
            rules: Rules {
                approval: inner.approval.clone(),
                human_review: inner.human_review.clone(),
                default_timeout: inner.settings.default_timeout,
                max_output_chars: inner.settings.max_output_chars,
            },
            limits: McpServerLimits::default(),
            allowed_origins: Vec::new(),
        }
    }

    /// Lends the tools a resource of type `T` (see
    /// [`AgentBuilder::resource`](crate::AgentBuilder::resource)); a value of the same type is
    /// replaced.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// struct Pool { size: usize }
    ///
    /// let size = Tool::new("pool_size", "The size of the pool", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.resource::<Pool>()?.size)))
    ///     .needs_resource::<Pool>();
    /// assert!(McpServer::new(size.clone()).handler().is_err()); // says which resource is missing
    /// assert!(McpServer::new(size).resource(Pool { size: 4 }).handler().is_ok());
    /// ```
    pub fn resource<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.resources = self.resources.with(value);
        self
    }

    /// Lends the tools these resources, added to (and replacing by type) those given before.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::{Resources, Tool};
    /// use serde_json::json;
    ///
    /// struct Region(&'static str);
    ///
    /// let region = Tool::new("region", "Our region", json!({"type": "object"}),
    ///     |_, ctx| Ok(json!(ctx.resource::<Region>()?.0)))
    ///     .needs_resource::<Region>();
    /// let shared = Resources::new().with(Region("eu-west-1"));
    /// assert!(McpServer::new(region).resources(&shared).handler().is_ok());
    /// ```
    pub fn resources(mut self, resources: &Resources) -> Self {
        self.resources = self.resources.merge(resources);
        self
    }

    /// The name and version the server gives clients (`serverInfo`); by default `phaseo-agent`
    /// (or the agent's id) and this crate's version.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let server = McpServer::new(ping).name("ops-tools", "2.1.0");
    /// # let _ = server;
    /// ```
    pub fn name(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Instructions the client may show its model (`instructions` of the `initialize` result).
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let server = McpServer::new(ping).instructions("Ping before anything else.");
    /// # let _ = server;
    /// ```
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// What a client may cost the server: the calls one session runs at once (any transport);
    /// over HTTP ([`serve_http`](Self::serve_http), and [`http_service`](Self::http_service)
    /// but for connections and headers), sessions kept and their idle time, connections held,
    /// the time to send a request's headers and body, a body's size. See [`McpServerLimits`] for
    /// the defaults.
    ///
    /// ```
    /// use std::time::Duration;
    /// use phaseo_agent::limits::McpServerLimits;
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let server = McpServer::new(ping).limits(
    ///     McpServerLimits::default()
    ///         .max_sessions(50)
    ///         .session_idle_timeout(Duration::from_secs(60)),
    /// );
    /// # let _ = server;
    /// ```
    pub fn limits(mut self, limits: McpServerLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Web pages that may call the server over Streamable HTTP from a browser, besides those
    /// served from this machine. A request whose `Origin` header names another site is refused
    /// with 403, before it reaches a tool: a page in the user's browser must not drive tools on
    /// their machine (MCP asks servers to check `Origin` against DNS rebinding). A request without
    /// `Origin` (a program, not a page) and a page of a loopback origin (`localhost`,
    /// `127.0.0.1`, `[::1]`, any port, http or https) are always served.
    ///
    /// Each entry is an origin as a browser sends it, with its port, or `:*` for any port:
    /// `https://app.example.com:443`, `http://intranet.local:*`; `null` allows the `Origin: null`
    /// of sandboxed pages and local files. Calling this again replaces the list.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let server = McpServer::new(ping).allowed_origins(["https://app.example.com:443"]);
    /// # let _ = server;
    /// ```
    pub fn allowed_origins(mut self, origins: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_origins = origins.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the tools and makes the handler that serves them (an rmcp `ServerHandler`): for a
    /// transport of rmcp's that the `serve` methods here do not cover.
    ///
    /// Fails with [`AgentError::InvalidTool`] when a tool is invalid (a bad id, a schema that does
    /// not compile, ...) or needs a resource the server was not given, and
    /// [`AgentError::InvalidAgent`] when two tools share an id.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let a = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let err = McpServer::new((a.clone(), a)).handler().unwrap_err();
    /// assert!(err.to_string().contains("ping"));
    /// ```
    pub fn handler(&self) -> Result<McpHandler, AgentError> {
        let mut index = HashMap::new();
        let mut tools = Vec::new();
        let mut listed = Vec::new();
        for tool in self.tools.iter().filter(|tool| !tool.is_external()) {
            if let Some(reason) = &tool.definition_error {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: reason.clone(),
                });
            }
            if let Some(need) = self.resources.missing(&tool.needs) {
                return Err(AgentError::InvalidTool {
                    tool: tool.id.clone(),
                    reason: self.resources.missing_message(need),
                });
            }
            if index.insert(tool.id.clone(), tools.len()).is_some() {
                return Err(AgentError::InvalidAgent(format!(
                    "two tools have the id `{}`: MCP clients call tools by id",
                    tool.id
                )));
            }
            let definition = definition(tool);
            let structured = definition.output_schema.is_some();
            listed.push(definition);
            tools.push(Served {
                tool: tool.clone(),
                structured,
            });
        }
        let info = m::ServerConfig::new(m::ServerCapabilities::builder().enable_tools().build())
            .with_server_info(m::Implementation::new(&self.name, &self.version))
            .with_protocol_version(MAX_VERSION);
        let info = match &self.instructions {
            Some(text) => info.with_instructions(text),
            None => info,
        };
        let calls = self.limits.calls_per_session();
        Ok(McpHandler {
            gone: CancellationToken::new(),
            calls: places(calls),
            inner: Arc::new(Inner {
                calls_per_session: calls,
                tools,
                index,
                listed,
                info,
                resources: self.resources.clone(),
                agent_id: self.agent_id.clone(),
                rules: self.rules.clone(),
            }),
        })
    }

    /// Serves the tools over a byte stream (a pipe, a socket, `tokio::io::duplex`), as MCP's stdio
    /// transport frames it (one JSON-RPC message a line). Returns once the client has initialised
    /// the session; [`Serving::wait`] for its end.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let (ours, theirs) = tokio::io::duplex(4096);
    /// drop(theirs); // the client went away before initialising
    /// assert!(McpServer::new(ping).serve(ours).await.is_err());
    /// # }
    /// ```
    pub async fn serve<T>(&self, transport: T) -> Result<Serving, ServeError>
    where
        T: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (read, write) = tokio::io::split(transport);
        self.serve_lines(read, write).await
    }

    /// Serves the tools on this process's stdin and stdout: what a desktop client that launches
    /// the server expects. Write logs to stderr (stdout carries the protocol).
    ///
    /// ```no_run
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), phaseo_agent::mcp::ServeError> {
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// McpServer::new(ping).serve_stdio().await?.wait().await
    /// # }
    /// ```
    pub async fn serve_stdio(&self) -> Result<Serving, ServeError> {
        let (read, write) = rmcp::transport::io::stdio();
        self.serve_lines(read, write).await
    }

    /// Serves one session of JSON-RPC lines: the handler's calls stop when the input ends (see
    /// `lifecycle`).
    async fn serve_lines<R, W>(&self, read: R, write: W) -> Result<Serving, ServeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        // A handler of its own, so the end of this session stops no other session's calls.
        let handler = self.handler()?;
        let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(read, write);
        let transport = Lifecycle::new(transport, handler.gone.clone());
        let running = handler
            .serve(transport)
            .await
            .map_err(|e| ServeError::Initialize(Box::new(e)))?;
        Ok(Serving { running })
    }
}

/// The newest MCP revision served: the last one in which a server may send requests (asking a
/// person to approve) to the client.
const MAX_VERSION: m::ProtocolVersion = m::ProtocolVersion::V_2025_11_25;

/// A session being served ([`McpServer::serve`], [`McpServer::serve_stdio`]).
pub struct Serving {
    running: RunningService<RoleServer, McpHandler>,
}

impl Serving {
    /// Waits until the session ends (the client closed it, or the stream ended).
    ///
    /// An example is on [`McpServer::serve`].
    pub async fn wait(self) -> Result<(), ServeError> {
        self.running
            .waiting()
            .await
            .map(drop)
            .map_err(ServeError::Task)
    }

    /// Ends the session from this side.
    ///
    /// An example is on [`McpServer::serve`].
    pub async fn close(self) -> Result<(), ServeError> {
        self.running
            .cancel()
            .await
            .map(drop)
            .map_err(ServeError::Task)
    }
}

/// Why a server could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A tool cannot be served (see [`McpServer::handler`]).
    #[error(transparent)]
    Tools(#[from] AgentError),
    /// The session did not start: the client went away or did not initialise. The source is
    /// rmcp's error.
    #[error("the MCP session did not start")]
    Initialize(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The listener could not be bound or accept.
    #[error("MCP over HTTP: {0}")]
    Io(#[from] std::io::Error),
    /// The task serving the session failed (it panicked or was cancelled).
    #[error("the MCP session failed")]
    Task(#[source] tokio::task::JoinError),
}

/// The MCP server handler of a tool set ([`McpServer::handler`]): an rmcp `ServerHandler`, for
/// one session. Cheap to clone; a clone is the same session's, and counts the same calls
/// ([`McpServerLimits::max_calls_per_session`]): give each session its own with
/// [`for_session`](Self::for_session).
#[derive(Clone)]
pub struct McpHandler {
    inner: Arc<Inner>,
    /// Fires when the session's client is gone for good (the end of a stdio session's input);
    /// never over HTTP, where a disconnect is not a cancellation.
    gone: CancellationToken,
    /// The places of the session's calls running at once: a call holds one for its life.
    calls: Arc<Semaphore>,
}

/// The places of `calls` calls at once (as many as a semaphore can count, at most).
fn places(calls: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(calls.min(Semaphore::MAX_PERMITS)))
}

struct Inner {
    /// [`McpServerLimits::max_calls_per_session`].
    calls_per_session: usize,
    tools: Vec<Served>,
    index: HashMap<String, usize>,
    listed: Vec<m::Tool>,
    info: m::ServerConfig,
    resources: Resources,
    agent_id: Arc<str>,
    rules: Rules,
}

struct Served {
    tool: Tool,
    /// It advertises an output schema: its results carry `structuredContent`.
    structured: bool,
}

impl std::fmt::Debug for McpHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHandler")
            .field("tools", &self.tool_ids())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.tools.iter().map(Tool::id).collect();
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("tools", &ids)
            .finish_non_exhaustive()
    }
}

impl McpHandler {
    /// The ids of the tools served, in order.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// assert_eq!(McpServer::new(ping).handler()?.tool_ids(), ["ping"]);
    /// # Ok::<(), phaseo_agent::AgentError>(())
    /// ```
    pub fn tool_ids(&self) -> Vec<&str> {
        self.inner.tools.iter().map(|s| s.tool.id()).collect()
    }

    /// A handler of the same tools for another session: with a count of its own of the calls
    /// running at once ([`McpServerLimits::max_calls_per_session`]), and its own end. What a
    /// transport that serves many sessions (rmcp's `StreamableHttpService`) makes each session
    /// from.
    ///
    /// ```
    /// use phaseo_agent::mcp::McpServer;
    /// use phaseo_agent::Tool;
    /// use serde_json::json;
    ///
    /// let ping = Tool::new("ping", "Ping", json!({"type": "object"}), |_, _| Ok(json!("pong")));
    /// let handler = McpServer::new(ping).handler()?;
    /// let factory = move || Ok::<_, std::io::Error>(handler.for_session());
    /// assert_eq!(factory()?.tool_ids(), ["ping"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn for_session(&self) -> McpHandler {
        McpHandler {
            inner: self.inner.clone(),
            gone: CancellationToken::new(),
            calls: places(self.inner.calls_per_session),
        }
    }
}

/// A tool as `tools/list` shows it.
fn definition(tool: &Tool) -> m::Tool {
    let schema = match &tool.parameters {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    let mut listed = m::Tool::new(tool.id.clone(), tool.description.clone(), Arc::new(schema));
    let hints = &tool.hints;
    listed.title.clone_from(&hints.title);
    let said = [
        hints.read_only,
        hints.destructive,
        hints.idempotent,
        hints.open_world,
    ];
    if hints.title.is_some() || said.iter().any(Option::is_some) {
        listed.annotations = Some(m::ToolAnnotations::from_raw(
            hints.title.clone(),
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ));
    }
    if let Some(Value::Object(schema)) = tool.output_type_schema() {
        listed.output_schema = Some(Arc::new(schema));
    }
    listed
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> m::ServerConfig {
        self.inner.info.clone()
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [m::ProtocolVersion]> {
        std::borrow::Cow::Borrowed(m::ProtocolVersion::known_up_to(&MAX_VERSION))
    }

    fn list_tools(
        &self,
        _request: Option<m::PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<m::ListToolsResult, ErrorData>> + Send + '_ {
        std::future::ready(Ok(m::ListToolsResult::with_all_items(
            self.inner.listed.clone(),
        )))
    }

    fn get_tool(&self, name: &str) -> Option<m::Tool> {
        let index = *self.inner.index.get(name)?;
        self.inner.listed.get(index).cloned()
    }

    async fn call_tool(
        &self,
        request: m::CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<m::CallToolResponse, ErrorData> {
        // Held until the call ends, is cancelled (its future dropped) or times out. rmcp spawns
        // a task per request, and over HTTP a client that goes away does not end its calls: past
        // the limit, a call is refused before anything of it runs.
        let Ok(_place) = self.calls.try_acquire() else {
            let limit =
                LimitExceeded::count(Limit::McpCallsPerSession, self.inner.calls_per_session);
            let refusal = failed(&AgentError::LimitExceeded(limit));
            return Ok(m::CallToolResponse::Complete(refusal));
        };
        // Boxed: rmcp spawns a task per request whose future holds the largest handler's future,
        // and moves it; a call's state (the tool's future, its context) stays behind one pointer.
        let result = Box::pin(self.inner.call(request, context, &self.gone)).await?;
        Ok(m::CallToolResponse::Complete(result))
    }
}

/// What the approval step decided.
enum Gate {
    Run,
    /// A person said no.
    Rejected(AgentError),
    /// Nobody could be asked, or the call was cancelled while asking.
    Refused(AgentError),
}

/// How a served call ended, for its answer and its span.
enum Ended {
    /// It ran (or a hook answered it): its result, or what failed it.
    Ran(Result<m::CallToolResult, AgentError>),
    /// A person rejected it.
    Rejected(AgentError),
    /// It was refused before it ran (bad arguments, nobody to ask).
    Refused(AgentError),
}

impl Inner {
    /// One `tools/call`, in its `execute_tool` span.
    async fn call(
        &self,
        request: m::CallToolRequestParams,
        context: RequestContext<RoleServer>,
        gone: &CancellationToken,
    ) -> Result<m::CallToolResult, ErrorData> {
        let Some(&index) = self.index.get(request.name.as_ref()) else {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        };
        let served = &self.tools[index];
        let traced = Traced::start(&served.tool, &context.id.to_string(), &context.meta.0.0);
        let span = traced.span.clone();
        let ended = self
            .answer(served, request, context, gone)
            .instrument(span)
            .await;
        Ok(match ended {
            Ended::Ran(result) => {
                traced.ran(&result);
                result.unwrap_or_else(|error| failed(&error))
            }
            Ended::Rejected(error) => {
                traced.ended(OUTCOME_REJECTED, None, false);
                failed(&error)
            }
            Ended::Refused(error) => {
                traced.ended(OUTCOME_ERROR, Some(&error), false);
                failed(&error)
            }
        })
    }

    /// Parse and check, approval, then the tool through `tool::invoke`.
    async fn answer(
        &self,
        served: &Served,
        request: m::CallToolRequestParams,
        context: RequestContext<RoleServer>,
        gone: &CancellationToken,
    ) -> Ended {
        let tool = &served.tool;
        let arguments = match request.arguments {
            Some(map) => Value::Object(map).to_string(),
            None => "{}".to_owned(),
        };
        let parsed = match tool.parse_call(&arguments) {
            Ok(parsed) => parsed,
            Err(error) => return Ended::Refused(error),
        };
        let (sink, progress) = progress_channel(&context);
        let ctx = ToolContext::new(ScopeParts {
            run_id: format!("mcp-{}", context.id),
            // Request ids repeat across sessions (every client counts from 1): a nonce of the
            // call's own keeps its idempotency key apart from every other call's.
            nonce: Some(crate::tool::context::draw_nonce()),
            agent_id: self.agent_id.clone(),
            step_index: 0,
            context: Arc::new(Value::Null),
            call: ToolCall::raw(context.id.to_string(), tool.id.clone(), arguments),
            attempt: 0,
            progress: sink,
            event_checks: tool.event_checks.clone(),
            resources: self.resources.clone(),
        });
        // A call dropped before it ends (the client cancelled, or went away) fires its token.
        let guard = ctx.cancel_on_drop();
        let rule = self.rules.approval.as_deref();
        let verdict = needs_approval(tool, &parsed, &ctx, rule, false).await;
        if self.asks(verdict, &ctx) {
            match ask(tool, &ctx, &context, gone).await {
                Gate::Run => {}
                Gate::Rejected(error) => {
                    guard.disarm();
                    return Ended::Rejected(error);
                }
                Gate::Refused(error) => {
                    guard.disarm();
                    return Ended::Refused(error);
                }
            }
        }
        let result = if let Some(hook) = &tool.on_tool_called {
            answer_by_hook(tool, hook.as_ref(), &ctx).await
        } else {
            self.run(served, parsed, &ctx, &context, gone, progress)
                .await
        };
        guard.disarm();
        Ended::Ran(result)
    }

    /// Runs the call, sending its progress as it comes; a cancellation from the client drops it.
    async fn run(
        &self,
        served: &Served,
        parsed: Parsed,
        ctx: &ToolContext,
        context: &RequestContext<RoleServer>,
        gone: &CancellationToken,
        mut progress: Option<Progress>,
    ) -> Result<m::CallToolResult, AgentError> {
        let tool = &served.tool;
        let limit = tool.max_output_chars.or(self.rules.max_output_chars);
        // The cap applies to the text a client reads (a structured result keeps the whole output
        // as data; a string output is capped as the string, not its JSON text): see `plain`.
        let call = invoke(tool, parsed, ctx, self.rules.default_timeout, None);
        let mut call = std::pin::pin!(call);
        let outcome = loop {
            let next = async {
                match progress.as_mut() {
                    Some(p) => p.receiver.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                outcome = &mut call => break Some(outcome),
                Some(value) = next => {
                    if let Some(p) = progress.as_mut() {
                        // Sending waits for rmcp's loop, which stops reading at the end of the
                        // input: the send would hold the call past its cancellation (5 s).
                        if !p.send_unless_cancelled(value, context, gone).await {
                            break None;
                        }
                    }
                }
                () = cancelled(context, gone) => break None,
            }
        };
        if let (Some(p), Some(_)) = (progress.as_mut(), &outcome) {
            // What the tool published before it returned goes out before the result.
            while let Ok(value) = p.receiver.try_recv() {
                if !p.send_unless_cancelled(value, context, gone).await {
                    break;
                }
            }
        }
        let Some(outcome) = outcome else {
            ctx.cancel();
            return Err(AgentError::tool(format!(
                "Tool {} was cancelled by the client",
                tool.id
            )));
        };
        match outcome {
            Ok(text) if served.structured => Ok(structured(text, limit)),
            Ok(text) => Ok(plain(text, limit)),
            Err(error) => Err(error),
        }
    }

    /// Whether to ask the person: the agent loop's approval verdict (`verdict`, with no standing
    /// approvals: a call here is a run of its own), then the agent's review, which here also
    /// asks; a panic of the review counts as "ask".
    fn asks(&self, mut verdict: bool, ctx: &ToolContext) -> bool {
        if !verdict {
            if let Some(review) = &self.rules.human_review {
                let asks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    review(ctx.tool_call(), ctx)
                }));
                verdict = asks.unwrap_or(true);
            }
        }
        verdict
    }
}

/// Asks the person through the client (MCP elicitation) whether the call may run.
async fn ask(
    tool: &Tool,
    ctx: &ToolContext,
    context: &RequestContext<RoleServer>,
    gone: &CancellationToken,
) -> Gate {
    let can_ask = context
        .client_capabilities()
        .is_some_and(|caps| caps.elicitation.as_ref().is_some_and(asks_in_forms));
    if !can_ask {
        return Gate::Refused(AgentError::tool(NO_ELICITATION));
    }
    let arguments = tool.input_value(&ctx.tool_call().arguments);
    let shown = serde_json::to_string_pretty(&arguments).unwrap_or_default();
    let name = tool.hints.title.as_deref().unwrap_or(&tool.id);
    let message = format!(
        "Allow the tool \"{name}\" ({}) to run with these arguments?\n{shown}\nAccept to run it; decline to refuse.",
        tool.id
    );
    let params = m::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: m::ElicitationSchema::new(Default::default()),
    };
    let answer = tokio::select! {
        answer = context.peer.create_elicitation(params) => answer,
        () = cancelled(context, gone) => {
            return Gate::Refused(AgentError::tool(format!(
                "Tool {} was cancelled by the client", tool.id
            )));
        }
    };
    match answer {
        Ok(result) if result.action == m::ElicitationAction::Accept => Gate::Run,
        Ok(_) => Gate::Rejected(AgentError::tool("Rejected by a person")),
        Err(e) => Gate::Refused(AgentError::tool(format!(
            "{NO_ELICITATION}: asking failed: {e}"
        ))),
    }
}

/// The client can show a form (the approval is one): it said `form`, or it said nothing of
/// either mode (`"elicitation": {}`, the capability before URL mode existed). A client of URL
/// mode only must not be sent a form.
fn asks_in_forms(elicitation: &m::ElicitationCapability) -> bool {
    elicitation.form.is_some() || elicitation.url.is_none()
}

/// The call was cancelled by the client, or the client is gone.
async fn cancelled(context: &RequestContext<RoleServer>, gone: &CancellationToken) {
    tokio::select! {
        () = context.ct.cancelled() => {}
        () = gone.cancelled() => {}
    }
}

/// An interactive hook's answer, checked like a tool's output; a call it leaves to a person is
/// refused, since no person can supply an output over MCP.
async fn answer_by_hook(
    tool: &Tool,
    hook: &crate::tool::definition::OnCalledFn,
    ctx: &ToolContext,
) -> Result<m::CallToolResult, AgentError> {
    let input = tool.input_value(&ctx.tool_call().arguments);
    let answer = Later::run(|| hook(&input, ctx), None).get(None).await;
    let Some(value) = answer else {
        return Err(AgentError::tool(
            "This call needs a person to supply its output, which an MCP client cannot do",
        ));
    };
    let record = ctx.take_record();
    let checked = match record.event_error {
        Some(error) => Err(error),
        None => tool.check_output(value),
    };
    checked.map(|value| plain(value.to_string(), None))
}

/// A result of text content: an output that is a JSON string is that string (`staging deployed`,
/// not `"staging deployed"`), as a client shows text to its model, and any other output its JSON
/// text; then capped at `limit` characters.
fn plain(text: String, limit: Option<usize>) -> m::CallToolResult {
    let text = if text.starts_with('"') {
        serde_json::from_str::<String>(&text).unwrap_or(text)
    } else {
        text
    };
    m::CallToolResult::success(vec![m::ContentBlock::text(cap(text, limit))])
}

/// A result with `isError`, whose text is what a model reads for the error.
fn failed(error: &AgentError) -> m::CallToolResult {
    m::CallToolResult::error(vec![m::ContentBlock::text(error.content())])
}

/// A typed tool's result: the output as `structuredContent`, its text capped.
fn structured(text: String, limit: Option<usize>) -> m::CallToolResult {
    let value = serde_json::from_str::<Value>(&text).ok();
    let mut result = m::CallToolResult::success(vec![m::ContentBlock::text(cap(text, limit))]);
    // An output schema is an object schema: only an object is structured content.
    result.structured_content = value.filter(Value::is_object);
    result
}

/// The progress of one call: published values, sent as `notifications/progress`.
struct Progress {
    token: m::ProgressToken,
    receiver: mpsc::UnboundedReceiver<Value>,
    sent: u32,
}

impl Progress {
    async fn send(&mut self, value: Value, peer: &rmcp::Peer<RoleServer>) {
        self.sent += 1;
        let message = match value {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let mut param = m::ProgressNotificationParam::new(self.token.clone(), f64::from(self.sent));
        param.message = Some(message);
        // A client that went away misses its progress; the call's result tells the rest.
        let _ = peer.notify_progress(param).await;
    }

    /// [`send`](Self::send), given up when the call is cancelled or the client is gone; whether
    /// it was not.
    async fn send_unless_cancelled(
        &mut self,
        value: Value,
        context: &RequestContext<RoleServer>,
        gone: &CancellationToken,
    ) -> bool {
        tokio::select! {
            biased;
            () = cancelled(context, gone) => false,
            () = self.send(value, &context.peer) => true,
        }
    }
}

/// A sink for the call's context and the receiving end, when the client asked for progress.
fn progress_channel(
    context: &RequestContext<RoleServer>,
) -> (Option<Arc<ProgressSink>>, Option<Progress>) {
    let Some(token) = context.meta.get_progress_token() else {
        return (None, None);
    };
    let (sender, receiver) = mpsc::unbounded_channel();
    let sink: Arc<ProgressSink> = Arc::new(move |_call: &ToolCall, value: &Value| {
        let _ = sender.send(value.clone());
    });
    let progress = Progress {
        token,
        receiver,
        sent: 0,
    };
    (Some(sink), Some(progress))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_structured_result_keeps_the_whole_output_and_caps_its_text() {
        let text = json!({"letters": "abcdefghijklmnopqrstuvwxyz"}).to_string();
        let result = structured(text, Some(10));
        assert_eq!(
            result.structured_content,
            Some(json!({"letters": "abcdefghijklmnopqrstuvwxyz"}))
        );
        let shown = serde_json::to_value(&result.content).unwrap();
        assert!(
            shown[0]["text"]
                .as_str()
                .unwrap()
                .contains("characters cut")
        );
    }
}
