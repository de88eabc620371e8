//! A run that pauses in one process and resumes in another, with the run's events printed as they
//! happen in both.
//!
//! ```text
//! cargo run --example two_processes -- start run.json           # runs until a call waits, saves, exits
//! cargo run --example two_processes -- approve run.json         # loads, approves, resumes
//! cargo run --example two_processes -- reject run.json "Not on a Friday"
//! cargo run --example two_processes                             # both, as two child processes
//! ```
//!
//! The first process runs the agent until `deploy` waits for a person, writes the paused state
//! to a file and exits. Nothing stays in memory: the second process builds the same agent (same
//! id, tools and state key), loads the file, records the decision and resumes. The state is signed
//! with the agent's key, so an edited file is refused when loaded into the run.
//!
//! Without arguments (as `cargo test` runs it) it starts itself twice, `start` then `approve`, and
//! checks what each printed. The model is scripted, so it runs offline; with a real provider the
//! code is the same (see the `real_model` example).

use std::path::Path;
use std::process::Command;

use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, Decisions, Event, IntoTool, RunState, ScriptedModel, ToolContext, tool,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Deploy a release to an environment.
#[derive(Deserialize, schemars::JsonSchema)]
struct Deploy {
    /// `staging` or `production`.
    environment: String,
    /// The release tag, like `v2.1.0`.
    release: String,
}

#[derive(Serialize)]
struct Deployed {
    environment: String,
    release: String,
}

/// Deploy a release to an environment.
#[tool(require_approval)]
async fn deploy(input: Deploy, _ctx: &ToolContext) -> Result<Deployed, String> {
    Ok(Deployed {
        environment: input.environment,
        release: input.release,
    })
}

/// The key that signs the stored state. A real application reads it from its secret store; both
/// processes must use the same one.
const STATE_KEY: &[u8] = b"an example key; read yours from a secret store";

/// The same agent in both processes; only the model's script differs here, because a scripted
/// model cannot know which turn comes next (a real model reads the conversation).
fn agent(model: ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("release")
        .instructions("You ship releases.")
        .model(model)
        .tool(deploy.into_tool())
        .state_key(STATE_KEY)
        .build()
}

/// Prints one event of the run, as an application would log it.
fn print_event(event: &Event) {
    let name = event.name();
    match event {
        Event::ToolCalled { call, .. } => println!("  {name}: {} {}", call.name, call.arguments),
        Event::ToolResult { tool, content, .. } => println!("  {name}: {tool} -> {content}"),
        Event::Paused { pending, .. } => {
            for call in pending {
                println!("  {name}: {} waits ({})", call.call.id, call.kind.as_str());
            }
        }
        Event::Completed { output, .. } => println!("  {name}: {output}"),
        Event::Failed { error, .. } => println!("  {name}: {error}"),
        _ => println!("  {name}"),
    }
}

/// Process one: run until a call waits for a person, then save the paused state and exit.
async fn start(file: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new().tool_call(
        "call_1",
        "deploy",
        json!({"environment": "production", "release": "v2.1.0"}),
    );
    let agent = agent(model)?;
    let mut events = agent.run("Ship v2.1.0 to production.").stream();
    while let Some(event) = events.next().await {
        print_event(&event);
        if let Event::Paused { state, .. } = event {
            std::fs::write(file, state.to_json())?;
            println!("saved the paused run to {}", file.display());
        }
    }
    Ok(())
}

/// Process two: load the saved state, decide, and resume to the end.
async fn decide(
    file: &Path,
    approve: bool,
    message: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let state = RunState::from_json(&std::fs::read_to_string(file)?)?;
    let call = &state.pending()[0].call;
    println!(
        "loaded run {}: {} waits for a person",
        state.run_id(),
        call.id
    );
    let decisions = Decisions::for_run(state.run_id());
    let decisions = if approve {
        decisions.approve(&call.id)
    } else {
        decisions.reject(&call.id, message)
    };
    let model = ScriptedModel::new().text(if approve {
        "v2.1.0 is live in production."
    } else {
        "I did not deploy."
    });
    let agent = agent(model)?;
    let mut events = agent.resume(&state, decisions).stream();
    while let Some(event) = events.next().await {
        print_event(&event);
    }
    Ok(())
}

/// What `cargo test` runs: this program, started twice, checked by what each process printed.
fn both_in_child_processes() -> Result<(), Box<dyn std::error::Error>> {
    let program = std::env::current_exe()?;
    let file = std::env::temp_dir().join(format!("two_processes-{}.json", std::process::id()));
    let run = |args: &[&str]| -> Result<String, Box<dyn std::error::Error>> {
        let output = Command::new(&program).args(args).output()?;
        let printed = String::from_utf8(output.stdout)?;
        print!("$ two_processes {}\n{printed}", args.join(" "));
        if !output.status.success() {
            return Err(format!(
                "{args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok(printed)
    };
    let path = file.to_str().ok_or("a temporary path that is not UTF-8")?;
    let first = run(&["start", path])?;
    assert!(
        first.contains("run.paused: call_1 waits (tool_approval)"),
        "{first}"
    );
    assert!(
        !first.contains("tool.result"),
        "the gated call must not run in process one"
    );
    let second = run(&["approve", path])?;
    assert!(second.contains("tool.result: deploy -> "), "{second}");
    assert!(
        second.contains("run.completed: v2.1.0 is live in production."),
        "{second}"
    );
    std::fs::remove_file(&file)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => both_in_child_processes(),
        ["start", file] => start(Path::new(file)).await,
        ["approve", file] => decide(Path::new(file), true, "").await,
        ["reject", file, message] => decide(Path::new(file), false, message).await,
        _ => Err("usage: two_processes [start FILE | approve FILE | reject FILE MESSAGE]".into()),
    }
}
