//! Bounds on what comes from outside: a model server, an MCP peer, an HTTP client.
//!
//! Everything this crate reads from another process is bounded in size, depth, count and time,
//! so a hostile or broken peer costs a clear error instead of a crashed or exhausted process.
//! Each bound is a [`Limit`]; when one is hit, the error carries a [`LimitExceeded`] that names
//! the limit, its value, and the setting that raises it. The settings live on three values, one
//! per surface, each with the defaults a careful operator would choose:
//!
//! - [`ModelLimits`]: the model providers' responses (feature `openai` or `anthropic`), set with
//!   `OpenAi::limits` and `Anthropic::limits`;
//! - [`McpClientLimits`]: what an MCP server may send to this crate's client (feature `mcp`);
//! - [`McpServerLimits`]: what an MCP client may cost this crate's server (feature `mcp`).
//!
//! ```
//! use std::time::Duration;
//! use phaseo_agent::limits::{Limit, LimitExceeded, ModelLimits};
//!
//! let limits = ModelLimits::default()
//!     .max_response_bytes(8 * 1024 * 1024)
//!     .stream_idle_timeout(Duration::from_secs(30));
//! assert_eq!(limits.response_bytes(), 8 * 1024 * 1024);
//!
//! let hit = LimitExceeded::new(Limit::ResponseBytes, 8 * 1024 * 1024);
//! assert_eq!(hit.setting(), "ModelLimits::max_response_bytes");
//! assert_eq!(
//!     hit.to_string(),
//!     "the response is larger than the limit of 8388608 bytes (raise it with `ModelLimits::max_response_bytes`)"
//! );
//! ```

use std::fmt;
use std::time::Duration;

/// One bound on what comes from outside. [`setting`](Limit::setting) names the method that sets
/// it; [`unit`](Limit::unit) says what its value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// A model server's whole response body, or the sum of a streamed response's bytes.
    ResponseBytes,
    /// One server-sent event of a streamed response.
    EventBytes,
    /// Silence between two pieces of a streamed response.
    StreamIdle,
    /// A model request from start to end, a streamed body included.
    RequestTime,
    /// Opening the connection to a model server.
    ConnectTime,
    /// An MCP server's time to answer `initialize` after the connection is made.
    McpConnectTime,
    /// An MCP server's time to answer a `tools/list` page.
    McpListTime,
    /// An MCP server's time to answer a `tools/call`.
    McpCallTime,
    /// The pages of one `tools/list`.
    McpListPages,
    /// The tools one MCP server may offer.
    McpTools,
    /// One message from an MCP server (a tool list page, a tool's result).
    McpMessageBytes,
    /// The memory one message from an MCP server would take once parsed, estimated from its
    /// text before it is: twice [`McpClientLimits::max_message_bytes`] and 1 MiB, at least
    /// 64 MiB. Its value is that memory, in bytes; the setting that raises it is
    /// `max_message_bytes`. Text as servers really send it (strings, a few keys) costs about
    /// twice its length; `[[],[],..]` or many tiny objects cost 30 to 100 times.
    McpMessageParseCost,
    /// One tool's input schema from an MCP server, as JSON text.
    SchemaBytes,
    /// One tool's input schema after its `$ref`s are inlined, in JSON values.
    SchemaNodes,
    /// One tool's input schema after its `$ref`s are inlined, in nesting levels.
    SchemaDepth,
    /// Progress notifications kept for one call (the later ones are counted, not kept).
    ProgressPerCall,
    /// Bytes of progress kept for one call (the later notifications are counted, not kept).
    ProgressBytes,
    /// MCP sessions a server keeps at once over Streamable HTTP.
    McpSessions,
    /// How long an MCP server keeps a session nobody uses.
    McpSessionIdle,
    /// Connections an MCP server over HTTP holds open at once.
    HttpConnections,
    /// A client's time to send a request's headers.
    HttpHeaderReadTime,
    /// A client's time to send a request's body.
    HttpBodyReadTime,
    /// One request body sent to an MCP server over HTTP.
    HttpBodyBytes,
    /// `tools/call`s one MCP session runs at once, over any transport.
    McpCallsPerSession,
}

