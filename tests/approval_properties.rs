//! Property test (issue 2): over random sequences of model turns and decisions, a gated call never
//! runs without approval, a rejected call never runs, and an approved call runs exactly once, whether
//! the paused state is resumed directly or after a JSON round trip into a freshly built agent.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use common::object_schema;
use phaseo_agent::{
    Agent, Decisions, ModelResponse, PendingKind, RunState, ScriptedModel, Tool, ToolCall,
};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum CallKind {
    Auto,
    Gated,
    External,
    GatedBadArgs,
}

#[derive(Debug, Clone, Copy)]
enum Verdict {
    Approve,
    Reject,
    ApproveEdited,
}

/// Which calls ran, by call id, in order.
type Ledger = Arc<Mutex<Vec<String>>>;

fn build_agent(model: &ScriptedModel, ledger: &Ledger) -> Agent {
    let record = |ledger: &Ledger| {
        let ledger = ledger.clone();
        move |input: serde_json::Value, ctx: &phaseo_agent::ToolContext| {
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
        .max_turns(64)
        .build()
        .unwrap()
}

fn kind_strategy() -> impl Strategy<Value = CallKind> {
    prop_oneof![
        Just(CallKind::Auto),
        Just(CallKind::Gated),
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
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn gated_calls_run_only_when_approved_and_exactly_once(
        turns in prop::collection::vec(prop::collection::vec(kind_strategy(), 1..5), 1..6),
        verdicts in prop::collection::vec(verdict_strategy(), 64),
        round_trips in prop::collection::vec(any::<bool>(), 64),
        stray_decisions in prop::collection::vec(any::<bool>(), 64),
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
                        CallKind::Gated => ToolCall::new(id, "gated", json!({"target": "g"})),
                        CallKind::External => ToolCall::new(id, "external", json!({"target": "e"})),
                        CallKind::GatedBadArgs => ToolCall::new(id, "gated", json!({"target": 5})),
                    }
                });
                model = model.turn(ModelResponse::tool_calls(calls.collect::<Vec<_>>()));
            }
            model = model.text("finished");

            let ledger: Ledger = Arc::default();
            let mut agent = build_agent(&model, &ledger);
            let mut result = agent.run("go").await.unwrap();
            let mut approved = HashSet::new();
            let mut rejected = HashSet::new();
            let mut round = 0;
            while result.is_paused() {
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
                result = agent.resume(&state, decisions).await.unwrap();
                round += 1;
            }
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
                    CallKind::Gated if approved.contains(id) => assert_eq!(n, 1, "approved {id} runs exactly once"),
                    CallKind::Gated => {
                        assert!(rejected.contains(id));
                        assert_eq!(n, 0, "rejected {id} never runs");
                    }
                }
            }
        });
    }
}
