//! Property test: over random sequences of model turns, decisions and model failures, a gated call
//! never runs without approval, a rejected call never runs, and every call that runs runs exactly
//! once, whether a paused state is resumed or a failed one retried, directly or after a JSON round
//! trip into a freshly built agent.
//!
//! Gates compose: the `gated` tool requires approval on its own, and the agent's rule flags calls
//! whose target is `flag` (of any tool); a flagged call of the automatic tool pauses too, and the
//! rule never opens `gated`'s own gate. The model fails (as a provider's 503 would) at random
//! requests, after tools have run; each failure is recovered with `Agent::retry`.
//!
//! Cases: 10,000 (`PHASEO_PROPTEST_CASES` sets another number).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::agent::object_schema;
use futures::future::BoxFuture;
use phaseo_agent::{
    Agent, AgentError, Decisions, Model, ModelError, ModelRequest, ModelResponse, PendingKind,
    RunState, ScriptedModel, Tool, ToolCall, ToolContext,
};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum CallKind {
    Auto,
    /// An automatic tool's call that the agent's rule flags for approval.
    AutoFlagged,
    Gated,
    /// A gated tool's call that the agent's rule also flags.
    GatedFlagged,
    External,
    GatedBadArgs,
}

impl CallKind {
    fn needs_approval(self) -> bool {
        matches!(
            self,
            CallKind::AutoFlagged | CallKind::Gated | CallKind::GatedFlagged
        )
    }
}

/// The scripted model, failing the requests marked in `fails` (shared by every agent of a case, so
/// a request counts once whichever agent makes it).
#[derive(Clone)]
struct Flaky {
    script: ScriptedModel,
    fails: Arc<Vec<bool>>,
    asked: Arc<AtomicUsize>,
}

impl Model for Flaky {
    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        if self.fails.get(n).copied().unwrap_or(false) {
            return Box::pin(async { Err(ModelError::other("the model failed")) });
        }
        self.script.respond(request)
    }
}

fn cases() -> u32 {
    std::env::var("PHASEO_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

#[derive(Debug, Clone, Copy)]
enum Verdict {
    Approve,
    Reject,
    ApproveEdited,
}

/// Which calls ran, by call id, in order.
type Ledger = Arc<Mutex<Vec<String>>>;

fn build_agent(model: &Flaky, ledger: &Ledger) -> Agent {
    let record = |ledger: &Ledger| {
        let ledger = ledger.clone();
        move |input: serde_json::Value, ctx: ToolContext| {
            ledger.lock().unwrap().push(ctx.tool_call().id.clone());
            Ok(input)
        }
    };
    let schema = object_schema(json!({"target": {"type": "string"}}), &["target"]);
    Agent::builder("prop")
        .model(model.clone())
        .tool(Tool::new(
            "auto",
            "Runs at once",
            schema.clone(),
            record(ledger),
        ))
        .tool(
            Tool::new("gated", "Needs approval", schema.clone(), record(ledger)).require_approval(),
        )
        .tool(Tool::external("external", "Answered from outside", schema))
        .approval(|call: &ToolCall, _: &ToolContext| call.arguments.contains("flag"))
        .max_turns(64)
        .build()
        .unwrap()
}

fn kind_strategy() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        Just(CallKind::Auto),
        Just(CallKind::AutoFlagged),
        Just(CallKind::Gated),
        Just(CallKind::GatedFlagged),
        Just(CallKind::External),
        Just(CallKind::GatedBadArgs)
    ]
}

