//! The agent loop: tools, typed tools, context, models, events, errors, turn limit.

use crate::support::agent::{
    Counter, object_schema, result_ids, result_of, status_tool, tool_results,
};
use futures::StreamExt;
use phaseo_agent::{
    Agent, AgentError, AgentErrorKind, Event, Message, ModelResponse, RunStatus, ScriptedModel,
    Tool, ToolCall, ToolContext,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[tokio::test]
async fn a_tool_call_runs_and_its_result_reaches_the_next_turn() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "get_status", json!({"service": "api"}))
        .text("The API is healthy.");
    let agent = Agent::builder("ops")
        .instructions("Answer about services.")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();

    let result = agent.run("Is the API up?").await.unwrap();

    assert_eq!(result.status(), RunStatus::Completed);
    assert_eq!(result.output(), Some("The API is healthy."));
    assert_eq!(runs.get(), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].instructions, "Answer about services.");
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[0].tools[0].name, "get_status");
    assert_eq!(
        requests[0].tools[0].parameters["required"],
        json!(["service"])
    );
    assert_eq!(
        result_of(&requests[1], "call_1"),
        json!({"service": "api", "status": "healthy"})
    );
}

#[tokio::test]
async fn results_reach_the_model_in_call_order() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "get_status", json!({"service": "a"})),
            ToolCall::new("c2", "get_status", json!({"service": "b"})),
            ToolCall::new("c3", "get_status", json!({"service": "c"})),
        ])
        .text("ok");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    agent.run("check").await.unwrap();
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["c1", "c2", "c3"]);
}

#[tokio::test]
async fn an_async_tool_sees_its_context() {
    let tool = Tool::new(
        "whoami",
        "Report the run's context",
        json!({"type": "object", "properties": {}}),
        |_input, ctx: ToolContext| async move {
            Ok(json!({
                "run_id": ctx.run_id(),
                "agent_id": ctx.agent_id(),
                "step_index": ctx.step_index(),
                "tenant": ctx.context()["tenant"],
                "call_id": ctx.tool_call().id,
                "tool": ctx.tool_call().name,
            }))
        },
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "whoami", json!({}))
        .tool_call("call_2", "whoami", json!({}))
        .text("done");
    let agent = Agent::builder("support")
        .model(model.clone())
        .tool(tool)
        .build()
        .unwrap();
    agent
        .run("hi")
        .context(json!({"tenant": "acme"}))
        .run_id("run-42")
        .await
        .unwrap();
    let last = &model.requests()[2];
    assert_eq!(
        result_of(last, "call_2"),
        json!({"run_id": "run-42", "agent_id": "support", "step_index": 1, "tenant": "acme", "call_id": "call_2", "tool": "whoami"})
    );
    assert_eq!(result_of(last, "call_1")["step_index"], 0);
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

#[derive(Serialize)]
struct Sum {
    sum: i64,
}

#[tokio::test]
async fn a_typed_tool_advertises_its_generated_schema_and_decodes_its_input() {
    let add = Tool::typed(
        "add",
        "Add two integers",
        |input: Add, _ctx: ToolContext| async move {
            Ok::<_, AgentError>(Sum {
                sum: input.a + input.b,
            })
        },
    );
    assert_eq!(
        add.parameters(),
        &json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "int64", "description": "The first addend."},
                "b": {"type": "integer", "format": "int64", "description": "The second addend."}
            },
            "required": ["a", "b"]
        })
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c", "add", json!({"a": 2, "b": 40}))
        .text("42");
    let agent = Agent::builder("calc")
        .model(model.clone())
        .tool(add)
        .build()
        .unwrap();
    agent.run("2+40?").await.unwrap();
    assert_eq!(result_of(&model.requests()[1], "c"), json!({"sum": 42}));
}

#[tokio::test]
async fn a_typed_tool_with_no_parameters_advertises_an_empty_object() {
    #[derive(Deserialize, schemars::JsonSchema)]
    struct NoArgs {}
    let now = Tool::typed("now", "The time", |_: NoArgs, _ctx: ToolContext| async {
        Ok::<_, AgentError>("noon")
    });
    assert_eq!(
        now.parameters(),
        &json!({"type": "object", "properties": {}})
    );
    let unit = Tool::typed("ping", "Ping", |_: (), _ctx: ToolContext| async {
        Ok::<_, AgentError>("pong")
    });
    assert_eq!(
        unit.parameters(),
        &json!({"type": "object", "properties": {}})
    );

    // Models send "" for "no arguments": it means {}.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::raw("c1", "now", ""),
            ToolCall::raw("c2", "ping", "  "),
        ])
        .text("ok");
    let agent = Agent::builder("clock")
        .model(model.clone())
        .tool(now)
        .tool(unit)
        .build()
        .unwrap();
    agent.run("time?").await.unwrap();
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!("noon"));
    assert_eq!(result_of(req, "c2"), json!("pong"));
}

