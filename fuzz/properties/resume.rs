//! The property of the `resume` fuzz target, shared with `tests/it/fuzz_corpus.rs`: resuming any
//! stored run state with any decisions never panics, and every state the agent returns can be
//! stored and read back.
//!
//! An input is `<flag><state>\0<script>`:
//!
//! - `flag`: its lowest bit picks the agent, one that signs its states (`state_key`) or one that
//!   does not;
//! - `state`: a stored run state's JSON text (up to the first zero byte, which JSON text cannot
//!   hold); an input whose state does not load (`RunState::from_json`) stops there;
//! - `script`: the rest, read by [`Script`]: which run the decisions name (this run, none, another
//!   run), what the model answers after the resume ([`model`]), then one decision per pending
//!   call (the fitting one, approve, reject, approve with arguments, output, approve always, or
//!   none), then more decisions, for pending calls again or for made-up call ids. An empty script
//!   makes the fitting decisions (approve, or supply an output), bound to the run.
//!
//! The agent resumes the state on a current-thread Tokio runtime. A resume error is fine; a panic
//! is not. Every state the agent returns (paused again, completed, or failed) must load back
//! from its JSON, to the same JSON; a paused state signed by the agent must still pass its
//! signature check after that round trip.
//!
//! The seeds (`corpus/resume`) are real paused states of this agent, written by
//! `src/bin/gen_corpus.rs` with [`agent`] and [`model`].

use std::future::IntoFuture;
use std::sync::OnceLock;

use phaseo_agent::{
    Agent, AgentError, Decision, Decisions, IntoTool, PendingCall, PendingKind, RunState,
    ScriptedModel, Tool, ToolCall, ToolContext, TurnParams, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The id of the agent, as its states record it.
pub const AGENT_ID: &str = "release";

/// The key of the signing agent (`AgentBuilder::state_key`).
pub const STATE_KEY: &[u8] = b"fuzz state key: thirty-two bytes or more";

/// A release to roll out.
#[derive(Deserialize, JsonSchema)]
struct Deploy {
    /// `staging` or `production`.
    environment: String,
    #[schemars(range(min = 1, max = 10))]
    replicas: u8,
}

fn is_production(input: &Deploy) -> bool {
    input.environment == "production"
}

/// Roll a release out; production needs a person's approval.
#[tool(require_approval = is_production)]
async fn deploy(input: Deploy) -> Result<String, String> {
    if input.environment == "broken" {
        return Err("the environment is broken".into());
    }
    Ok(format!(
        "{} replicas on {}",
        input.replicas, input.environment
    ))
}

/// Restart a service.
#[tool(require_approval)]
async fn restart(service: String) -> String {
    format!("{service} restarted")
}

fn escalated(_input: &Value, current: &TurnParams) -> TurnParams {
    current
        .clone()
        .model("senior")
        .temperature(0.25)
        .active_tools(["restart", "get_status"])
}

/// Get a service's status; a call for `billing` is reviewed by a person (`human_review`).
#[tool(next_turn = escalated)]
async fn get_status(service: String, ctx: &ToolContext) -> Result<Value, String> {
    ctx.emit_progress(json!({"checking": service}))
        .map_err(|e| e.to_string())?;
    ctx.set_context(json!({"last_checked": service}))
        .map_err(|e| e.to_string())?;
    Ok(json!({"service": service, "status": "healthy"}))
}

/// A support ticket, as a person supplies it.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Ticket {
    #[schemars(length(min = 1, max = 80))]
    title: String,
    #[schemars(range(max = 5))]
    priority: u8,
}

/// Load one support ticket from the help desk.
#[tool(external)]
async fn ticket_lookup(ticket_id: String) -> Ticket;

fn tools() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        vec![
            deploy.into_tool(),
            restart.into_tool(),
            get_status.into_tool(),
            ticket_lookup.into_tool(),
        ]
    })
}

/// The agent: its tools, a review of `get_status` calls for `billing`, and the model given;
/// signing its states with [`STATE_KEY`] when `signed`.
pub fn agent(model: ScriptedModel, signed: bool) -> Agent {
    let builder = Agent::builder(AGENT_ID)
        .model(model)
        .tools(tools().to_vec())
        .human_review(|call: &ToolCall, _ctx: &ToolContext| {
            call.name == "get_status" && call.arguments.contains("billing")
        });
    let builder = if signed {
        builder.state_key(STATE_KEY)
    } else {
        builder
    };
    builder.build().expect("the agent builds")
}

