//! A durable run on embedded SQLite, across three processes: one runs the agent until a call
//! waits for a person and exits; one lists what waits and records a person's decision; one
//! resumes the run to its end. Nothing is kept in memory between them: the run lives in the
//! database file, with every step journaled as it happened.
//!
//! ```text
//! cargo run --example durable --features sqlite -- start runs.db     # runs until deploy waits, exits
//! cargo run --example durable --features sqlite -- decide runs.db    # lists what waits, approves it
//! cargo run --example durable --features sqlite -- resume runs.db    # resumes every decided run
//! cargo run --example durable --features sqlite                      # all three, as child processes
//! ```
//!
//! A decision names what the person was shown (the arguments' digest and the run's version): a
//! decision on arguments that changed since, or on a call someone else decided first, is refused.
//! A resume takes the run in one compare-and-swap, so two processes resuming the same run run its
//! tools once. Without arguments (as `cargo test` runs it) it starts itself three times and checks
//! what each printed. The model is scripted, so it runs offline.

use std::path::Path;
use std::process::Command;

use phaseo_agent::durable::Runs;
use phaseo_agent::store::{PendingFilter, SqliteStore, StoredStatus};
use phaseo_agent::{Agent, AgentError, Decision, IntoTool, ScriptedModel, ToolContext, tool};
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
    /// The key a deployment API deduplicates on: a call run again after a crash cannot deploy
    /// twice.
    request: String,
}

/// Deploy a release to an environment.
#[tool(require_approval)]
async fn deploy(input: Deploy, ctx: &ToolContext) -> Result<Deployed, String> {
    Ok(Deployed {
        environment: input.environment,
        release: input.release,
        request: ctx.idempotency_key(),
    })
}

/// The same agent in every process; only the scripted model differs (a real model reads the
/// conversation and knows which turn comes next).
fn agent(model: ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("release")
        .instructions("You ship releases.")
        .model(model)
        .tool(deploy.into_tool())
        .state_key(b"an example key; read yours from a secret store")
        .build()
}

async fn runs(db: &Path) -> Result<Runs, AgentError> {
    Ok(Runs::new(SqliteStore::open(db).await?))
}

/// Process one: run until a call waits for a person. The run is in the database already.
async fn start(db: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new().tool_call(
        "call_1",
        "deploy",
        json!({"environment": "production", "release": "v2.1.0"}),
    );
    let agent = runs(db).await?.attach(agent(model)?);
    let paused = agent.run("Ship v2.1.0 to production.").await?;
    println!(
        "run {} paused: {} waits",
        paused.state.run_id(),
        paused.pending()[0].call.id
    );
    Ok(())
}

/// Process two: a person's inbox. Lists every call waiting, across runs, and approves each.
async fn decide(db: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runs = runs(db).await?;
    let waiting = runs.pending(&PendingFilter::default()).await?;
    for item in &waiting.items {
        println!(
            "waiting: run {} call {} {} {} ({})",
            item.run_id, item.call_id, item.tool, item.arguments, item.kind
        );
        // The decision names the row the person was shown: its digest and version.
        runs.decide(item, Decision::Approve, "ada").await?;
        println!("approved by ada");
    }
    Ok(())
}

/// Process three: at start-up, takes up the runs whose process died mid-run; then resumes every
/// paused run whose calls are all decided.
async fn resume(db: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let runs = runs(db).await?;
    let model = ScriptedModel::new().text("v2.1.0 is live in production.");
    let agent = runs.attach(agent(model)?);
    // A process that runs agents starts by taking up what a dead process left running (its
    // lease expired); a run another process is running is left alone.
    let recovery = runs.recover_abandoned(&[agent.agent().clone()]).await?;
    println!(
        "at start-up: {} abandoned run(s) taken up, {} of other agents",
        recovery.recovered.len(),
        recovery.stuck.len()
    );
    let waiting = runs.pending(&PendingFilter::default()).await?;
    let mut run_ids: Vec<&str> = waiting.items.iter().map(|p| p.run_id.as_str()).collect();
    run_ids.dedup();
    for run_id in run_ids {
        let done = agent.resume(run_id).await?;
        println!("run {run_id}: {}", done.output().unwrap_or_default());
        let stored = runs.load(run_id).await?;
        assert_eq!(stored.status, StoredStatus::Completed);
        println!(
            "stored: {} at version {}",
            stored.status.as_str(),
            stored.version
        );
    }
    Ok(())
}

/// What `cargo test` runs: this program, started three times, checked by what each printed.
fn all_in_child_processes() -> Result<(), Box<dyn std::error::Error>> {
    let program = std::env::current_exe()?;
    let dir = std::env::temp_dir().join(format!("durable-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("runs.db");
    let db = db.to_str().ok_or("a temporary path that is not UTF-8")?;
    let run = |args: &[&str]| -> Result<String, Box<dyn std::error::Error>> {
        let output = Command::new(&program).args(args).output()?;
        let printed = String::from_utf8(output.stdout)?;
        print!("$ durable {}\n{printed}", args.join(" "));
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(format!("{args:?} failed: {stderr}").into());
        }
        Ok(printed)
    };
    let first = run(&["start", db])?;
    assert!(first.contains("paused: call_1 waits"), "{first}");
    let second = run(&["decide", db])?;
    assert!(second.contains("call_1 deploy"), "{second}");
    assert!(second.contains("(tool_approval)"), "{second}");
    assert!(second.contains("approved by ada"), "{second}");
    let third = run(&["resume", db])?;
    assert!(third.contains("at start-up: 0 abandoned run(s)"), "{third}");
    assert!(third.contains("v2.1.0 is live in production."), "{third}");
    assert!(third.contains("stored: completed"), "{third}");
    // Nothing waits any more.
    let again = run(&["decide", db])?;
    assert!(!again.contains("waiting:"), "{again}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => all_in_child_processes(),
        ["start", db] => start(Path::new(db)).await,
        ["decide", db] => decide(Path::new(db)).await,
        ["resume", db] => resume(Path::new(db)).await,
        _ => Err("usage: durable [start DB | decide DB | resume DB]".into()),
    }
}