#[tokio::test]
async fn a_blocking_typed_tool_runs_off_the_async_workers() {
    // A current-thread runtime runs every task on this thread: a tool that ran inline would see it.
    let runtime_thread = std::thread::current().id();
    let tool = Tool::typed(
        "slow_add",
        "Add slowly",
        move |input: Add, _ctx: ToolContext| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            if std::thread::current().id() == runtime_thread {
                return Err("ran on the runtime's thread");
            }
            Ok(Sum {
                sum: input.a + input.b,
            })
        },
    );
    let json_tool = Tool::new(
        "blocking_json",
        "Blocks",
        json!({"type": "object"}),
        move |_, _| Ok(json!(std::thread::current().id() != runtime_thread)),
    );
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c", "slow_add", json!({"a": 1, "b": 2})),
            ToolCall::new("j", "blocking_json", json!({})),
        ])
        .text("3");
    let agent = Agent::builder("calc")
        .model(model.clone())
        .tool(tool)
        .tool(json_tool)
        .build()
        .unwrap();
    agent.run("1+2").await.unwrap();
    let request = &model.requests()[1];
    assert_eq!(result_of(request, "c"), json!({"sum": 3}));
    assert_eq!(result_of(request, "j"), json!(true));
}

#[tokio::test]
async fn an_executor_error_goes_back_to_the_model_and_the_run_goes_on() {
    let failing = Tool::new(
        "fetch",
        "Fetch a ticket",
        object_schema(json!({"id": {"type": "string"}}), &["id"]),
        |input, _| {
            Err(AgentError::tool(format!(
                "ticket {} does not exist",
                input["id"].as_str().unwrap_or("?")
            )))
        },
    );
    let typed = Tool::typed("typed_fail", "Fails", |_: Add, _ctx: ToolContext| async {
        Err::<Sum, _>("the adder is broken")
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "fetch", json!({"id": "T-1"})),
            ToolCall::new("c2", "typed_fail", json!({"a": 1, "b": 1})),
        ])
        .text("Sorry, no such ticket.");
    let agent = Agent::builder("support")
        .model(model.clone())
        .tool(failing)
        .tool(typed)
        .build()
        .unwrap();
    let result = agent.run("Get T-1").await.unwrap();
    assert_eq!(result.output(), Some("Sorry, no such ticket."));
    let req = &model.requests()[1];
    assert_eq!(
        result_of(req, "c1"),
        json!({"error": "ticket T-1 does not exist"})
    );
    assert_eq!(
        result_of(req, "c2"),
        json!({"error": "the adder is broken"})
    );
    assert!(result.state.steps().iter().all(|s| s.is_error));
}

#[tokio::test]
async fn an_unknown_tool_fails_the_run() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "launch_rockets", json!({}))
        .text("unreachable");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err, AgentError::UnknownTool("launch_rockets".into()));
    assert_eq!(err.to_string(), "unknown tool `launch_rockets`");
    assert_eq!(
        model.requests().len(),
        1,
        "the run stops at the unknown call"
    );
}

