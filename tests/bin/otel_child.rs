//! A short-lived process that exports its spans over OTLP/HTTP, for the tests of what reaches a
//! collector when a process ends (`tests/it/otel_processes.rs`): it installs
//! `phaseo_agent::otel::Telemetry`, holds its guard for all of `main`, runs one durable run and
//! exits by returning from `main`, as a program would.
//!
//! ```text
//! otel_child ENDPOINT STORE COMMAND RUN_ID
//!   ENDPOINT  the collector's base URL (http://127.0.0.1:PORT)
//!   STORE     sqlite:PATH or memory
//!   COMMAND   run      run RUN_ID to its end: one tool call, then an answer
//!             pause    start RUN_ID and stop at its pause (a call that needs approval)
//!             resume   resume the paused RUN_ID, its call approved
//!             crash    start RUN_ID; its tool ends the process in the middle of the call
//!             recover  recover RUN_ID, which a `crash` left running
//! ```
//!
//! Exit codes: 0 done, 7 the `crash` tool ended the process, 1 anything else.

use std::process::ExitCode;
use std::sync::Arc;

use phaseo_agent::durable::Runs;
use phaseo_agent::otel::Telemetry;
use phaseo_agent::serde_json::json;
use phaseo_agent::store::{MemoryStore, RunStore, SqliteStore};
use phaseo_agent::{Agent, AgentError, Decisions, ScriptedModel, Tool};

/// The exit code of a process its tool ended.
const CRASHED: i32 = 7;

/// The agent: `lookup` (idempotent; with `crash`, it ends the process instead of answering) and
/// `deploy` (needs approval), asked by `model`.
fn agent(model: ScriptedModel, crash: bool) -> Agent {
    let lookup = Tool::new(
        "lookup",
        "Looks a service up",
        json!({"type": "object"}),
        move |_, _| {
            if crash {
                std::process::exit(CRASHED);
            }
            Ok(json!({"status": "green"}))
        },
    )
    .idempotent(true);
    let deploy = Tool::new(
        "deploy",
        "Deploys a service",
        json!({"type": "object"}),
        |_, _| Ok(json!({"deployed": true})),
    )
    .require_approval();
    Agent::builder("otel-child")
        .model(model)
        .tool(lookup)
        .tool(deploy)
        .build()
        .expect("the agent builds")
}

async fn open(store: &str) -> Result<Arc<dyn RunStore>, AgentError> {
    if let Some(path) = store.strip_prefix("sqlite:") {
        return Ok(Arc::new(SqliteStore::open(path).await?));
    }
    if store == "memory" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    Err(AgentError::InvalidAgent(format!("unknown store {store}")))
}

async fn run(store: &str, command: &str, run_id: &str) -> Result<(), AgentError> {
    // A short lease: a `crash` process's run may be recovered soon after it died.
    let runs = Runs::without_queue(open(store).await?).lease(std::time::Duration::from_millis(200));
    let lookup = || ScriptedModel::new().tool_call("call_1", "lookup", json!({"service": "api"}));
    match command {
        "run" => {
            let durable = runs.attach(agent(lookup().text("All green."), false));
            durable.run("Status?").run_id(run_id).await?;
        }
        "pause" => {
            let model = ScriptedModel::new().tool_call("call_1", "deploy", json!({"env": "prod"}));
            let durable = runs.attach(agent(model, false));
            let paused = durable.run("Deploy").run_id(run_id).await?;
            if !paused.is_paused() {
                return Err(AgentError::InvalidState("the run did not pause".into()));
            }
        }
        "resume" => {
            let durable = runs.attach(agent(ScriptedModel::new().text("Deployed."), false));
            let stored = runs.load(run_id).await?;
            let decisions = Decisions::for_run(run_id).approve("call_1");
            durable
                .resume(run_id)
                .decisions(decisions)
                .at(stored.version)
                .by("ops")
                .await?;
        }
        "crash" => {
            let durable = runs.attach(agent(lookup().text("All green."), true));
            durable.run("Status?").run_id(run_id).await?;
        }
        "recover" => {
            let durable = runs.attach(agent(ScriptedModel::new().text("All green."), false));
            // The dead process's lease runs out first.
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            durable.recover(run_id).await?;
        }
        other => return Err(AgentError::InvalidAgent(format!("unknown command {other}"))),
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [endpoint, store, command, run_id] = args.as_slice() else {
        eprintln!("usage: otel_child ENDPOINT STORE COMMAND RUN_ID");
        return ExitCode::FAILURE;
    };
    // Held for all of `main`: dropped when it returns, it exports what is left.
    let _telemetry = match Telemetry::new("otel-child").endpoint(endpoint).init() {
        Ok(guard) => guard,
        Err(error) => {
            eprintln!("otel_child: telemetry: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run(store, command, run_id).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("otel_child: {error}");
            ExitCode::FAILURE
        }
    }
}
