//! The example tools, a run counter, and readers of what a model was sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use phaseo_agent::{Message, ModelRequest, Tool};
use serde_json::{Value, json};

/// Counts how many times a tool ran.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

pub fn object_schema(props: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": props, "required": required })
}

/// `get_status`, the service-status tool of the examples, counting its runs.
pub fn status_tool(counter: &Counter) -> Tool {
    let counter = counter.clone();
    Tool::new(
        "get_status",
        "Get the current service status",
        object_schema(json!({"service": {"type": "string"}}), &["service"]),
        move |input, _ctx| {
            counter.bump();
            Ok(json!({"service": input["service"], "status": "healthy"}))
        },
    )
}

/// `deploy`, the gated deploy tool of the examples, counting its runs and recording the environments it deployed.
pub fn deploy_tool(counter: &Counter) -> Tool {
    let counter = counter.clone();
    Tool::new(
        "deploy",
        "Deploy an application environment",
        object_schema(json!({"environment": {"type": "string"}}), &["environment"]),
        move |input, _ctx| {
            counter.bump();
            Ok(json!({"environment": input["environment"], "deployed": true}))
        },
    )
    .require_approval()
}

pub fn lookup_tool() -> Tool {
    Tool::external(
        "ticket_lookup",
        "Load one support ticket",
        object_schema(json!({"ticket_id": {"type": "string"}}), &["ticket_id"]),
    )
}

/// The tool results (call id, content) in the last request a model received.
pub fn tool_results(request: &ModelRequest) -> Vec<(String, String)> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                call_id, content, ..
            } => Some((call_id.clone(), content.clone())),
            _ => None,
        })
        .collect()
}

/// The call ids of the results in a request, in order.
pub fn result_ids(request: &ModelRequest) -> Vec<String> {
    tool_results(request)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// The content of one call's result in a request.
pub fn result_of(request: &ModelRequest, call_id: &str) -> Value {
    let content = tool_results(request)
        .into_iter()
        .find(|(id, _)| id == call_id)
        .map(|(_, c)| c)
        .unwrap_or_else(|| panic!("no result for {call_id}"));
    serde_json::from_str(&content).unwrap_or(Value::String(content))
}