impl Limit {
    /// The setting that raises (or lowers) this limit: a method of [`ModelLimits`],
    /// [`McpClientLimits`] or [`McpServerLimits`].
    pub fn setting(self) -> &'static str {
        match self {
            Limit::ResponseBytes => "ModelLimits::max_response_bytes",
            Limit::EventBytes => "ModelLimits::max_event_bytes",
            Limit::StreamIdle => "ModelLimits::stream_idle_timeout",
            Limit::RequestTime => "ModelLimits::request_timeout",
            Limit::ConnectTime => "ModelLimits::connect_timeout",
            Limit::McpConnectTime => "McpClientLimits::connect_timeout",
            Limit::McpListTime => "McpClientLimits::list_timeout",
            Limit::McpCallTime => "McpClientLimits::call_timeout",
            Limit::McpListPages => "McpClientLimits::max_list_pages",
            Limit::McpTools => "McpClientLimits::max_tools",
            Limit::McpMessageBytes | Limit::McpMessageParseCost => {
                "McpClientLimits::max_message_bytes"
            }
            Limit::SchemaBytes => "McpClientLimits::max_schema_bytes",
            Limit::SchemaNodes => "McpClientLimits::max_schema_nodes",
            Limit::SchemaDepth => "McpClientLimits::max_schema_depth",
            Limit::ProgressPerCall => "McpClientLimits::max_progress_per_call",
            Limit::ProgressBytes => "McpClientLimits::max_progress_bytes",
            Limit::McpSessions => "McpServerLimits::max_sessions",
            Limit::McpSessionIdle => "McpServerLimits::session_idle_timeout",
            Limit::HttpConnections => "McpServerLimits::max_connections",
            Limit::HttpHeaderReadTime => "McpServerLimits::header_read_timeout",
            Limit::HttpBodyReadTime => "McpServerLimits::body_read_timeout",
            Limit::HttpBodyBytes => "McpServerLimits::max_body_bytes",
            Limit::McpCallsPerSession => "McpServerLimits::max_calls_per_session",
        }
    }

    /// What the limit's value counts: `bytes`, `milliseconds`, `pages`, `tools`, `values`,
    /// `levels`, `notifications`, `sessions`, `connections` or `calls`.
    pub fn unit(self) -> &'static str {
        match self {
            Limit::ResponseBytes
            | Limit::EventBytes
            | Limit::McpMessageBytes
            | Limit::McpMessageParseCost
            | Limit::SchemaBytes
            | Limit::ProgressBytes
            | Limit::HttpBodyBytes => "bytes",
            Limit::StreamIdle
            | Limit::RequestTime
            | Limit::ConnectTime
            | Limit::McpConnectTime
            | Limit::McpListTime
            | Limit::McpCallTime
            | Limit::McpSessionIdle
            | Limit::HttpHeaderReadTime
            | Limit::HttpBodyReadTime => "milliseconds",
            Limit::McpListPages => "pages",
            Limit::McpTools => "tools",
            Limit::SchemaNodes => "values",
            Limit::SchemaDepth => "levels",
            Limit::ProgressPerCall => "notifications",
            Limit::McpSessions => "sessions",
            Limit::HttpConnections => "connections",
            Limit::McpCallsPerSession => "calls",
        }
    }

    /// What went over the limit, for messages: "the response", "one event", ...
    fn subject(self) -> &'static str {
        match self {
            Limit::ResponseBytes => "the response is larger than",
            Limit::EventBytes => "one event of the stream is larger than",
            Limit::StreamIdle => "the stream was silent for longer than",
            Limit::RequestTime => "the request took longer than",
            Limit::ConnectTime => "the connection to the model server was not made within",
            Limit::McpConnectTime => "the MCP server did not answer `initialize` within",
            Limit::McpListTime => "the MCP server did not answer `tools/list` within",
            Limit::McpCallTime => "the MCP server did not answer `tools/call` within",
            Limit::McpListPages => "the MCP server's `tools/list` has more pages than",
            Limit::McpTools => "the MCP server offers more tools than",
            Limit::McpMessageBytes => "a message from the MCP server is larger than",
            Limit::McpMessageParseCost => {
                "a message from the MCP server costs more memory to parse than"
            }
            Limit::SchemaBytes => "the tool's input schema is larger than",
            Limit::SchemaNodes => {
                "the tool's input schema, with its references inlined, is larger than"
            }
            Limit::SchemaDepth => {
                "the tool's input schema, with its references inlined, is deeper than"
            }
            Limit::ProgressPerCall => "the call sent more progress notifications than",
            Limit::ProgressBytes => "the call's progress notifications are larger than",
            Limit::McpSessions => "the server already keeps",
            Limit::McpSessionIdle => "the session was unused for longer than",
            Limit::HttpConnections => "the server already holds",
            Limit::HttpHeaderReadTime => "the request's headers took longer than",
            Limit::HttpBodyReadTime => "the request's body took longer than",
            Limit::HttpBodyBytes => "the request's body is larger than",
            Limit::McpCallsPerSession => "the session already runs",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.setting())
    }
}

