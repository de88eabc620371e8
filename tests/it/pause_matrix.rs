//! One call, one coherent pause: every combination of a tool's gate (`require_approval`, a per-call
//! approval function), an agent-level rule, the agent's `human_review`, an interactive hook
//! (`on_tool_called`) and an external tool, run through the loop and checked against the documented
//! order (see `Decision` and the crate docs):
//!
//! 1. approval (the tool's gate or the agent's rule) pauses as `tool_approval`; an approved call
//!    skips the review (a person already looked at it);
//! 2. otherwise `human_review` pauses as `hitl`; approving it runs the call;
//! 3. the interactive hook answers, or defers to a person (`hitl`, for the output);
//! 4. an external tool pauses for its output (`external_output`);
//! 5. otherwise the tool runs.
//!
//! So a call asks a person at most once whether it may run; a second pause asks for its output.

use crate::support::agent::Counter;
use phaseo_agent::{
    Agent, Decision, Decisions, PendingKind, RunStatus, ScriptedModel, Tool, ToolCall, ToolContext,
};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Gate {
    None,
    Always,
    FnYes,
    FnNo,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    None,
    Yes,
    No,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Hook {
    None,
    Answers,
    Defers,
}

#[derive(Debug, Clone, Copy)]
struct Combo {
    gate: Gate,
    rule: Rule,
    review: bool,
    hook: Hook,
    external: bool,
}

fn combos() -> Vec<Combo> {
    let mut out = Vec::new();
    for gate in [Gate::None, Gate::Always, Gate::FnYes, Gate::FnNo] {
        for rule in [Rule::None, Rule::Yes, Rule::No] {
            for review in [false, true] {
                for hook in [Hook::None, Hook::Answers, Hook::Defers] {
                    for external in [false, true] {
                        out.push(Combo {
                            gate,
                            rule,
                            review,
                            hook,
                            external,
                        });
                    }
                }
            }
        }
    }
    out
}

fn tool(combo: Combo, runs: &Counter) -> Tool {
    let schema = json!({"type": "object"});
    let runs = runs.clone();
    let mut tool = if combo.external {
        Tool::external("t", "A tool", schema)
    } else {
        Tool::new("t", "A tool", schema, move |_, _| {
            runs.bump();
            Ok(json!("ran"))
        })
    };
    tool = match combo.gate {
        Gate::None => tool,
        Gate::Always => tool.require_approval(),
        Gate::FnYes => tool.approval(|_: &Value, _| true),
        Gate::FnNo => tool.approval(|_: &Value, _| false),
    };
    match combo.hook {
        Hook::None => tool,
        Hook::Answers => tool.on_tool_called(|_, _| Some(json!("hooked"))),
        Hook::Defers => tool.on_tool_called(|_, _| None),
    }
}

fn agent(combo: Combo, runs: &Counter, model: ScriptedModel) -> Agent {
    let mut builder = Agent::builder("matrix")
        .model(model)
        .tool(tool(combo, runs));
    builder = match combo.rule {
        Rule::None => builder,
        Rule::Yes => builder.approval(|_: &ToolCall, _: &ToolContext| true),
        Rule::No => builder.approval(|_: &ToolCall, _: &ToolContext| false),
    };
    if combo.review {
        builder = builder.human_review(|_, _| true);
    }
    builder.build().unwrap()
}

/// The documented order: the pauses a call goes through (each answered "yes"), and whether the
/// tool's own code runs.
fn expected(c: Combo) -> (Vec<PendingKind>, bool) {
    let gated = matches!(c.gate, Gate::Always | Gate::FnYes) || c.rule == Rule::Yes;
    let mut kinds = Vec::new();
    if gated {
        kinds.push(PendingKind::ToolApproval);
    } else if c.review {
        kinds.push(PendingKind::Hitl);
        return (kinds, !c.external);
    }
    match c.hook {
        Hook::Answers => return (kinds, false),
        Hook::Defers => {
            kinds.push(PendingKind::Hitl);
            return (kinds, !c.external);
        }
        Hook::None => {}
    }
    if c.external {
        kinds.push(PendingKind::ExternalOutput);
        return (kinds, false);
    }
    (kinds, true)
}

/// Runs one call, answering every pause "yes" (approve; or supply an output where the call cannot
/// run), and returns the pauses it went through and whether the tool ran.
async fn observed(combo: Combo) -> (Vec<PendingKind>, bool) {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = agent(combo, &runs, model);
    let mut result = agent.run("go").await.unwrap();
    let mut kinds = Vec::new();
    while result.status() == RunStatus::WaitingForHuman {
        let pending = &result.pending()[0];
        kinds.push(pending.kind);
        assert!(kinds.len() <= 3, "{combo:?} keeps pausing: {kinds:?}");
        let decision = match pending.kind {
            PendingKind::ToolApproval => Decision::Approve,
            PendingKind::Hitl if !combo.external => Decision::Approve,
            _ => Decision::Output {
                output: json!("supplied"),
            },
        };
        let decisions = Decisions::new().decide("c1", decision);
        result = agent.resume(&result.state, decisions).await.unwrap();
    }
    assert_eq!(result.output(), Some("done"), "{combo:?}");
    (kinds, runs.get() == 1)
}

#[tokio::test]
async fn every_combination_pauses_in_the_documented_order_and_asks_to_run_at_most_once() {
    let all = combos();
    assert_eq!(all.len(), 144);
    let mut wrong = Vec::new();
    for combo in all {
        let (kinds, ran) = observed(combo).await;
        let asks_to_run = kinds
            .iter()
            .filter(|k| **k == PendingKind::ToolApproval)
            .count()
            + usize::from(combo.review && kinds.first() == Some(&PendingKind::Hitl));
        assert!(
            asks_to_run <= 1,
            "{combo:?} asked twice whether it may run: {kinds:?}"
        );
        if (kinds.clone(), ran) != expected(combo) {
            wrong.push(format!(
                "{combo:?}: got {kinds:?} ran={ran}, documented {:?}",
                expected(combo)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn an_approved_call_is_not_reviewed_again() {
    let runs = Counter::default();
    let combo = Combo {
        gate: Gate::Always,
        rule: Rule::None,
        review: true,
        hook: Hook::None,
        external: false,
    };
    let model = ScriptedModel::new()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = agent(combo, &runs, model);
    let paused = agent.run("go").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    let done = agent
        .resume(&paused.state, Decisions::new().approve("c1"))
        .await
        .unwrap();
    assert_eq!(
        done.status(),
        RunStatus::Completed,
        "the approval was the review"
    );
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn approve_always_covers_the_review_of_later_calls_of_the_same_tool() {
    let runs = Counter::default();
    let combo = Combo {
        gate: Gate::Always,
        rule: Rule::None,
        review: true,
        hook: Hook::None,
        external: false,
    };
    let model = ScriptedModel::new()
        .tool_call("c1", "t", json!({}))
        .tool_call("c2", "t", json!({}))
        .text("done");
    let agent = agent(combo, &runs, model);
    let paused = agent.run("go").await.unwrap();
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().decide("c1", Decision::ApproveAlways),
        )
        .await
        .unwrap();
    assert_eq!(
        done.status(),
        RunStatus::Completed,
        "c2 ran without asking: {:?}",
        done.pending()
    );
    assert_eq!(runs.get(), 2);
}
