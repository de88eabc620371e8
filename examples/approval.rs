//! Require approval: a gated call pauses the run (status `waiting_for_human`, pending kind
//! `tool_approval`) until a person decides, by call id. Shown with:
//!
//! - `.require_approval()`: every call waits;
//! - `.approval(|input: &Value, ctx| ...)`: a JSON tool decides per call from its validated input;
//! - `.approval(|input: &Deploy, _| ...)`: a typed tool decides from its typed input;
//! - the paused run stored as JSON (signed with `.state_key(..)`, so an edited copy is refused) and
//!   resumed from it, with `Decisions::for_run(state.run_id()).approve(..)` (decisions name their
//!   run, so they never answer another run's calls of the same ids),
//!   `.reject(id, message)` (the model sees the message) and `.approve_with_arguments(..)` (edited
//!   arguments, validated again like the model's own); decisions that do not fit are refused and
//!   change nothing;
//! - `Decision::ApproveAlways`: this tool runs without asking for the rest of the run;
//! - the agent-level `.approval_policy(|call, ctx, tool_says| ...)`, which sees each tool's own
//!   verdict and decides, in both directions;
//! - the agent-level `.approval(|call, ctx| ...)`, which adds gates and never removes a tool's own.
//!
//! Run it with `cargo run --example approval`. The model is scripted, so it runs offline.

use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, Decision, Decisions, Event, Message, PendingKind, RunResult, RunState,
    ScriptedModel, Tool, ToolCall, ToolContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A release to roll out.
#[derive(Deserialize, schemars::JsonSchema)]
struct Deploy {
    /// `staging` or `production`.
    environment: String,
    /// The release tag, like `v2.1.0`.
    release: String,
}

#[derive(Serialize)]
struct Rollout {
    environment: String,
    release: String,
    rolled_out: bool,
}

fn environment_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "environment": { "type": "string" } },
        "required": ["environment"]
    })
}

fn tools() -> Vec<Tool> {
    // `deploy`, deciding per call: only production needs a person.
    let deploy = Tool::new(
        "deploy",
        "Deploy an application environment",
        environment_schema(),
        |input, _context| {
            Ok(json!({
                "environment": input["environment"],
                "deployed": true
            }))
        },
    )
    .approval(|input: &Value, _ctx: &ToolContext| input["environment"] == "production");

    // A typed tool decides from its typed input.
    let rollout = Tool::typed(
        "rollout",
        "Roll a release out to an environment",
        |input: Deploy, _ctx: ToolContext| async move {
            Ok::<_, String>(Rollout {
                environment: input.environment,
                release: input.release,
                rolled_out: true,
            })
        },
    )
    .approval(|input: &Deploy, _ctx: &ToolContext| input.environment == "production");

    // Every call waits.
    let restart = Tool::new(
        "restart_service",
        "Restart a service",
        json!({
            "type": "object",
            "properties": { "service": { "type": "string" } },
            "required": ["service"]
        }),
        |input, _context| Ok(json!({ "service": input["service"], "restarted": true })),
    )
    .require_approval();

    vec![deploy, rollout, restart]
}

/// Signs the states the agent returns, so an edited stored state is refused. In production, a secret
/// of at least 32 random bytes kept outside the store.
const STATE_KEY: &[u8] = b"example key: use 32+ random bytes";

fn agent(model: &ScriptedModel) -> Result<Agent, AgentError> {
    Agent::builder("release")
        .model(model.clone())
        .tools(tools())
        .state_key(STATE_KEY)
        .build()
}

fn show(result: &RunResult) {
    println!("   status: {:?}", result.status());
    for pending in result.pending() {
        println!(
            "   waiting: {} {} {} (kind {})",
            pending.call.id,
            pending.call.name,
            pending.arguments,
            pending.kind.as_str()
        );
    }
}

