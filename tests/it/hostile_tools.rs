//! Tools under hostile conditions: user code that panics anywhere it runs, a deadline a blocking tool
//! overruns, an output too deep to serialise, and hand-written schemas that are not objects.

use std::time::Duration;

use crate::support::agent::Counter;
use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext, TurnParams};
use serde_json::{Value, json};

fn echo(id: &str) -> Tool {
    Tool::new(
        id,
        "Echoes its input",
        json!({"type": "object"}),
        |input, _| Ok(input),
    )
}

/// Runs one call of `tool` with `args` through an agent and returns the result text the model saw.
async fn result_of(tool: Tool, args: Value) -> String {
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", tool.id(), args)
        .text("done");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let done = agent.run("go").await.unwrap();
    done.state.tool_result("c1").unwrap().to_string()
}

#[tokio::test]
async fn a_result_that_arrives_after_the_deadline_is_a_timeout() {
    // The tool blocks its thread past its deadline and only then returns: the deadline was never
    // polled while it blocked, but the result is still late.
    let tool = Tool::new("slow", "Blocks", json!({"type": "object"}), |_, _| async {
        std::thread::sleep(Duration::from_millis(300));
        Ok(json!("too late"))
    })
    .timeout(Duration::from_millis(50));
    let err = tool
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::Timeout {
            tool: "slow".into(),
            ms: 50
        }
    );
}

struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("cleanup failed");
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_whose_future_panics_when_dropped_at_its_deadline_is_a_timeout() {
    let tool = Tool::new("t", "Hangs", json!({"type": "object"}), |_, _| async {
        let _guard = PanicsOnDrop;
        std::future::pending::<()>().await;
        Ok(json!("never"))
    })
    .timeout(Duration::from_millis(10));
    let err = tool
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::Timeout {
            tool: "t".into(),
            ms: 10
        }
    );
}

#[tokio::test]
async fn a_panicking_output_validator_is_a_tool_error() {
    let tool =
        echo("t").output_schema(|_: Value| -> Result<Value, String> { panic!("validator bug") });
    let content = result_of(tool, json!({})).await;
    assert_eq!(content, r#"{"error":"Tool t failed unexpectedly"}"#);
}

#[tokio::test]
async fn a_panicking_input_validator_is_a_tool_error() {
    let tool =
        echo("t").input_schema(|_: Value| -> Result<Value, String> { panic!("validator bug") });
    let content = result_of(tool, json!({})).await;
    assert_eq!(content, r#"{"error":"Tool t failed unexpectedly"}"#);
}

#[tokio::test]
async fn a_panicking_next_turn_function_is_a_tool_error_and_changes_nothing() {
    let runs = Counter::default();
    let counter = runs.clone();
    let tool = Tool::new("t", "Counts", json!({"type": "object"}), move |_, _| {
        counter.bump();
        Ok(json!("ran"))
    })
    .next_turn(|_, _| -> TurnParams { panic!("override bug") });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    let done = agent.run("go").await.unwrap();
    assert_eq!(runs.get(), 1);
    assert_eq!(
        done.state.tool_result("c1"),
        Some(r#"{"error":"Tool t failed unexpectedly"}"#)
    );
    assert_eq!(model.requests()[1].model, None);
}

/// A value nested `depth` arrays deep.
fn nested(depth: usize) -> Value {
    let mut value = json!(0);
    for _ in 0..depth {
        value = Value::Array(vec![value]);
    }
    value
}

#[tokio::test]
async fn an_output_too_deep_to_serialise_is_a_tool_error() {
    let tool = Tool::new(
        "deep",
        "Returns a deep value",
        json!({"type": "object"}),
        |_, _| Ok(nested(100_000)),
    );
    let err = tool
        .invoke("{}", &ToolContext::detached())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidOutput(
            "$: nested too deeply (at most 127 levels of arrays and objects)".into()
        )
    );
}

#[tokio::test]
async fn the_output_depth_limit_is_the_parsers() {
    // 127 levels parse back; 128 do not, so they are refused.
    let tool = |depth| {
        Tool::new(
            "deep",
            "Returns a deep value",
            json!({"type": "object"}),
            move |_, _| Ok(nested(depth)),
        )
    };
    let ctx = ToolContext::detached();
    let out = tool(127).invoke("{}", &ctx).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), nested(127));
    assert!(serde_json::from_str::<Value>(&nested(128).to_string()).is_err());
    assert!(matches!(
        tool(128).invoke("{}", &ctx).await,
        Err(AgentError::InvalidOutput(_))
    ));
}

#[test]
fn progress_and_context_too_deep_to_store_are_refused() {
    // The state nests them a few levels deep and must parse back: at most 120 levels.
    let ctx = ToolContext::detached();
    assert!(matches!(
        ctx.emit_progress(nested(121)),
        Err(AgentError::InvalidEvent(_))
    ));
    assert!(ctx.set_context(nested(121)).is_err());
    assert!(ctx.progress().is_empty() && ctx.context_update().is_none());
    ctx.emit_progress(nested(120)).unwrap();
    ctx.set_context(nested(120)).unwrap();
}

#[test]
fn a_hand_written_schema_whose_root_is_not_an_object_is_refused_at_build() {
    for schema in [
        json!({"type": "array"}),
        json!({"type": ["object", "null"]}),
        json!(true),
    ] {
        let tool = Tool::new("t", "A tool", schema.clone(), |input, _| Ok(input));
        let built = Agent::builder("a")
            .model(ScriptedModel::new().record_requests())
            .tool(tool)
            .build();
        let Err(err) = built else {
            panic!("{schema} was accepted")
        };
        assert!(
            matches!(err, AgentError::InvalidTool { .. }),
            "{schema}: {err}"
        );
        assert!(err.to_string().contains("object"), "{err}");
    }
}

#[tokio::test]
async fn a_hand_written_schema_without_a_root_type_only_takes_objects() {
    let tool = Tool::new(
        "t",
        "A tool",
        json!({"properties": {"n": {"type": "integer"}}}),
        |input, _| Ok(input),
    );
    assert_eq!(
        tool.parameters()["type"],
        "object",
        "the advertised schema says so too"
    );
    let ctx = ToolContext::detached();
    for args in ["[1, 2]", "null", "5", r#""text""#] {
        let err = tool.invoke(args, &ctx).await.unwrap_err();
        assert!(matches!(err, AgentError::InvalidInput(_)), "{args}: {err}");
    }
    assert_eq!(
        tool.invoke(r#"{"n": 1}"#, &ctx).await.unwrap(),
        r#"{"n":1}"#
    );
}

#[tokio::test]
async fn a_panicking_on_response_received_refuses_the_decision_and_changes_nothing() {
    let tool = Tool::external("t", "Answered from outside", json!({"type": "object"}))
        .on_response_received(|_: Value| -> Result<Value, String> { panic!("transform bug") });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "t", json!({}))
        .text("done");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let paused = agent.run("go").await.unwrap();
    let before = paused.state.to_json();
    let decisions = phaseo_agent::Decisions::new().output("c1", json!("supplied"));
    let err = agent.resume(&paused.state, decisions).await.unwrap_err();
    assert!(
        matches!(err.error, AgentError::Panicked { ref tool, .. } if tool == "t"),
        "{err}"
    );
    assert_eq!(paused.state.to_json(), before);
}