/// A [`Limit`] was hit: which one, and its value (in the limit's [`unit`](Limit::unit)).
///
/// Carried by [`ModelError::limit`](crate::ModelError::limit) (a provider's response),
/// `McpClientError::Limit` and `RefusedTool` (an MCP server's) and
/// [`AgentError::LimitExceeded`](crate::AgentError::LimitExceeded) (a tool call's).
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::limits::{Limit, LimitExceeded};
///
/// let hit = LimitExceeded::time(Limit::StreamIdle, Duration::from_secs(120));
/// assert_eq!(hit.limit, Limit::StreamIdle);
/// assert_eq!(hit.value, 120_000);
/// assert!(hit.to_string().contains("`ModelLimits::stream_idle_timeout`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{} the limit of {value} {} (raise it with `{}`)", limit.subject(), limit.unit(), limit.setting())]
#[non_exhaustive]
pub struct LimitExceeded {
    /// Which limit.
    pub limit: Limit,
    /// Its value when it was hit, in [`Limit::unit`].
    pub value: u64,
}

impl LimitExceeded {
    /// A limit of `value` (in the limit's unit) was hit.
    pub fn new(limit: Limit, value: u64) -> Self {
        LimitExceeded { limit, value }
    }

    /// A limit of `value` bytes or items was hit (as [`new`](Self::new), from a `usize`).
    pub(crate) fn count(limit: Limit, value: usize) -> Self {
        LimitExceeded::new(limit, u64::try_from(value).unwrap_or(u64::MAX))
    }

