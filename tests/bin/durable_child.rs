//! A process that runs a durable agent on a store, for the crash and race tests
//! (`tests/it/durable_processes.rs`): they start it, kill it with SIGKILL at a journal boundary,
//! and start it again to recover, or start eight at once to resume one run.
//!
//! ```text
//! durable_child STORE EFFECTS COMMAND RUN_ID [VERSION]
//!   STORE    sqlite:PATH, sqlite-not-power-safe:PATH or postgres:URL
//!   EFFECTS  a file each run of a tool's code appends one line to: "RUN_ID CALL_ID KEY"
//!   COMMAND  start    start run RUN_ID (the model: two calls, notify and sync (idempotent), then
//!                     a gated deploy, then an answer), then drive it
//!            drive    take RUN_ID to its end: recover it while it is running, decide what a person
//!                     would while it waits (approve; an in-doubt call's output supplied)
//!            pause    start RUN_ID, stop at its pause, print `version V` (for the race)
//!            resume   resume RUN_ID at VERSION, approving its calls
//!            charge   start RUN_ID of the `billing` agent: one call of `charge` (not idempotent,
//!                     no approval), then an answer; with `PHASEO_HOLD_FILE` set, the tool
//!                     prints `in-tool` and waits until that file exists before it returns
//!            recover-abandoned  `Runs::recover_abandoned` with the `billing` agent once:
//!                     prints `recovered RUN_ID STATUS` or `refused RUN_ID ERROR` for each run it
//!                     took up, `stuck RUN_ID` for each it could not, then `done`
//!            recover  `DurableAgent::recover(RUN_ID)` of the `billing` agent; on a refusal
//!                     prints `refused ERROR` and exits 3
//! ```
//!
//! `PHASEO_CRASH_AT=before:N` or `after:N` stops the process right before or right after the
//! store's Nth write (the first is 1): it prints `crash-point N` on stdout and waits there to be
//! killed. Exit codes: 0 done, 3 refused (a lost race), 4 no such run, 1 anything else.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;

use phaseo_agent::durable::Runs;
use phaseo_agent::serde_json::{Value, json};
use phaseo_agent::store::{PostgresStore, RunStore, SqliteStore, StoredStatus};
use phaseo_agent::{
    Agent, AgentError, Decisions, ModelResponse, PendingKind, StoreError, Tool, ToolCall,
};

// Shared with the tests and the durable bench; not every item is used here.
#[allow(dead_code)]
#[path = "../support/durable.rs"]
mod durable;

use durable::{ByPosition, Hooked};

/// Prints `crash-point` and waits to be killed: SIGKILL, here, with the write done or not.
fn stop_here() -> ! {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "crash-point");
    let _ = out.flush();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

/// The store, stopping the process right before or right after its write number `at`
/// (`PHASEO_CRASH_AT=before:N` or `after:N`).
fn crashing(inner: Arc<dyn RunStore>, at: Option<(String, usize)>) -> Hooked {
    let Some((when, at)) = at else {
        return Hooked::new(inner);
    };
    let before = when == "before";
    Hooked::new(inner)
        .before_write(move |n| {
            if before && n == at {
                stop_here();
            }
            Ok(())
        })
        .after_write(move |n| {
            if !before && n == at {
                stop_here();
            }
        })
}

/// A tool whose every run appends "RUN_ID CALL_ID KEY" to the effects file (one write of one
/// line, in append mode: lines from racing processes do not interleave).
fn effect_tool(name: &str, effects: &str) -> Tool {
    let path = effects.to_owned();
    Tool::new(
        name,
        "Has a side effect",
        json!({"type": "object"}),
        move |_, ctx| write_effect(&path, &ctx),
    )
}

fn write_effect(path: &str, ctx: &phaseo_agent::ToolContext) -> Result<Value, AgentError> {
    let line = format!(
        "{} {} {}\n",
        ctx.run_id(),
        ctx.tool_call().id,
        ctx.idempotency_key()
    );
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(AgentError::tool)?;
    file.write_all(line.as_bytes()).map_err(AgentError::tool)?;
    file.sync_data().map_err(AgentError::tool)?;
    Ok(json!({"done": true}))
}

