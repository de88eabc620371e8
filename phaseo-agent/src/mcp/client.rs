//! Using an MCP server's tools as tools of an agent.