    /// A time limit of `value` was hit (the value kept in milliseconds).
    pub fn time(limit: Limit, value: Duration) -> Self {
        LimitExceeded::new(limit, u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    /// The setting that raises the limit (see [`Limit::setting`]).
    pub fn setting(&self) -> &'static str {
        self.limit.setting()
    }
}

const MIB: usize = 1024 * 1024;

/// What a model server may send: the bounds of the providers' responses.
///
/// | setting | default | why |
/// |---|---|---|
/// | [`max_response_bytes`](Self::max_response_bytes) | 64 MiB | a 128k-token answer streams as about 30 MiB of events |
/// | [`max_event_bytes`](Self::max_event_bytes) | 8 MiB | a tool call's arguments may come in one event |
/// | [`stream_idle_timeout`](Self::stream_idle_timeout) | 60 s | a stream silent for a minute is stuck |
/// | [`request_timeout`](Self::request_timeout) | 3 minutes | the longest ordinary turn takes one to three |
/// | [`connect_timeout`](Self::connect_timeout) | 10 s | a server that is up accepts a connection at once |
///
/// An error body (a 4xx or 5xx) is read up to 64 KiB: its message is what is kept.
///
/// The two waits are chosen for a person waiting on an agent, at a terminal or behind a service:
///
/// - **Request, 3 minutes.** An agent's turn is a few tool calls or a short answer: seconds on a
///   hosted model. The longest ordinary turns take one to three minutes: a reasoning model that
///   thinks at length, Anthropic's default 4,096 output tokens, a local model on a CPU writing
///   20 to 30 tokens a second. Past that, a stuck server or a runaway answer (a small model
///   writing until its context is full) is the likelier cause, and a person should hear of it
///   in minutes, not in ten. A timeout is retried under the agent's `RetryPolicy`, so a run
///   waits a few times this before it fails. Raise it for long documents.
/// - **Silence, 60 s.** A hosted API answers a streamed request within seconds and then sends
///   an event every few seconds (or a keep-alive comment); a local model on a CPU reads a prompt
///   of a few thousand tokens in well under a minute before its first token. It bounds the wait
///   for a streamed response's headers and every wait between two pieces of a body. A whole
///   answer's headers come only once the answer is written, so a whole request waits for them
///   within the request time alone.
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::limits::ModelLimits;
///
/// let limits = ModelLimits::default().request_timeout(Duration::from_secs(60));
/// assert_eq!(limits.request_time(), Duration::from_secs(60));
/// assert_eq!(limits.event_bytes(), 8 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelLimits {
    response_bytes: usize,
    event_bytes: usize,
    stream_idle: Duration,
    request_time: Duration,
    connect_time: Duration,
}

impl Default for ModelLimits {
    fn default() -> Self {
        ModelLimits {
            response_bytes: 64 * MIB,
            event_bytes: 8 * MIB,
            stream_idle: Duration::from_secs(60),
            request_time: Duration::from_secs(180),
            connect_time: Duration::from_secs(10),
        }
    }
}

impl ModelLimits {
    /// The most bytes of one response: a whole body, or all of a stream's events together.
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.response_bytes = bytes;
        self
    }

    /// The most bytes of one server-sent event of a stream.
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.event_bytes = bytes;
        self
    }

    /// The longest silence between two pieces of a response, and before a streamed response's
    /// headers (a whole answer's headers come once it is written: within the request time).
    pub fn stream_idle_timeout(mut self, wait: Duration) -> Self {
        self.stream_idle = wait;
        self
    }

    /// The longest a request may take from start to end, a streamed body included.
    pub fn request_timeout(mut self, wait: Duration) -> Self {
        self.request_time = wait;
        self
    }

    /// The longest opening the connection may take (TCP and TLS).
    pub fn connect_timeout(mut self, wait: Duration) -> Self {
        self.connect_time = wait;
        self
    }

    /// See [`max_response_bytes`](Self::max_response_bytes).
    pub fn response_bytes(&self) -> usize {
        self.response_bytes
    }

    /// See [`max_event_bytes`](Self::max_event_bytes).
    pub fn event_bytes(&self) -> usize {
        self.event_bytes
    }

    /// See [`stream_idle_timeout`](Self::stream_idle_timeout).
    pub fn stream_idle(&self) -> Duration {
        self.stream_idle
    }

    /// See [`request_timeout`](Self::request_timeout).
    pub fn request_time(&self) -> Duration {
        self.request_time
    }

    /// See [`connect_timeout`](Self::connect_timeout).
    pub fn connect_time(&self) -> Duration {
        self.connect_time
    }
}