/// Starts a run and streams its events, printing each call that ran; returns the paused state.
///
/// (A paused state keeps the results of the turn's calls that already ran, but `RunState::steps()`
/// lists only finished turns, so the event stream is how to see them now.)
async fn start_until_paused(agent: &Agent, input: &str) -> RunState {
    let mut events = agent.run(input).stream();
    let mut paused = None;
    while let Some(event) = events.next().await {
        match event {
            Event::ToolResult {
                call_id,
                tool,
                content,
                ..
            } => println!("   ran at once: {call_id} {tool}: {content}"),
            Event::Paused { state, .. } => paused = Some(*state),
            Event::Completed { output, .. } => println!("   completed: {output}"),
            Event::Failed { error, .. } => println!("   failed: {error}"),
            _ => {}
        }
    }
    paused.expect("the run paused")
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    println!("== 1. One turn, four calls: one runs, three wait for a person");
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "deploy", json!({ "environment": "staging" })),
            ToolCall::new("call_2", "deploy", json!({ "environment": "production" })),
            ToolCall::new(
                "call_3",
                "rollout",
                json!({ "environment": "production", "release": "v2.1.0" }),
            ),
            ToolCall::new(
                "call_4",
                "restart_service",
                json!({ "service": "checkout" }),
            ),
        ])
        .text("Deployed production and rolled out v2.1.1; the restart was refused.");
    let paused = RunResult {
        state: start_until_paused(&agent(&model)?, "Ship it everywhere.").await,
    };
    show(&paused);
    assert!(paused.is_paused());
    let waiting: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(waiting, ["call_2", "call_3", "call_4"]);
    assert!(
        paused
            .pending()
            .iter()
            .all(|p| p.kind == PendingKind::ToolApproval)
    );

    println!("\n== 2. Store the paused run as JSON; later, load it");
    let stored = paused.state.to_json();
    println!(
        "   {} bytes of JSON, signed: {}",
        stored.len(),
        paused.state.is_signed()
    );
    drop(paused);
    let state = RunState::from_json(&stored)?;
    let agent = agent(&model)?;

    // Someone with access to the store marks `restart_service` as approved for the run: refused.
    let mut edited: Value =
        serde_json::from_str(&stored).map_err(|e| AgentError::InvalidState(e.to_string()))?;
    edited["approved_tools"] = json!(["restart_service"]);
    let forged = RunState::from_json(&edited.to_string())?;
    let err = agent
        .resume(&forged, Decisions::new().approve("call_2"))
        .await
        .unwrap_err();
    println!("   an edited copy is refused: {err}");
    assert!(matches!(err.error, AgentError::StateSignature(_)), "{err}");
    assert!(state.is_signed());

    println!("\n== 3. Decisions that do not fit are refused, and change nothing");
    let wrong_id = Decisions::new().approve("call_9");
    let err = agent.resume(&state, wrong_id).await.unwrap_err();
    println!("   approve call_9:      {err}");
    assert!(matches!(err.error, AgentError::NotPending { .. }));
    let incomplete = Decisions::new().approve("call_2");
    let err = agent.resume(&state, incomplete).await.unwrap_err();
    println!("   only call_2:         {err}");
    assert!(matches!(err.error, AgentError::MissingDecision { .. }));
    let bad_edit = Decisions::new()
        .approve("call_2")
        .approve_with_arguments("call_3", json!({ "environment": "production" }))
        .reject("call_4", "Not during the freeze");
    let err = agent.resume(&state, bad_edit).await.unwrap_err();
    println!("   edit without release: {err}");
    assert!(matches!(err.error, AgentError::InvalidInput(_)));
    let other_run = Decisions::for_run("run_from_yesterday")
        .approve("call_2")
        .approve("call_3")
        .approve("call_4");
    let err = agent.resume(&state, other_run).await.unwrap_err();
    println!("   another run's:       {err}");
    assert!(matches!(err.error, AgentError::WrongRun { .. }));
    assert_eq!(state.to_json(), stored, "the stored state is untouched");

    println!("\n== 4. Approve call_2, approve call_3 with an edited release, reject call_4");
    let decisions = Decisions::for_run(state.run_id())
        .approve("call_2")
        .approve_with_arguments(
            "call_3",
            json!({ "environment": "production", "release": "v2.1.1" }),
        )
        .reject("call_4", "Not during the freeze");
    let done = agent.resume(&state, decisions).await?;
    show(&done);
    for step in done.state.steps() {
        println!("   {} {}: {}", step.call_id, step.tool, step.content);
    }
    println!("   answer: {}", done.output().unwrap_or_default());
    assert_eq!(
        done.state.tool_result("call_2").unwrap_or_default(),
        r#"{"deployed":true,"environment":"production"}"#
    );
    assert_eq!(
        done.state.tool_result("call_3").unwrap_or_default(),
        r#"{"environment":"production","release":"v2.1.1","rolled_out":true}"#
    );
    assert_eq!(
        done.state.tool_result("call_4").unwrap_or_default(),
        r#"{"error":"Rejected by a person: Not during the freeze"}"#
    );
    // The conversation records the call as it actually ran, with the edited arguments.
    let ran_with = done.state.messages().iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .find(|c| c.id == "call_3")
            .map(|c| c.arguments.clone()),
        _ => None,
    });
    println!(
        "   call_3 as recorded: {}",
        ran_with.clone().unwrap_or_default()
    );
    assert!(ran_with.is_some_and(|a| a.contains("v2.1.1")));

    println!("\n== 5. Approve always: the second restart in this run does not ask");
    let model = ScriptedModel::new()
        .tool_call(
            "call_1",
            "restart_service",
            json!({ "service": "checkout" }),
        )
        .tool_call(
            "call_2",
            "restart_service",
            json!({ "service": "payments" }),
        )
        .text("Restarted checkout and payments.");
    let agent = self::agent(&model)?;
    let paused = agent.run("Restart checkout, then payments.").await?;
    show(&paused);
    let always = Decisions::new().decide("call_1", Decision::ApproveAlways);
    let done = agent.resume(&paused.state, always).await?;
    show(&done);
    for step in done.state.steps() {
        println!("   {} {}: {}", step.call_id, step.tool, step.content);
    }
    assert_eq!(done.output(), Some("Restarted checkout and payments."));
    assert_eq!(done.state.steps().len(), 2);

    println!("\n== 6. An agent-level approval policy sees each tool's verdict and decides");
    // During a change freeze, every deploy waits (even staging, which the tool would let through),
    // and nothing else does (not even restarts, which the tool always gates). Waiving a tool's own
    // gate takes a policy on purpose; `AgentBuilder::approval` could only add gates.
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "deploy", json!({ "environment": "staging" })),
            ToolCall::new(
                "call_2",
                "restart_service",
                json!({ "service": "checkout" }),
            ),
        ])
        .text("Restarted checkout; the staging deploy waits for the freeze to end.");
    let agent = Agent::builder("release")
        .model(model.clone())
        .tools(tools())
        .approval_policy(|call: &ToolCall, _ctx: &ToolContext, _tool_says: bool| {
            call.name == "deploy"
        })
        .build()?;
    let paused = RunResult {
        state: start_until_paused(&agent, "Deploy staging and restart checkout.").await,
    };
    show(&paused);
    let waiting: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(waiting, ["call_1"]);
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().reject("call_1", "Change freeze until Monday"),
        )
        .await?;
    show(&done);
    assert_eq!(
        done.state.tool_result("call_1").unwrap_or_default(),
        r#"{"error":"Rejected by a person: Change freeze until Monday"}"#
    );
    assert_eq!(
        done.state.tool_result("call_2").unwrap_or_default(),
        r#"{"restarted":true,"service":"checkout"}"#
    );

    println!("\n== 7. An agent-level approval rule adds to the tools' own gates");
    // A rule for deploys only: the restart, which its tool always gates, still waits too.
    let model = ScriptedModel::new().tool_calls([
        ToolCall::new("call_1", "deploy", json!({ "environment": "staging" })),
        ToolCall::new(
            "call_2",
            "restart_service",
            json!({ "service": "checkout" }),
        ),
    ]);
    let agent = Agent::builder("release")
        .model(model)
        .tools(tools())
        .approval(|call: &ToolCall, _ctx: &ToolContext| call.name == "deploy")
        .build()?;
    let paused = agent.run("Deploy staging and restart checkout.").await?;
    show(&paused);
    let waiting: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(waiting, ["call_1", "call_2"]);

    println!("\nAll checks passed.");
    Ok(())
}
