//! Tools over the Model Context Protocol (feature `mcp`): serve a tool set to any MCP client, and
//! use any MCP server's tools as tools of an agent.
//!
//! Stage 8, the last: serving an agent's tools needs the agent (`run`), and a call from an MCP
//! client goes through `tool::invoke`, the same path as the agent loop.
//!
//! # Serving
//!
//! Serving a tool set as an MCP server: the tools of an agent, or a list of tools with their
//! resources, to any MCP client (desktop assistants, IDEs, other agents).
//!
//! ```
//! use phaseo_agent::mcp::McpServer;
//! use phaseo_agent::tool;
//!
//! /// Add two numbers.
//! #[tool(title = "Add", read_only, idempotent)]
//! fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = McpServer::new(add).name("calculator", "1.0.0");
//! // In a real program: `server.serve_stdio().await?.wait().await?` (a desktop client launches
//! // it), or `server.serve_http("127.0.0.1:8080").await?`. Here, over an in-memory pipe:
//! let (ours, theirs) = tokio::io::duplex(64 * 1024);
//! let serving = tokio::spawn(async move { server.serve(ours).await?.wait().await });
//! # drop(theirs);
//! # let _ = serving.await;
//! # Ok(())
//! # }
//! ```
//!
//! What a client sees, and what a call does:
//!
//! - **`tools/list`**: every tool that runs in this process, with its canonical parameter schema
//!   as `inputSchema`, its title and behaviour hints ([`Tool::hints`](crate::Tool::hints), as
//!   `title` and `annotations`), and the schema of a typed output as `outputSchema`
//!   ([`Tool::output_type_schema`](crate::Tool::output_type_schema)). External tools
//!   ([`Tool::external`](crate::Tool::external)) are not listed: their results come from outside
//!   this process, so there is nothing here to run.
//! - **`tools/call`** goes through the same path as a call in an agent's run
//!   ([`Tool::invoke`](crate::Tool::invoke)): the arguments are checked against the schema before
//!   any of the tool's code runs, and the tool's timeout (or the agent's default), its output
//!   checks and its output cap (or the agent's) apply. Every failure, bad arguments included, is
//!   a result with `isError: true` whose text is exactly what a model reads in a run
//!   (`{"error":"Invalid tool input: $.a: \"x\" is not of type \"integer\""}`); the error policy
//!   `fail-run` has no run to fail here, so it reads the same. A call to a tool that is not listed
//!   is a protocol error (`-32602`), as MCP asks.
//! - **Output as text**: an output that is a JSON string is sent as that string (`deployed`, not
//!   `"deployed"`), since a client shows text content to its model as it is; any other output is
//!   its JSON text. The cap counts the characters of that text.
//! - **Typed output**: a tool whose output schema is recorded answers with `structuredContent`
//!   (the output, whole) beside its text (capped like any result, since a model reads it).
//! - **Progress**: when the client's request carries a progress token, each value the tool
//!   publishes ([`ToolContext::emit_progress`](crate::ToolContext::emit_progress), or a streaming
//!   tool's [`ToolEvent::Progress`](crate::ToolEvent::Progress)) is sent at once as
//!   `notifications/progress`: `progress` counts them (1, 2, ...), and `message` is the value (a
//!   string as is, anything else as JSON text). Without a token, nothing is sent.
//! - **Cancellation**: `notifications/cancelled` for a running call drops the call's future and
//!   fires its [`ToolContext::cancellation_token`](crate::ToolContext::cancellation_token), as a
//!   timeout does. A client that goes away is another matter, as MCP says:
//!   - over stdio (or any byte stream), the end of the input ends the session: nobody is left
//!     to read an answer, so the session's running calls are cancelled at once (their tokens
//!     fire), and the session ends;
//!   - over Streamable HTTP, a disconnect is not a cancellation (the client may come back for
//!     the answer): the call runs to its end (or its timeout), and its session is kept for it. A
//!     session nobody uses (no message, and no call running but for calls that wait for the
//!     client) ends after
//!     [`McpServerLimits::session_idle_timeout`](crate::limits::McpServerLimits::session_idle_timeout), and its calls with it.
//! - **Calls at once**: a session runs at most
//!   [`McpServerLimits::max_calls_per_session`](crate::limits::McpServerLimits::max_calls_per_session) calls at once (64 by default), over any
//!   transport; past it a `tools/call` is answered at once with `isError` and a text naming the
//!   setting, and its tool does not run. A call holds its place until it ends, is cancelled or
//!   times out.
//! - **Before `initialize`** (stdio): a notification is ignored, `ping` is answered, and any
//!   other request gets a JSON-RPC error (`-32600`); the session waits for `initialize`.
//! - **Approval**: a call that needs a person's approval (the tool's
//!   [`require_approval`](crate::Tool::require_approval) or approval function and, for an agent's
//!   tools, the agent's approval rule or policy and its `human_review`) is put to the person
//!   through the client when the client can ask in a form (MCP elicitation, form mode: the
//!   client's `elicitation` capability says `form`, or is `{}`): the message names the tool and
//!   shows the call's arguments, and accepting runs the call; declining or cancelling answers
//!   `isError` with `{"error":"Rejected by a person"}`. A client that cannot ask (no
//!   elicitation, or URL mode only) gets `isError`
//!   saying that the tool needs a person's approval and the client cannot ask for one; the tool
//!   does not run. An interactive hook ([`Tool::on_tool_called`](crate::Tool::on_tool_called))
//!   answers as in a run; a call it leaves to a person is answered with `isError`. The wait for
//!   the person's answer has no limit of its own: it ends when the call is cancelled, and over
//!   HTTP when the session has been unused for its idle timeout.
//!
//! - **Tracing**: each call is an `execute_tool {tool}` span (see
//!   [`telemetry`](crate::telemetry)) with the call's outcome, and counts in the same call
//!   metrics as a run's calls. When the request's `_meta` carries a W3C `traceparent` (and
//!   `tracestate`), as MCP's trace-context convention puts them, the span is a child of the
//!   caller's span, in its trace; a malformed one is ignored and the span starts a trace of its
//!   own. No arguments or results are recorded on this side: what the caller agreed to capture
//!   is not known here. Our [`McpClient`] sends its call's trace context so, when spans go to
//!   OpenTelemetry (feature `otel`).
//!
//! The server speaks the MCP versions up to 2025-11-25 (asking a person needs a request from
//! the server to the client, which the 2026-07-28 revision replaced).
//!
//! # Serving over HTTP
//!
//! Serving a tool set over MCP's Streamable HTTP transport: a tower service
//! ([`McpHttpService`], rmcp's service behind checks of ours), and a small HTTP/1 server of it on
//! a TCP listener.
//!
//! What a client may cost is bounded by [`McpServerLimits`](crate::limits::McpServerLimits) ([`McpServer::limits`]).
//! [`serve_http`](McpServer::serve_http) serves the very service
//! [`http_service`](McpServer::http_service) returns, so a request is checked the same way in
//! both; what a service cannot see (connections, and a request before its headers are in) is
//! bounded by `serve_http`, or by your server when you mount the service:
//!
//! | what | [`serve_http`](McpServer::serve_http) | [`http_service`](McpServer::http_service) in your server |
//! |---|---|---|
//! | sessions kept ([`max_sessions`](crate::limits::McpServerLimits::max_sessions)) | 503 with `Retry-After` past it | the same |
//! | a session unused ([`session_idle_timeout`](crate::limits::McpServerLimits::session_idle_timeout)) | ended; its id answers 404 | the same |
//! | calls at once in a session ([`max_calls_per_session`](crate::limits::McpServerLimits::max_calls_per_session)) | past it, a call is answered `isError` and its tool does not run | the same |
//! | a body's size ([`max_body_bytes`](crate::limits::McpServerLimits::max_body_bytes)) | 413, before any of it reaches a tool | the same |
//! | a body's time ([`body_read_timeout`](crate::limits::McpServerLimits::body_read_timeout)) | 408, the connection closed | the same (counted from when the service gets the request) |
//! | the headers' time ([`header_read_timeout`](crate::limits::McpServerLimits::header_read_timeout)) | the connection closed | your server's to bound |
//! | connections ([`max_connections`](crate::limits::McpServerLimits::max_connections)) | past it, new ones wait in the listen backlog | your server's to bound |
//!
//! Each refusal's text names the setting that raises it. Both check `Host` and `Origin` against
//! DNS rebinding and cross-site calls: only loopback `Host` names are served (rmcp's rule:
//! `localhost`, `127.0.0.1`, `::1`), and a request whose `Origin` is neither a page of this
//! machine (`http` or `https`, any port, `localhost`, any address of 127.0.0.0/8, `[::1]`) nor
//! one of [`McpServer::allowed_origins`] is refused with 403 before it reaches a tool.
//!
//! # Using a server's tools
//!
//! Using an MCP server's tools as tools of an agent: [`McpClient`].
//!
//! A server's tools are ordinary [`Tool`](crate::Tool)s: everything a tool of this process has applies to them
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
//!   give it the new set. A flood of them costs at most one listing running and one waiting.
//! - **Limits**: what the server sends is bounded by [`McpClientLimits`](crate::limits::McpClientLimits), set before connecting
//!   with [`McpClient::builder`]: the time to answer `initialize` and each `tools/list` page, the
//!   pages and tools of a listing, the bytes of one message, each tool's input schema (its bytes,
//!   and its values and depth once its `$ref`s are inlined), and the progress kept per call. A
//!   listing or connection over a limit fails with [`McpClientError::Limit`]; a tool whose schema
//!   is over one is left out and listed by [`McpClient::refused`]; a call whose result is over the
//!   message limit fails with [`AgentError::LimitExceeded`] at once.
//!
//! [`AgentError::LimitExceeded`]: crate::AgentError::LimitExceeded
//! [`schema::normalize`]: crate::schema::normalize
//! [`OnError::FailRun`]: crate::OnError::FailRun
//! [`ToolContext::emit_progress`]: crate::ToolContext::emit_progress

mod server;
mod http;
mod client;

pub use client::{McpClient, McpClientBuilder, McpClientError, RefusedTool};
pub use http::{
    BoundedSessions, HttpServing, McpHttpBody, McpHttpService, SessionTransport, SessionsError,
};
pub use server::{McpHandler, McpServer, NO_ELICITATION, ServeError, Serving};