/// What an MCP server may send to this crate's client.
///
/// | setting | default | why |
/// |---|---|---|
/// | [`connect_timeout`](Self::connect_timeout) | 30 s | a server that starts slowly still answers `initialize` in seconds |
/// | [`list_timeout`](Self::list_timeout) | 30 s | per `tools/list` page |
/// | [`call_timeout`](Self::call_timeout) | 10 minutes | a server that never answers a call; a tool's own shorter timeout ends the call first |
/// | [`max_list_pages`](Self::max_list_pages) | 100 | real servers list their tools in one page or a few |
/// | [`max_tools`](Self::max_tools) | 1,000 | more tools than any model can choose among |
/// | [`max_message_bytes`](Self::max_message_bytes) | 16 MiB | one list page or one tool result |
/// | [`max_schema_bytes`](Self::max_schema_bytes) | 1 MiB | one tool's input schema as sent |
/// | [`max_schema_nodes`](Self::max_schema_nodes) | 100,000 | values after `$ref`s are inlined |
/// | [`max_schema_depth`](Self::max_schema_depth) | 64 | nesting after `$ref`s are inlined |
/// | [`max_progress_per_call`](Self::max_progress_per_call) | 100 | progress kept per call; later ones are counted |
/// | [`max_progress_bytes`](Self::max_progress_bytes) | 64 KiB | progress kept per call, in bytes; later ones are counted |
///
/// ```
/// use phaseo_agent::limits::McpClientLimits;
///
/// let limits = McpClientLimits::default().max_tools(50);
/// assert_eq!(limits.tools(), 50);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpClientLimits {
    connect_time: Duration,
    list_time: Duration,
    call_time: Duration,
    list_pages: usize,
    tools: usize,
    message_bytes: usize,
    schema_bytes: usize,
    schema_nodes: usize,
    schema_depth: usize,
    progress_per_call: usize,
    progress_bytes: usize,
}

impl Default for McpClientLimits {
    fn default() -> Self {
        McpClientLimits {
            connect_time: Duration::from_secs(30),
            list_time: Duration::from_secs(30),
            call_time: Duration::from_secs(600),
            list_pages: 100,
            tools: 1_000,
            message_bytes: 16 * MIB,
            schema_bytes: MIB,
            schema_nodes: 100_000,
            schema_depth: 64,
            progress_per_call: 100,
            progress_bytes: 64 * 1024,
        }
    }
}

impl McpClientLimits {
    /// The longest the server may take to answer `initialize` (a child process's start or the
    /// HTTP connection included).
    pub fn connect_timeout(mut self, wait: Duration) -> Self {
        self.connect_time = wait;
        self
    }

    /// The longest the server may take to answer one page of `tools/list`.
    pub fn list_timeout(mut self, wait: Duration) -> Self {
        self.list_time = wait;
        self
    }

    /// The longest the server may take to answer one `tools/call`; the call then fails with
    /// [`AgentError::LimitExceeded`](crate::AgentError::LimitExceeded) and the server is sent
    /// `notifications/cancelled`. A tool's own timeout, when shorter, ends the call first; raise
    /// this one for a tool that may run longer.
    pub fn call_timeout(mut self, wait: Duration) -> Self {
        self.call_time = wait;
        self
    }

    /// The most pages one `tools/list` may have.
    pub fn max_list_pages(mut self, pages: usize) -> Self {
        self.list_pages = pages;
        self
    }

    /// The most tools the server may offer.
    pub fn max_tools(mut self, tools: usize) -> Self {
        self.tools = tools;
        self
    }

    /// The most bytes of one message from the server. It sets, too, the most memory one message
    /// may take once parsed ([`Limit::McpMessageParseCost`]): twice these bytes and 1 MiB, at
    /// least 64 MiB.
    pub fn max_message_bytes(mut self, bytes: usize) -> Self {
        self.message_bytes = bytes;
        self
    }

    /// The most bytes of one tool's input schema, as JSON text.
    pub fn max_schema_bytes(mut self, bytes: usize) -> Self {
        self.schema_bytes = bytes;
        self
    }

    /// The most JSON values of one tool's input schema once its `$ref`s are inlined.
    pub fn max_schema_nodes(mut self, nodes: usize) -> Self {
        self.schema_nodes = nodes;
        self
    }

