//! What people read and what a model reads when something fails: `Display` is for people and
//! logs (lowercase, no advice); `AgentError::model_message` is what a model reads, made in one
//! place and pinned here by a golden file, so a rewording of either is a visible change.

use std::error::Error as _;

use phaseo_agent::limits::{Limit, LimitExceeded};
use phaseo_agent::serde_json::{Map, Value};
use phaseo_agent::{Agent, AgentError, ModelError, ScriptedModel, StoreError};

use crate::support::golden::{compare_with_golden, golden_path};

/// One error of every variant of `AgentError`, with the values a test can recognise.
fn one_of_each() -> Vec<(&'static str, AgentError)> {
    let ids = || vec!["call_1".to_string(), "call_2".to_string()];
    vec![
        ("Tool", AgentError::tool("ticket 42 does not exist")),
        ("UnknownTool", AgentError::UnknownTool("fly".into())),
        (
            "InvalidInput",
            AgentError::InvalidInput("/city: \"city\" is a required property".into()),
        ),
        (
            "InvalidOutput",
            AgentError::InvalidOutput("/total: -1 is less than the minimum of 0".into()),
        ),
        (
            "InvalidEvent",
            AgentError::InvalidEvent("/percent: 120 is greater than the maximum of 100".into()),
        ),
        (
            "Timeout",
            AgentError::Timeout {
                tool: "deploy".into(),
                ms: 1500,
            },
        ),
        (
            "Cancelled",
            AgentError::Cancelled {
                tool: "deploy".into(),
                by: "call_9".into(),
            },
        ),
        (
            "Panicked",
            AgentError::Panicked {
                tool: "deploy".into(),
                message: "index out of bounds".into(),
            },
        ),
        (
            "InvalidTool",
            AgentError::InvalidTool {
                tool: "deploy".into(),
                reason: "bad id".into(),
            },
        ),
        ("InvalidAgent", AgentError::InvalidAgent("no model".into())),
        (
            "MissingDecision",
            AgentError::MissingDecision { call_ids: ids() },
        ),
        (
            "NotPending",
            AgentError::NotPending {
                call_id: "call_3".into(),
                pending: ids(),
            },
        ),
        (
            "DecisionMismatch",
            AgentError::DecisionMismatch {
                call_id: "call_1".into(),
                decision: "approve",
                kind: "external",
                hint: "send its output",
            },
        ),
        (
            "DuplicateDecision",
            AgentError::DuplicateDecision("call_1".into()),
        ),
        (
            "NotPaused",
            AgentError::NotPaused {
                run_id: "run_1".into(),
                status: "completed".into(),
            },
        ),
        (
            "NotFailed",
            AgentError::NotFailed {
                run_id: "run_1".into(),
                status: "paused".into(),
            },
        ),
        (
            "NotCompleted",
            AgentError::NotCompleted {
                run_id: "run_1".into(),
                status: "failed".into(),
            },
        ),
        (
            "WrongAgent",
            AgentError::WrongAgent {
                expected: "billing".into(),
                found: "support".into(),
            },
        ),
        (
            "InvalidState",
            AgentError::InvalidState("missing field `messages`".into()),
        ),
        (
            "UnsupportedStateVersion",
            AgentError::UnsupportedStateVersion {
                found: 9,
                supported: 1,
            },
        ),
        (
            "StateSignature",
            AgentError::StateSignature("the signature does not match".into()),
        ),
        ("MaxTurnsExceeded", AgentError::MaxTurnsExceeded(10)),
        (
            "Model",
            AgentError::Model(ModelError::from_status(503, "busy")),
        ),
        (
            "LimitExceeded",
            AgentError::LimitExceeded(LimitExceeded::new(Limit::ResponseBytes, 1024)),
        ),
        (
            "WrongRun",
            AgentError::WrongRun {
                expected: "run_1".into(),
                found: "run_2".into(),
            },
        ),
        (
            "WrongTool",
            AgentError::WrongTool {
                call_id: "call_1".into(),
                expected: "deploy".into(),
                found: "refund".into(),
            },
        ),
        (
            "TooManyToolCalls",
            AgentError::TooManyToolCalls {
                count: 70,
                limit: 64,
            },
        ),
        (
            "Store",
            AgentError::Store(StoreError::NotFound {
                run_id: "run_1".into(),
            }),
        ),
    ]
}

#[test]
fn what_the_model_reads_of_every_error_is_pinned() {
    let texts: Map<String, Value> = one_of_each()
        .into_iter()
        .map(|(name, error)| (name.to_string(), Value::String(error.model_message())))
        .collect();
    compare_with_golden(
        &golden_path("errors/model_messages.json"),
        &Value::Object(texts),
        "error_texts",
    );
}

#[test]
fn the_model_reads_an_error_as_its_json_content() {
    // The shape of a failed call's result, whatever the error: {"error": model_message}.
    let error = AgentError::UnknownTool("fly".into());
    assert_eq!(error.model_message(), "Unknown tool: fly");
    assert_ne!(
        error.model_message(),
        error.to_string(),
        "people and the model read apart"
    );
}

#[test]
fn messages_for_people_are_lowercase() {
    for (name, error) in one_of_each() {
        if name == "Tool" || name == "Store" || name == "LimitExceeded" {
            continue; // the tool's own text; the store's and the limit's messages are their types'
        }
        let text = error.to_string();
        let first = text.chars().next().expect("a message");
        assert!(!first.is_uppercase(), "{name}: {text}");
    }
}

#[tokio::test]
async fn a_failed_run_is_told_once_by_an_error_report() {
    // An error report (anyhow's `{:#}`, eyre) prints an error and then each of its sources: a
    // wrapper that displays its inner error and also returns it as its source prints it twice.
    let agent = Agent::builder("t")
        .model(ScriptedModel::new())
        .build()
        .unwrap();
    let failed = agent.run("hello").await.unwrap_err();
    let mut chain = vec![failed.to_string()];
    let mut source = failed.source();
    while let Some(error) = source {
        chain.push(error.to_string());
        source = error.source();
    }
    for (i, outer) in chain.iter().enumerate() {
        for inner in &chain[i + 1..] {
            assert!(!outer.contains(inner.as_str()), "told twice: {chain:?}");
        }
    }
}
