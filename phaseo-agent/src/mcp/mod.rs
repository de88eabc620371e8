//! Tools over the Model Context Protocol (feature `mcp`): serve a tool set to any MCP client, and
//! use any MCP server's tools as tools of an agent.
//!
//! Stage 8, the last: serving an agent's tools needs the agent (`run`), and a call from an MCP
//! client goes through `tool::invoke`, the same path as the agent loop.

mod server;
mod http;
mod client;

pub use client::{McpClient, McpClientBuilder, McpClientError, RefusedTool};
pub use http::{BoundedSessions, HttpServing, McpHttpBody, McpHttpService, SessionsError};
pub use server::{McpHandler, McpServer, NO_ELICITATION, ServeError, Serving};