    /// The deepest nesting of one tool's input schema once its `$ref`s are inlined.
    pub fn max_schema_depth(mut self, levels: usize) -> Self {
        self.schema_depth = levels;
        self
    }

    /// The most progress notifications kept for one call; the later ones are counted.
    pub fn max_progress_per_call(mut self, notifications: usize) -> Self {
        self.progress_per_call = notifications;
        self
    }

    /// The most bytes of progress (the notifications' JSON) kept for one call; the later
    /// notifications are counted.
    pub fn max_progress_bytes(mut self, bytes: usize) -> Self {
        self.progress_bytes = bytes;
        self
    }

    /// See [`connect_timeout`](Self::connect_timeout).
    pub fn connect_time(&self) -> Duration {
        self.connect_time
    }

    /// See [`list_timeout`](Self::list_timeout).
    pub fn list_time(&self) -> Duration {
        self.list_time
    }

    /// See [`call_timeout`](Self::call_timeout).
    pub fn call_time(&self) -> Duration {
        self.call_time
    }

    /// See [`max_list_pages`](Self::max_list_pages).
    pub fn list_pages(&self) -> usize {
        self.list_pages
    }

    /// See [`max_tools`](Self::max_tools).
    pub fn tools(&self) -> usize {
        self.tools
    }

    /// See [`max_message_bytes`](Self::max_message_bytes).
    pub fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// See [`max_schema_bytes`](Self::max_schema_bytes).
    pub fn schema_bytes(&self) -> usize {
        self.schema_bytes
    }

    /// See [`max_schema_nodes`](Self::max_schema_nodes).
    pub fn schema_nodes(&self) -> usize {
        self.schema_nodes
    }

    /// See [`max_schema_depth`](Self::max_schema_depth).
    pub fn schema_depth(&self) -> usize {
        self.schema_depth
    }

    /// See [`max_progress_per_call`](Self::max_progress_per_call).
    pub fn progress_per_call(&self) -> usize {
        self.progress_per_call
    }

    /// See [`max_progress_bytes`](Self::max_progress_bytes).
    pub fn progress_bytes(&self) -> usize {
        self.progress_bytes
    }
}

/// What an MCP client may cost this crate's server: over Streamable HTTP, and per session over
/// any transport.
///
/// | setting | default | why |
/// |---|---|---|
/// | [`max_sessions`](Self::max_sessions) | 1,000 | about 50 KiB each |
/// | [`session_idle_timeout`](Self::session_idle_timeout) | 5 minutes | a client that went away frees its session |
/// | [`max_connections`](Self::max_connections) | 512 | well under the usual 1,024 file descriptors |
/// | [`header_read_timeout`](Self::header_read_timeout) | 10 s | a request's headers arrive at once |
/// | [`body_read_timeout`](Self::body_read_timeout) | 30 s | a JSON-RPC message is small |
/// | [`max_body_bytes`](Self::max_body_bytes) | 4 MiB | a tool call's arguments |
/// | [`max_calls_per_session`](Self::max_calls_per_session) | 64 | any transport; a client runs a few calls at once, an agent's fan-out tens |
///
/// ```
/// use std::time::Duration;
/// use phaseo_agent::limits::McpServerLimits;
///
/// let limits = McpServerLimits::default().max_sessions(100);
/// assert_eq!(limits.sessions(), 100);
/// assert_eq!(limits.header_read_time(), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpServerLimits {
    sessions: usize,
    session_idle: Duration,
    connections: usize,
    header_read_time: Duration,
    body_read_time: Duration,
    body_bytes: usize,
    calls_per_session: usize,
}

impl Default for McpServerLimits {
    fn default() -> Self {
        McpServerLimits {
            sessions: 1_000,
            session_idle: Duration::from_secs(300),
            connections: 512,
            header_read_time: Duration::from_secs(10),
            body_read_time: Duration::from_secs(30),
            body_bytes: 4 * MIB,
            calls_per_session: 64,
        }
    }
}