/// A scripted model whose next turn is one of a few (`choice` modulo 10), followed by enough final
/// texts that a run never runs out of script except where that is the point (choice 5).
pub fn model(choice: u8) -> ScriptedModel {
    let call = |id: &str, tool: &str, arguments: Value| ToolCall::new(id, tool, arguments);
    let model = ScriptedModel::new();
    let model = match choice % 10 {
        // The run ends.
        0 => model,
        // A gated call: the run pauses again.
        1 => model.tool_call("c_restart", "restart", json!({"service": "api"})),
        // One of each: automatic, gated by its input, external, reviewed.
        2 => model.tool_calls([
            call("c_status", "get_status", json!({"service": "api"})),
            call(
                "c_deploy",
                "deploy",
                json!({"environment": "production", "replicas": 3}),
            ),
            call("c_ticket", "ticket_lookup", json!({"ticket_id": "T-7"})),
            call("c_billing", "get_status", json!({"service": "billing"})),
        ]),
        // A tool the agent does not have: the run fails.
        3 => model.tool_call("c_unknown", "drop_tables", json!({})),
        // Arguments the schema rejects, and text that is not JSON: errors for the model.
        4 => model.tool_calls([
            call(
                "c_bad",
                "deploy",
                json!({"environment": "staging", "replicas": 99}),
            ),
            ToolCall::raw("c_raw", "restart", "{\"service\": "),
        ]),
        // No turn left: the model fails.
        5 => return model,
        // Two calls with one id: the model's turn is refused.
        6 => model.tool_calls([
            call("c_twin", "restart", json!({"service": "a"})),
            call("c_twin", "restart", json!({"service": "b"})),
        ]),
        // Calls without ids get `call_<turn>_<index>`.
        7 => model.tool_calls([
            call("", "restart", json!({"service": "api"})),
            call("", "restart", json!({"service": "web"})),
        ]),
        // Gated by its input, then an external call.
        8 => model
            .tool_call(
                "c_prod",
                "deploy",
                json!({"environment": "production", "replicas": 1}),
            )
            .tool_call("c_lookup", "ticket_lookup", json!({"ticket_id": "T-7"})),
        // A next-turn override beside a gated call.
        _ => model.tool_calls([
            call("c_escalate", "get_status", json!({"service": "api"})),
            call("c_gate", "restart", json!({"service": "api"})),
        ]),
    };
    model.text("Done.").text("Done again.").text("Still done.")
}

/// The rest of an input, read from the front; reads past its end give nothing.
struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(first)
    }

    /// A length byte, then that many bytes.
    fn chunk(&mut self) -> (u8, &[u8]) {
        let len = self.byte().unwrap_or(0);
        let (chunk, rest) = self.0.split_at(usize::from(len).min(self.0.len()));
        self.0 = rest;
        (len, chunk)
    }

    /// A rejection's message.
    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.chunk().1).into_owned()
    }

    /// A JSON value: the chunk's text if it parses, else one of a few values picked by its length,
    /// some of them hostile.
    fn json(&mut self, pending: Option<&PendingCall>) -> Value {
        let (len, chunk) = self.chunk();
        if let Some(value) = std::str::from_utf8(chunk)
            .ok()
            .and_then(|text| serde_json::from_str(text).ok())
        {
            return value;
        }
        match len % 10 {
            0 => pending.map_or(Value::Null, |p| p.arguments.clone()),
            1 => json!({}),
            2 => Value::Null,
            3 => json!({"title": "Printer on fire", "priority": 2}),
            4 => json!({"environment": "production", "replicas": 1e300}),
            5 => json!({"service": "a\u{0}b\u{fffd}", "title": "x".repeat(5_000)}),
            // Deeper than a stored state may nest.
            6 => (0..200).fold(json!(0), |inner, _| json!([inner])),
            7 => (0..110).fold(json!(0), |inner, _| json!({"a": inner})),
            8 => json!({"environment": "staging", "replicas": 2.0}),
            _ => json!([u64::MAX, i64::MIN, 1.5e308, -0.0]),
        }
    }
}

