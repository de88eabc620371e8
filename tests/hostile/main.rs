//! Hostile peers and hostile input, with the process's peak heap measured: a provider against a
//! hostile HTTP server, the MCP client against hostile servers, the MCP server against hostile
//! clients, and the memory an argument text can cost.
//!
//! One counting allocator sees every thread of this binary, so the cases run one at a time (the
//! lock `SERIAL`) and nothing else shares the binary.

use std::sync::Mutex;

use peak_alloc::PeakAlloc;

/// Counts the bytes in use and their peak, for the whole process.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// One case at a time: the allocator's peak is the process's, so cases must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

#[path = "../support/mod.rs"]
mod support;

mod mcp_client;
mod mcp_server;
mod memory_bound;
mod provider;