impl McpServerLimits {
    /// The most sessions kept at once; a new client past it is refused (HTTP 503) until one ends.
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.sessions = sessions;
        self
    }

    /// How long a session nobody uses is kept. A session is in use while one of its calls runs:
    /// its clock starts when the last call ends (or the last message passes). A call waiting for
    /// the client's answer (a person's approval) does not keep its session.
    pub fn session_idle_timeout(mut self, wait: Duration) -> Self {
        self.session_idle = wait;
        self
    }

    /// The most connections held open at once; past it, new ones wait to be accepted.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.connections = connections;
        self
    }

    /// The longest a client may take to send a request's headers.
    pub fn header_read_timeout(mut self, wait: Duration) -> Self {
        self.header_read_time = wait;
        self
    }

    /// The longest a client may take to send a request's body.
    pub fn body_read_timeout(mut self, wait: Duration) -> Self {
        self.body_read_time = wait;
        self
    }

    /// The most bytes of one request body.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.body_bytes = bytes;
        self
    }

    /// The most `tools/call`s one session runs at once, over any transport (stdio too); past
    /// it a call is answered at once with `isError`, and its tool does not run. A call holds its
    /// place until it ends, is cancelled or times out (over HTTP a client that disconnects does
    /// not end its calls).
    pub fn max_calls_per_session(mut self, calls: usize) -> Self {
        self.calls_per_session = calls;
        self
    }

    /// See [`max_sessions`](Self::max_sessions).
    pub fn sessions(&self) -> usize {
        self.sessions
    }

    /// See [`session_idle_timeout`](Self::session_idle_timeout).
    pub fn session_idle(&self) -> Duration {
        self.session_idle
    }

    /// See [`max_connections`](Self::max_connections).
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// See [`header_read_timeout`](Self::header_read_timeout).
    pub fn header_read_time(&self) -> Duration {
        self.header_read_time
    }

    /// See [`body_read_timeout`](Self::body_read_timeout).
    pub fn body_read_time(&self) -> Duration {
        self.body_read_time
    }

    /// See [`max_body_bytes`](Self::max_body_bytes).
    pub fn body_bytes(&self) -> usize {
        self.body_bytes
    }

    /// See [`max_calls_per_session`](Self::max_calls_per_session).
    pub fn calls_per_session(&self) -> usize {
        self.calls_per_session
    }
}

// The memory a parsed `serde_json::Value` takes, estimated from its text: what bounds a parse
// of text from outside (a model's arguments, a provider's response) before it is made.

/// The most [`parsed_size`] can estimate per byte of text (an object, `{`, counts a B-tree node).
pub(crate) const MAX_COST_PER_BYTE: usize = OBJECT_COST + VALUE_COST;
const OBJECT_COST: usize = 640;
const ENTRY_COST: usize = 128;
const VALUE_COST: usize = 96;
const ARRAY_COST: usize = 128;

/// An upper bound on the heap memory of the `serde_json::Value` that `text` parses to (the text
/// need not be valid JSON), from one pass over its bytes: each object a B-tree leaf of 11
/// entries, each entry an eighth of a node, each array a first allocation of four `Value`s, each
/// array element or value three `Value`s (a `Vec` grows by doubling, and holds the old and the
/// new buffer while it moves), and each byte of text twice (a
/// key or string copies at most its escaped length). Memory is counted as the bytes asked of the
/// allocator.
pub(crate) fn parsed_size(text: &str) -> usize {
    parsed_size_of(text.as_bytes())
}

/// [`parsed_size`] of bytes that need not be UTF-8 (a response body as read).
pub(crate) fn parsed_size_of(text: &[u8]) -> usize {
    let mut cost = ParseCost::default();
    cost.feed(text);
    cost.size()
}

