//! A run's traces and metrics in an OpenTelemetry backend, across a pause for approval.
//!
//! ```text
//! cargo run --example tracing_otlp --features otel
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 cargo run --example tracing_otlp --features otel
//! ```
//!
//! The run checks a service, then asks to deploy, which needs a person's approval: the run
//! pauses and its state is stored as JSON. A second agent value, built from nothing but that text
//! (as another process would be, days later), resumes it. In the backend the resumed run's
//! `invoke_agent ops` span links to the one that paused (`phaseo.link.kind = paused`), with the
//! `chat` and `execute_tool` spans under each, and the GenAI metrics beside them.
//!
//! The model is scripted, so it runs offline; with nothing listening at the endpoint
//! (`OTEL_EXPORTER_OTLP_ENDPOINT`, else `http://localhost:4318`) it says so and still exits 0.

use std::time::Duration;

use phaseo_agent::otel::Telemetry;
use phaseo_agent::{
    Agent, Decisions, ModelResponse, RunState, ScriptedModel, Tool, ToolCall, Usage,
};
use serde_json::json;

fn agent(model: ScriptedModel) -> Result<Agent, phaseo_agent::AgentError> {
    let status = Tool::new(
        "get_status",
        "Get a service's status",
        json!({"type": "object", "properties": {"service": {"type": "string"}}, "required": ["service"]}),
        |input, _context| Ok(json!({"service": input["service"], "status": "ok"})),
    );
    let deploy = Tool::new(
        "deploy",
        "Deploy an environment",
        json!({"type": "object", "properties": {"environment": {"type": "string"}}, "required": ["environment"]}),
        |input, _context| Ok(json!({"environment": input["environment"], "deployed": true})),
    )
    .require_approval();
    Agent::builder("ops")
        .model(model)
        .tool(status)
        .tool(deploy)
        .build()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Spans and metrics go to OTEL_EXPORTER_OTLP_ENDPOINT (else http://localhost:4318) until
    // `telemetry` is shut down or dropped.
    let telemetry = Telemetry::new("phaseo-tracing-otlp-example")
        .export_timeout(Duration::from_secs(3))
        .init()?;

    // The first process: the run checks the service, asks to deploy, and pauses.
    let model = ScriptedModel::new()
        .turn(
            ModelResponse::tool_calls([ToolCall::new(
                "call_1",
                "get_status",
                json!({"service": "api"}),
            )])
            .usage(Usage::new(120, 9)),
        )
        .turn(
            ModelResponse::tool_calls([ToolCall::new(
                "call_2",
                "deploy",
                json!({"environment": "staging"}),
            )])
            .usage(Usage::new(160, 11)),
        );
    let paused = agent(model)?.run("Deploy staging if the api is up").await?;
    assert!(paused.is_paused());
    let stored = paused.state.to_json();
    let trace = paused.state.trace_context().expect("spans are exported");
    println!(
        "paused run {} under {}",
        paused.state.run_id(),
        trace.traceparent()
    );

    // Another process: only the stored text, and an agent built the same way.
    let state = RunState::from_json(&stored)?;
    let model = ScriptedModel::new()
        .turn(ModelResponse::text("Staging is deployed.").usage(Usage::new(200, 5)));
    let decisions = Decisions::for_run(state.run_id()).approve("call_2");
    let done = agent(model)?.resume(&state, decisions).await?;
    assert_eq!(done.output(), Some("Staging is deployed."));
    println!(
        "resumed run {}: {}",
        done.state.run_id(),
        done.output().unwrap_or_default()
    );

    // Export what is left; an error here means nothing was received.
    match telemetry.shutdown() {
        Ok(()) => println!("exported"),
        Err(error) => println!("not exported (is a collector listening?): {error}"),
    }
    Ok(())
}
