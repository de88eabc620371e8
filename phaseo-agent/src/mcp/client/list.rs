//! `tools/list`, page by page, within the client's limits: pages, tools, a time per page, and no
//! cursor twice (a server whose cursors never end, or go round, would list forever).

use std::collections::HashSet;
use std::hash::BuildHasher;

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, ListToolsRequest, PaginatedRequestParams, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};

use crate::limits::{Limit, LimitExceeded, McpClientLimits};
use crate::mcp::client::observe::Router;

/// Why a listing failed.
pub(crate) enum Failure {
    /// The server went over one of the limits.
    Limit(LimitExceeded),
    /// The request failed, or the server answered something else (what it said).
    Request(String),
}

/// Every page of the server's tools.
pub(crate) async fn all_tools(
    peer: &Peer<RoleClient>,
    router: &Router,
    limits: &McpClientLimits,
) -> Result<Vec<rmcp::model::Tool>, Failure> {
    let mut tools = Vec::new();
    // Cursors are the server's text, up to a message long: only their hashes are kept (keyed at
    // random, so a server cannot aim for a collision).
    let hasher = std::collections::hash_map::RandomState::new();
    let mut cursors = HashSet::new();
    let mut cursor = None;
    for _ in 0..limits.list_pages() {
        let page = page(peer, router, limits, cursor.take()).await?;
        if page.tools.len() > limits.tools().saturating_sub(tools.len()) {
            return Err(Failure::Limit(LimitExceeded::count(
                Limit::McpTools,
                limits.tools(),
            )));
        }
        tools.extend(page.tools);
        let Some(next) = page.next_cursor else {
            return Ok(tools);
        };
        if !cursors.insert(hasher.hash_one(&next)) {
            return Err(Failure::Request(
                "the server's `nextCursor` repeats one it already gave in this listing".into(),
            ));
        }
        cursor = Some(next);
    }
    Err(Failure::Limit(LimitExceeded::count(
        Limit::McpListPages,
        limits.list_pages(),
    )))
}

/// One page, within the list timeout; a page that takes longer is cancelled on the server.
async fn page(
    peer: &Peer<RoleClient>,
    router: &Router,
    limits: &McpClientLimits,
    cursor: Option<String>,
) -> Result<rmcp::model::ListToolsResult, Failure> {
    let params = PaginatedRequestParams::default().with_cursor(cursor);
    let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
    let handle = peer
        .send_request_with_option(
            request,
            PeerRequestOptions::with_timeout(limits.list_time()),
        )
        .await
        .map_err(|e| match router.broken() {
            Some(limit) => Failure::Limit(limit),
            None => Failure::Request(e.to_string()),
        })?;
    let id = handle.id.clone();
    // rmcp ends a page that takes longer with `notifications/cancelled` to the server.
    match handle.await_response().await {
        Ok(ServerResult::ListToolsResult(result)) => Ok(result),
        Ok(_) => Err(Failure::Request(
            "the server answered with something other than a tool list".into(),
        )),
        Err(ServiceError::Timeout { timeout }) => Err(Failure::Limit(LimitExceeded::time(
            Limit::McpListTime,
            timeout,
        ))),
        Err(e) => Err(match router.exceeded(&id) {
            Some(limit) => Failure::Limit(limit),
            None => Failure::Request(e.to_string()),
        }),
    }
}