/// The most memory a parse of outside text of at most `max` bytes may cost (by [`ParseCost`])
/// before it is refused: twice the bytes and 1 MiB (text as servers really send it, strings and
/// a few keys, costs about twice its length), and at least 64 MiB, so that a result of many small
/// numbers (three `Value`s counted per element) still passes while `[[],[],..]` or many tiny
/// objects (30 to 100 times their text) do not.
#[cfg_attr(
    not(any(feature = "openai", feature = "anthropic", feature = "mcp")),
    allow(
        dead_code,
        reason = "used by the providers and MCP, behind their features"
    )
)]
pub(crate) fn parse_budget_for(max: usize) -> usize {
    max.saturating_mul(2).saturating_add(1 << 20).max(64 << 20)
}

/// The refusal of a message from an MCP server, within `max` bytes, whose parse would cost more
/// than [`parse_budget_for`] `max`.
#[cfg(feature = "mcp")]
pub(crate) fn mcp_parse_cost_exceeded(max: usize) -> LimitExceeded {
    LimitExceeded::count(Limit::McpMessageParseCost, parse_budget_for(max))
}

/// [`parsed_size`] counted as the text arrives, for text read in pieces (a line of a pipe, an
/// event of a stream) that is refused before it is whole.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParseCost {
    objects: usize,
    arrays: usize,
    entries: usize,
    values: usize,
    bytes: usize,
    in_string: bool,
    escaped: bool,
}

impl ParseCost {
    /// Counts the next bytes of the text.
    pub(crate) fn feed(&mut self, text: &[u8]) {
        for &byte in text {
            self.push(byte);
        }
    }

    /// Counts the next byte of the text.
    #[inline]
    pub(crate) fn push(&mut self, byte: u8) {
        self.bytes += 1;
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' => self.objects += 1,
            b'[' => {
                self.arrays += 1;
                self.values += 1;
            }
            b':' => self.entries += 1,
            b',' => self.values += 1,
            _ => {}
        }
    }

    /// The estimate for the text so far (see [`parsed_size`]).
    pub(crate) fn size(&self) -> usize {
        self.objects
            .saturating_mul(OBJECT_COST)
            .saturating_add(self.arrays.saturating_mul(ARRAY_COST))
            .saturating_add(self.entries.saturating_mul(ENTRY_COST))
            .saturating_add(self.values.saturating_add(1).saturating_mul(VALUE_COST))
            .saturating_add(self.bytes.saturating_mul(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_names_a_method_of_its_limits() {
        // Each setting a message names exists (a renamed method would leave it pointing nowhere).
        let source = include_str!("limits.rs");
        let all = [
            Limit::ResponseBytes,
            Limit::EventBytes,
            Limit::StreamIdle,
            Limit::RequestTime,
            Limit::ConnectTime,
            Limit::McpConnectTime,
            Limit::McpListTime,
            Limit::McpCallTime,
            Limit::McpListPages,
            Limit::McpTools,
            Limit::McpMessageBytes,
            Limit::McpMessageParseCost,
            Limit::SchemaBytes,
            Limit::SchemaNodes,
            Limit::SchemaDepth,
            Limit::ProgressPerCall,
            Limit::ProgressBytes,
            Limit::McpSessions,
            Limit::McpSessionIdle,
            Limit::HttpConnections,
            Limit::HttpHeaderReadTime,
            Limit::HttpBodyReadTime,
            Limit::HttpBodyBytes,
            Limit::McpCallsPerSession,
        ];
        for limit in all {
            let (owner, method) = limit.setting().split_once("::").unwrap();
            let block = source
                .split(&format!("\nimpl {owner} {{"))
                .nth(1)
                .and_then(|rest| rest.split("\nimpl ").next())
                .unwrap_or_else(|| panic!("{owner} has an impl block"));
            assert!(
                block.contains(&format!("pub fn {method}(mut self")),
                "{limit:?}: {owner}::{method} is not a setter"
            );
        }
    }
}