/// The `billing` agent: one charge, then an answer. The charge waits, mid-tool, for the file
/// `PHASEO_HOLD_FILE` names, if set.
fn billing(effects: &str) -> Agent {
    let hold = std::env::var("PHASEO_HOLD_FILE").ok();
    let path = effects.to_owned();
    let charge = Tool::new(
        "charge",
        "Charges a card",
        json!({"type": "object"}),
        move |args, ctx| {
            if let Some(hold) = &hold {
                println!("in-tool");
                let _ = std::io::stdout().flush();
                while !std::path::Path::new(hold).exists() {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            let _ = args;
            write_effect(&path, &ctx)
        },
    );
    let model = ByPosition(vec![
        ModelResponse::tool_calls([ToolCall::new("call_1", "charge", json!({"cents": 4250}))]),
        ModelResponse::text("Charged."),
    ]);
    Agent::builder("billing")
        .model(model)
        .tool(charge)
        .build()
        .expect("the agent builds")
}

fn agent(effects: &str) -> Agent {
    let model = ByPosition(vec![
        ModelResponse::tool_calls([
            ToolCall::new("call_1", "notify", json!({"to": "ops"})),
            ToolCall::new("call_2", "sync", json!({"repo": "web"})),
        ]),
        ModelResponse::tool_calls([ToolCall::new("call_3", "deploy", json!({"env": "staging"}))]),
        ModelResponse::text("All done."),
    ]);
    Agent::builder("release")
        .model(model)
        .tool(effect_tool("deploy", effects).require_approval())
        .tool(effect_tool("notify", effects))
        .tool(effect_tool("sync", effects).idempotent(true))
        .build()
        .expect("the agent builds")
}

async fn open(store: &str) -> Result<Arc<dyn RunStore>, AgentError> {
    if let Some(path) = store.strip_prefix("sqlite:") {
        return Ok(Arc::new(SqliteStore::open(path).await?));
    }
    if let Some(path) = store.strip_prefix("sqlite-not-power-safe:") {
        let store = SqliteStore::builder(path).power_safe(false).open().await?;
        return Ok(Arc::new(store));
    }
    if let Some(url) = store.strip_prefix("postgres:") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    Err(AgentError::InvalidAgent(format!("unknown store {store}")))
}

fn decisions_for(run_id: &str, pending: &[phaseo_agent::PendingCall]) -> Decisions {
    let mut decisions = Decisions::for_run(run_id);
    for p in pending {
        decisions = match p.kind {
            PendingKind::OutcomeUnknown => {
                decisions.output(&p.call.id, json!({"done": "before the crash"}))
            }
            _ => decisions.approve(&p.call.id),
        };
    }
    decisions
}

async fn main_async(args: Vec<String>) -> Result<(), AgentError> {
    let [store, effects, command, run_id, rest @ ..] = args.as_slice() else {
        return Err(AgentError::InvalidAgent(
            "usage: durable_child STORE EFFECTS COMMAND RUN_ID [VERSION]".into(),
        ));
    };
    let crash = std::env::var("PHASEO_CRASH_AT").ok().and_then(|at| {
        let (when, n) = at.split_once(':')?;
        Some((when.to_owned(), n.parse().ok()?))
    });
    let store = crashing(open(store).await?, crash);
    // A short lease: a process killed while it held the run is recovered soon after.
    let runs = Runs::without_queue(Arc::new(store))
        .snapshot_every(3)
        .lease(std::time::Duration::from_millis(300));
    let durable = runs.attach(agent(effects));
    match command.as_str() {
        "pause" => {
            durable.run("Ship it").run_id(run_id).await?;
            println!("version {}", runs.load(run_id).await?.version);
        }
        "start" | "drive" => {
            if command == "start" {
                durable.run("Ship it").run_id(run_id).await?;
            }
            for _ in 0..20 {
                let stored = runs.load(run_id).await?;
                let result = match stored.status {
                    StoredStatus::Running => durable.recover(run_id).await,
                    StoredStatus::Paused | StoredStatus::InDoubt | StoredStatus::Ready => {
                        let decisions = decisions_for(run_id, stored.state.pending());
                        durable
                            .resume(run_id)
                            .decisions(decisions)
                            .at(stored.version)
                            .by("ops")
                            .await
                    }
                    StoredStatus::Completed => return Ok(()),
                    StoredStatus::Failed => {
                        return Err(AgentError::InvalidState("the run failed".into()));
                    }
                };
                // The killed process held the run (running it, or taking it to resume): its
                // lease has not expired yet. Wait for it.
                if let Err(refused) = &result {
                    if let AgentError::Store(StoreError::LeaseHeld { expires_in_ms, .. }) =
                        refused.error
                    {
                        let wait = std::time::Duration::from_millis(expires_in_ms + 20);
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                }
                result?;
            }
            return Err(AgentError::InvalidState("the run never ended".into()));
        }
        "charge" => {
            let done = runs
                .attach(billing(effects))
                .run("Charge")
                .run_id(run_id)
                .await?;
            println!("{}", runs.load(done.state.run_id()).await?.status.as_str());
        }
        "recover-abandoned" => {
            let recovery = runs.recover_abandoned(&[billing(effects)]).await?;
            for (run_id, result) in recovery.recovered {
                match result {
                    Ok(_) => {
                        let status = runs.load(&run_id).await?.status;
                        println!("recovered {run_id} {}", status.as_str());
                    }
                    Err(refused) => println!("refused {run_id} {}", refused.error),
                }
            }
            for run in recovery.stuck {
                println!("stuck {}", run.run_id);
            }
            println!("done");
        }
        "recover" => {
            if let Err(refused) = runs.attach(billing(effects)).recover(run_id).await {
                println!("refused {}", refused.error);
                std::process::exit(3);
            }
        }
        "resume" => {
            let version: u64 = rest
                .first()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| AgentError::InvalidAgent("resume needs a VERSION".into()))?;
            let stored = runs.load(run_id).await?;
            let decisions = decisions_for(run_id, stored.state.pending());
            durable
                .resume(run_id)
                .decisions(decisions)
                .at(version)
                .by("racer")
                .await?;
        }
        other => return Err(AgentError::InvalidAgent(format!("unknown command {other}"))),
    }
    Ok(())
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match block_on(main_async(args)) {
        Ok(()) => {}
        Err(AgentError::Store(
            StoreError::Conflict { .. }
            | StoreError::WrongStatus { .. }
            | StoreError::LeaseHeld { .. },
        )) => std::process::exit(3),
        Err(AgentError::Store(StoreError::NotFound { .. })) => std::process::exit(4),
        Err(error) => {
            eprintln!("durable_child: {error}");
            std::process::exit(1)
        }
    }
}
