//! Tools over the Model Context Protocol (feature `mcp`): serve a tool set to any MCP client, and
//! use any MCP server's tools as tools of an agent.
//!
//! Stage 8, the last: serving an agent's tools needs the agent (`run`), and a call from an MCP
//! client goes through `tool::invoke`, the same path as the agent loop.

#[cfg(feature = "mcp")]
pub mod server;
#[cfg(feature = "mcp")]
pub mod http;
#[cfg(feature = "mcp")]
pub mod client;

#[cfg(feature = "mcp")]
pub use client::{McpClient, McpClientBuilder, McpClientError, RefusedTool};