/// The decision that fits a pending call: approve a gated or reviewed call, supply an external
/// call's output.
fn fitting(decisions: Decisions, pending: &PendingCall) -> Decisions {
    let id = pending.call.id.clone();
    match pending.kind {
        PendingKind::ExternalOutput => {
            decisions.output(id, json!({"title": "Printer on fire", "priority": 2}))
        }
        // A gated, reviewed or in-doubt call.
        _ => decisions.approve(id),
    }
}

/// One decision of the script for `id`; `op` picks its kind.
fn decide(
    decisions: Decisions,
    id: String,
    op: u8,
    pending: Option<&PendingCall>,
    script: &mut Script<'_>,
) -> Decisions {
    match op % 8 {
        0 => match pending {
            Some(pending) => fitting(decisions, pending),
            None => decisions.approve(id),
        },
        1 => decisions.approve(id),
        2 => {
            let message = script.text();
            decisions.reject(id, message)
        }
        3 => {
            let arguments = script.json(pending);
            decisions.approve_with_arguments(id, arguments)
        }
        4 => {
            let output = script.json(pending);
            decisions.output(id, output)
        }
        5 => decisions.decide(id, Decision::ApproveAlways),
        // No decision for this call.
        6 => decisions,
        _ => match pending {
            Some(pending) => fitting(decisions, pending).approve(format!("{id}_made_up")),
            None => decisions,
        },
    }
}

/// The decisions a script makes for a state, and the model's next turns.
fn decisions(state: &RunState, script: &mut Script<'_>) -> (Decisions, ScriptedModel) {
    let mode = script.byte().unwrap_or(0);
    let mut decisions = match mode % 4 {
        0 => Decisions::for_run(state.run_id()),
        1 => Decisions::new(),
        2 => Decisions::for_run(format!("{}_other", state.run_id())),
        _ => Decisions::for_run(""),
    };
    for pending in state.pending() {
        let op = script.byte().unwrap_or(0);
        decisions = decide(
            decisions,
            pending.call.id.clone(),
            op,
            Some(pending),
            script,
        );
    }
    // What is left: decisions for calls picked by index (pending ones, or made up).
    while let Some(pick) = script.byte() {
        let op = script.byte().unwrap_or(0);
        let pending = state.pending().get(usize::from(pick % 8));
        let id = match pending {
            Some(pending) => pending.call.id.clone(),
            None => format!("call_{}", pick % 4),
        };
        decisions = decide(decisions, id, op, pending, script);
    }
    (decisions, model(mode / 4))
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a Tokio runtime")
    })
}

/// A state the agent returned loads back from its JSON, to the same JSON; a paused state the
/// agent signed still passes the signature check.
fn stored_state_loads(agent: &Agent, state: &RunState, signed: bool, input: &str) {
    let stored = state.to_json();
    let loaded = RunState::from_json(&stored).unwrap_or_else(|e| {
        panic!(
            "a state the agent returned ({:?}) does not load back: {e}\n\
             state: {stored}\nresumed from: {input}",
            state.status()
        )
    });
    let again = loaded.to_json();
    assert!(
        again == stored,
        "a state the agent returned reads back as another state\n\
         stored: {stored}\nread back: {again}"
    );
    if signed && state.is_signed() && !state.pending().is_empty() {
        // No decisions: refused, but for a missing decision, not for the signature.
        if let Err(error) =
            runtime().block_on(agent.resume(&loaded, Decisions::new()).into_future())
        {
            assert!(
                !matches!(error.error, AgentError::StateSignature(_)),
                "a state the agent signed fails its signature check after a JSON round trip: \
                 {error}\nstate: {stored}"
            );
        }
    }
}

/// Checks the property on one input (see the module docs for its layout).
pub fn check(data: &[u8]) {
    let Some((&flag, rest)) = data.split_first() else {
        return;
    };
    let signed = flag & 1 == 1;
    let (state, script) = match rest.iter().position(|&b| b == 0) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(text) = std::str::from_utf8(state) else {
        return;
    };
    let Ok(state) = RunState::from_json(text) else {
        return;
    };
    let (decisions, model) = decisions(&state, &mut Script(script));
    let agent = agent(model, signed);
    let outcome = runtime().block_on(agent.resume(&state, decisions).into_future());
    match outcome {
        Ok(result) => stored_state_loads(&agent, &result.state, signed, text),
        Err(error) => {
            if let Some(failed) = &error.state {
                stored_state_loads(&agent, failed, signed, text);
            }
        }
    }
}
