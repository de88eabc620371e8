//! Serving a tool set as an MCP server.