fn verdict_strategy() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Approve),
        Just(Verdict::Reject),
        Just(Verdict::ApproveEdited)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn gated_calls_run_only_when_approved_and_every_call_at_most_once(
        turns in prop::collection::vec(prop::collection::vec(kind_strategy(), 1..5), 1..6),
        verdicts in prop::collection::vec(verdict_strategy(), 64),
        round_trips in prop::collection::vec(any::<bool>(), 64),
        stray_decisions in prop::collection::vec(any::<bool>(), 64),
        fails in prop::collection::vec(prop::bool::weighted(0.2), 64),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let mut model = ScriptedModel::new();
            let mut kinds = HashMap::new();
            for (t, turn) in turns.iter().enumerate() {
                let calls = turn.iter().enumerate().map(|(i, kind)| {
                    let id = format!("t{t}c{i}");
                    kinds.insert(id.clone(), *kind);
                    match kind {
                        CallKind::Auto => ToolCall::new(id, "auto", json!({"target": "a"})),
                        CallKind::AutoFlagged => ToolCall::new(id, "auto", json!({"target": "flag"})),
                        CallKind::Gated => ToolCall::new(id, "gated", json!({"target": "g"})),
                        CallKind::GatedFlagged => ToolCall::new(id, "gated", json!({"target": "flag"})),
                        CallKind::External => ToolCall::new(id, "external", json!({"target": "e"})),
                        CallKind::GatedBadArgs => ToolCall::new(id, "gated", json!({"target": 5})),
                    }
                });
                model = model.turn(ModelResponse::tool_calls(calls.collect::<Vec<_>>()));
            }
            model = model.text("finished");
            let model = Flaky { script: model, fails: Arc::new(fails), asked: Arc::default() };

            let ledger: Ledger = Arc::default();
            let mut agent = build_agent(&model, &ledger);
            let mut outcome = agent.run("go").await;
            let mut approved = HashSet::new();
            let mut rejected = HashSet::new();
            let mut round = 0;
            let mut retries = 0;
            let result = loop {
                let result = match outcome {
                    Ok(result) if result.is_paused() => result,
                    Ok(result) => break result,
                    Err(failed) => {
                        // A model failure: retry from the failed state (stored, perhaps).
                        assert!(matches!(failed.error, AgentError::Model(_)), "{failed}");
                        let mut state = *failed.state.expect("a started run has a failed state");
                        if round_trips[(round + retries) % 64] {
                            state = RunState::from_json(&state.to_json()).unwrap();
                            agent = build_agent(&model, &ledger);
                        }
                        retries += 1;
                        assert!(retries <= 64, "retries never end");
                        outcome = agent.retry(&state).await;
                        continue;
                    }
                };
                // Nothing pending has run.
                let ran: HashSet<String> = ledger.lock().unwrap().iter().cloned().collect();
                for p in result.pending() {
                    assert!(!ran.contains(&p.call.id), "{} ran before its decision", p.call.id);
                }
                let mut state = result.state.clone();
                if round_trips[round % 64] {
                    state = RunState::from_json(&state.to_json()).unwrap();
                    agent = build_agent(&model, &ledger);
                }
                if stray_decisions[round % 64] {
                    let before = state.to_json();
                    let err = agent.resume(&state, Decisions::new().approve("no-such-call")).await;
                    assert!(err.is_err());
                    assert_eq!(state.to_json(), before);
                }
                let mut decisions = Decisions::new();
                for (i, p) in result.pending().iter().enumerate() {
                    let verdict = verdicts[(round * 7 + i) % 64];
                    decisions = match (p.kind, verdict) {
                        (PendingKind::ExternalOutput, _) => decisions.output(&p.call.id, json!({"ok": true})),
                        (_, Verdict::Approve) => { approved.insert(p.call.id.clone()); decisions.approve(&p.call.id) }
                        (_, Verdict::ApproveEdited) => {
                            approved.insert(p.call.id.clone());
                            decisions.approve_with_arguments(&p.call.id, json!({"target": "edited"}))
                        }
                        (_, Verdict::Reject) => { rejected.insert(p.call.id.clone()); decisions.reject(&p.call.id, "no") }
                    };
                }
                outcome = agent.resume(&state, decisions).await;
                round += 1;
            };
            assert_eq!(result.output(), Some("finished"));

            let ran = ledger.lock().unwrap().clone();
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for id in &ran {
                *counts.entry(id.as_str()).or_default() += 1;
            }
            for (id, kind) in &kinds {
                let n = counts.get(id.as_str()).copied().unwrap_or(0);
                match kind {
                    CallKind::Auto => assert_eq!(n, 1, "automatic call {id} runs once"),
                    CallKind::External | CallKind::GatedBadArgs => assert_eq!(n, 0, "{id} never runs"),
                    k if k.needs_approval() && approved.contains(id) => {
                        assert_eq!(n, 1, "approved {id} runs exactly once")
                    }
                    _ => {
                        assert!(rejected.contains(id), "{id} ({kind:?}) was neither approved nor rejected");
                        assert_eq!(n, 0, "rejected {id} never runs");
                    }
                }
            }
        });
    }
}