/// Every kind of bad argument is answered to the model with what is wrong and where, before any tool
/// code runs.
#[tokio::test]
async fn bad_arguments_are_answered_with_path_and_reason_and_never_run_the_tool() {
    let runs = Counter::default();
    let typed_runs = Counter::default();
    let typed_counter = typed_runs.clone();
    let typed = Tool::typed("add", "Add", move |input: Add, _ctx: ToolContext| {
        typed_counter.bump();
        async move {
            Ok::<_, AgentError>(Sum {
                sum: input.a + input.b,
            })
        }
    });
    let cases = [
        (
            "bad_json",
            "get_status",
            r#"{"service": "api""#,
            "$: arguments are not valid JSON",
        ),
        (
            "not_object",
            "get_status",
            r#"["api"]"#,
            r#"$: ["api"] is not of type "object""#,
        ),
        (
            "wrong_type",
            "get_status",
            r#"{"service": 7}"#,
            r#"$.service: 7 is not of type "string""#,
        ),
        (
            "missing",
            "get_status",
            r#"{}"#,
            r#"$: "service" is a required property"#,
        ),
        (
            "typed_wrong_type",
            "add",
            r#"{"a": 1, "b": "two"}"#,
            r#"$.b: "two" is not of type "integer""#,
        ),
        (
            "typed_missing",
            "add",
            r#"{"a": 1}"#,
            r#"$: "b" is a required property"#,
        ),
        (
            "typed_bad_json",
            "add",
            "{a: 1}",
            "$: arguments are not valid JSON",
        ),
    ];
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls(
            cases
                .iter()
                .map(|(id, tool, args, _)| ToolCall::raw(*id, *tool, *args)),
        )
        .text("I will fix my arguments.");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .tool(typed)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.status(), RunStatus::Completed);
    assert_eq!(runs.get(), 0);
    assert_eq!(typed_runs.get(), 0);
    let req = &model.requests()[1];
    for (id, _, _, expected) in cases {
        let error = result_of(req, id)["error"].as_str().unwrap().to_owned();
        assert!(error.starts_with("Invalid tool input: "), "{id}: {error}");
        assert!(
            error.contains(expected),
            "{id}: `{error}` should contain `{expected}`"
        );
    }
}

#[tokio::test]
async fn no_argument_text_from_a_model_panics_the_runtime() {
    let runs = Counter::default();
    let texts = [
        "",
        "null",
        "1",
        "\"s\"",
        "[]",
        "{",
        "}",
        "{\"service\": null}",
        "\u{0}",
        "{\"service\":\"\\ud800\"}",
        &"[".repeat(10_000),
    ];
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| ToolCall::raw(format!("c{i}"), "get_status", *t)),
        )
        .text("ok");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.status(), RunStatus::Completed);
    assert_eq!(runs.get(), 0, "none of these is a valid call");
    assert_eq!(tool_results(&model.requests()[1]).len(), texts.len());
}

#[tokio::test]
async fn the_turn_limit_stops_a_model_that_never_finishes() {
    let runs = Counter::default();
    let mut model = ScriptedModel::new().record_requests();
    for i in 0..10 {
        model = model.tool_call(&format!("c{i}"), "get_status", json!({"service": "api"}));
    }
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .max_turns(3)
        .build()
        .unwrap();
    let err = agent.run("loop").await.unwrap_err();
    assert_eq!(err, AgentError::MaxTurnsExceeded(3));
    assert!(err.to_string().contains("after 3 turns"));
    assert_eq!(model.requests().len(), 3);
    assert_eq!(runs.get(), 3);
}

#[tokio::test]
async fn a_model_error_fails_the_run() {
    let agent = Agent::builder("ops")
        .model(ScriptedModel::new().record_requests())
        .build()
        .unwrap();
    let err = agent.run("hello").await.unwrap_err();
    assert!(matches!(err.error, AgentError::Model(_)), "{err}");
}

#[tokio::test]
async fn building_rejects_bad_definitions() {
    let no_model = Agent::builder("x").build().err().unwrap();
    assert!(no_model.to_string().contains("has no model"));

    let bad_id = Tool::new("bad id!", "desc", json!({"type": "object"}), |v, _| Ok(v));
    let err = Agent::builder("x")
        .model(ScriptedModel::new().record_requests())
        .tool(bad_id)
        .build()
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("must be 1 to 64 characters"),
        "{err}"
    );

    let bad_schema = Tool::new(
        "t",
        "desc",
        json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}),
        |v, _| Ok(v),
    );
    let err = Agent::builder("x")
        .model(ScriptedModel::new().record_requests())
        .tool(bad_schema)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("does not compile"), "{err}");

    let dup = || Tool::new("t", "desc", json!({"type": "object"}), |v, _| Ok(v));
    let err = Agent::builder("x")
        .model(ScriptedModel::new().record_requests())
        .tool(dup())
        .tool(dup())
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("unique"), "{err}");

    let wrong_approval = Tool::typed("add", "Add", |i: Add, _ctx: ToolContext| async move {
        Ok::<_, AgentError>(Sum { sum: i.a + i.b })
    })
    .approval(|_: &Value, _| true);
    let err = Agent::builder("x")
        .model(ScriptedModel::new().record_requests())
        .tool(wrong_approval)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("approval function takes"), "{err}");
}

#[tokio::test]
async fn the_event_stream_tells_the_run_in_order() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .turn(ModelResponse::new(
            Some("Checking.".into()),
            [ToolCall::new("c1", "get_status", json!({"service": "api"}))],
        ))
        .text("Healthy.");
    let agent = Agent::builder("ops")
        .model(model)
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("up?").stream().collect().await;
    let names: Vec<&str> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "run.started",
            "model.turn",
            "tool.called",
            "tool.result",
            "model.turn",
            "run.completed"
        ]
    );
    assert!(
        matches!(&events[3], Event::ToolResult { call_id, content, .. }
        if call_id == "c1" && content.contains("healthy"))
    );
    let Event::Completed { output, state, .. } = &events[5] else {
        panic!("the last event is run.completed")
    };
    assert_eq!(output, "Healthy.");
    assert_eq!(
        state.steps().len(),
        1,
        "the final state comes with the event"
    );
}

#[tokio::test]
async fn the_event_stream_reports_tool_errors_and_failures() {
    let failing = Tool::new("f", "Fails", json!({"type": "object"}), |_, _| {
        Err(AgentError::tool("boom"))
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "f", json!({}))
        .tool_call("c2", "nope", json!({}));
    let agent = Agent::builder("ops")
        .model(model)
        .tool(failing)
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("go").stream().collect().await;
    let names: Vec<&str> = events.iter().map(Event::name).collect();
    assert_eq!(
        names,
        [
            "run.started",
            "model.turn",
            "tool.called",
            "tool.error",
            "model.turn",
            "run.failed"
        ]
    );
    assert!(
        matches!(&events[3], Event::ToolError { error, content: Some(c), .. } if error == "boom" && c.contains("boom"))
    );
    assert!(
        matches!(&events[5], Event::Failed { kind: AgentErrorKind::UnknownTool, error, state, .. } if error == "unknown tool `nope`" && state.status() == RunStatus::Failed)
    );
}

#[tokio::test]
async fn the_conversation_is_kept_in_the_state() {
    let runs = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "get_status", json!({"service": "api"}))
        .text("fine");
    let agent = Agent::builder("ops")
        .model(model)
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let result = agent.run("up?").await.unwrap();
    let roles: Vec<&str> = result
        .state
        .messages()
        .iter()
        .map(|m| match m {
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::Tool { .. } => "tool",
        })
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert_eq!(result.state.turns(), 2);
}

#[tokio::test]
async fn a_turn_with_repeated_call_ids_is_refused_and_empty_ids_are_filled_in() {
    let runs = Counter::default();
    let model = ScriptedModel::new().record_requests().tool_calls([
        ToolCall::new("same", "get_status", json!({"service": "a"})),
        ToolCall::new("same", "get_status", json!({"service": "b"})),
    ]);
    let agent = Agent::builder("ops")
        .model(model)
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert!(
        err.to_string().contains("tool call id `same` twice"),
        "{err}"
    );
    assert_eq!(runs.get(), 0);

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("", "get_status", json!({"service": "a"})),
            ToolCall::new("", "get_status", json!({"service": "b"})),
        ])
        .text("ok");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status_tool(&runs))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["call_0_0", "call_0_1"]);
}

#[tokio::test]
async fn a_typed_input_that_is_not_an_object_is_refused_when_the_agent_is_built() {
    #[derive(Deserialize, schemars::JsonSchema)]
    enum Colour {
        Red,
        Green,
    }
    let tool = Tool::typed(
        "paint",
        "Paint",
        |c: Colour, _ctx: ToolContext| async move {
            Ok::<_, AgentError>(matches!(c, Colour::Red | Colour::Green))
        },
    );
    let err = Agent::builder("t")
        .model(ScriptedModel::new().record_requests())
        .tool(tool)
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("is not a JSON object"), "{err}");
    let scalar = Tool::typed("count", "Count", |n: u32, _ctx: ToolContext| async move {
        Ok::<_, AgentError>(n)
    });
    let err = Agent::builder("t")
        .model(ScriptedModel::new().record_requests())
        .tool(scalar)
        .build()
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains(r#"its schema's type is "integer""#),
        "{err}"
    );
}
