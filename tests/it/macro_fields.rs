//! The fields of a tool (see `docs/reference.md`) as `#[tool(...)]` keys, each through the agent
//! loop on a scripted model: `timeout_ms`, `on_error`, `exclusive`, `max_output_chars`, the
//! validators (`input_schema`, `output_schema`, `event_schema`), the interactive hooks
//! (`on_tool_called`, `on_response_received`), `next_turn`, and `require_approval` with a function
//! of the context.

use std::time::Duration;

use crate::support::agent::{result_ids, result_of, tool_results};
use phaseo_agent::{
    Agent, AgentError, Decisions, Event, IntoTool, OnError, PendingKind, ScriptedModel, ToolCall,
    ToolContext, TurnParams, tool,
};
use serde_json::{Value, json};

#[tokio::test(start_paused = true)]
async fn timeout_ms_abandons_a_call_at_its_deadline() {
    /// Sleep for `ms` milliseconds.
    #[tool(timeout_ms = 50)]
    async fn nap(ms: u64) -> String {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        format!("slept {ms}ms")
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("slow", "nap", json!({"ms": 10_000})),
            ToolCall::new("fast", "nap", json!({"ms": 49})),
        ])
        .text("moved on");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(nap)
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(agent.run("go").await.unwrap().output(), Some("moved on"));
    assert!(started.elapsed() < Duration::from_millis(200));
    let request = &model.requests()[1];
    assert_eq!(
        result_of(request, "slow"),
        json!({"error": "Tool nap timed out after 50ms"})
    );
    assert_eq!(result_of(request, "fast"), json!("slept 49ms"));
}

#[tokio::test(start_paused = true)]
async fn timeout_ms_overrides_the_agents_default() {
    /// Sleep for `ms` milliseconds.
    #[tool(timeout_ms = 1_000)]
    async fn nap(ms: u64) -> u64 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ms
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "nap", json!({"ms": 500}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(nap)
        .default_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(result_of(&model.requests()[1], "c1"), json!(500));
}

#[tokio::test]
async fn on_error_fail_run_fails_the_run_with_the_tools_error() {
    /// Reach the database.
    #[tool(on_error = "fail-run")]
    fn query() -> Result<String, String> {
        Err("database unreachable".to_owned())
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "query", json!({}))
        .text("unreachable");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(query)
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert_eq!(err, AgentError::Tool("database unreachable".into()));
    assert_eq!(model.requests().len(), 1, "the model was not asked again");
}

#[tokio::test]
async fn on_error_return_to_model_overrides_an_agent_that_fails_runs() {
    /// Reach the database.
    #[tool(on_error = "return-to-model")]
    async fn query() -> Result<String, String> {
        Err("database unreachable".to_owned())
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "query", json!({}))
        .text("recovered");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(query)
        .on_error(OnError::FailRun)
        .build()
        .unwrap();
    assert_eq!(agent.run("go").await.unwrap().output(), Some("recovered"));
    assert_eq!(
        result_of(&model.requests()[1], "c1"),
        json!({"error": "database unreachable"})
    );
}

#[tokio::test(start_paused = true)]
async fn exclusive_runs_a_call_alone() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RUNNING: AtomicUsize = AtomicUsize::new(0);
    static MOST: AtomicUsize = AtomicUsize::new(0);
    static BESIDE_MIGRATE: AtomicUsize = AtomicUsize::new(usize::MAX);

    /// Sleep for 50 ms.
    #[tool]
    async fn nap() {
        let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
        MOST.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }

    /// Run a migration.
    #[tool(exclusive)]
    async fn migrate() -> &'static str {
        BESIDE_MIGRATE.store(RUNNING.load(Ordering::SeqCst), Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        BESIDE_MIGRATE.fetch_max(RUNNING.load(Ordering::SeqCst), Ordering::SeqCst);
        "migrated"
    }

    let mut turn: Vec<ToolCall> = (0..3)
        .map(|i| ToolCall::new(format!("c{i}"), "nap", json!({})))
        .collect();
    turn.push(ToolCall::new("m", "migrate", json!({})));
    turn.extend((3..6).map(|i| ToolCall::new(format!("c{i}"), "nap", json!({}))));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls(turn)
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(nap)
        .tool(migrate)
        .tool_concurrency(8)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(BESIDE_MIGRATE.load(Ordering::SeqCst), 0, "it ran alone");
    assert_eq!(MOST.load(Ordering::SeqCst), 3, "the others ran together");
    let ids = result_ids(&model.requests()[1]);
    assert_eq!(ids, ["c0", "c1", "c2", "m", "c3", "c4", "c5"]);
}

#[tokio::test]
async fn max_output_chars_cuts_the_result_and_overrides_the_agents_cap() {
    /// Echo a text.
    #[tool(max_output_chars = 9)]
    fn echo(text: String) -> String {
        text
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("long", "echo", json!({"text": "abcdefgh"})),
            ToolCall::new("short", "echo", json!({"text": "abcdefg"})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(echo)
        .max_output_chars(4)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    // The JSON result of "abcdefgh" is `"abcdefgh"`: 10 characters with the quotes.
    assert_eq!(
        tool_results(&model.requests()[1]),
        [
            (
                "long".to_owned(),
                "\"abcd\n[... 1 characters cut ...]\nfgh\"".to_owned()
            ),
            ("short".to_owned(), "\"abcdefg\"".to_owned()),
        ]
    );
}

#[tokio::test]
async fn input_schema_transforms_the_arguments_before_decoding_or_refuses_them() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Search {
        query: String,
    }

    fn trimmed(mut input: Value) -> Result<Value, String> {
        let query = input["query"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if query.is_empty() {
            return Err("query must not be blank".to_owned());
        }
        input["query"] = json!(query);
        Ok(input)
    }

    /// Search tickets.
    #[tool(input_schema = trimmed)]
    fn search(input: Search) -> String {
        format!("[{}]", input.query)
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("ok", "search", json!({"query": "  printer  "})),
            ToolCall::new("blank", "search", json!({"query": "   "})),
            ToolCall::new("schema", "search", json!({"query": 3})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(search)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let request = &model.requests()[1];
    assert_eq!(result_of(request, "ok"), json!("[printer]"));
    assert_eq!(
        result_of(request, "blank"),
        json!({"error": "Invalid tool input: $: query must not be blank"})
    );
    assert_eq!(
        result_of(request, "schema"),
        json!({"error": "Invalid tool input: $.query: 3 is not of type \"string\""}),
        "the parameter schema is still checked first"
    );
}

#[tokio::test]
async fn output_schema_checks_and_transforms_each_result() {
    fn no_negatives(output: Value) -> Result<Value, &'static str> {
        match output.as_i64() {
            Some(n) if n < 0 => Err("the balance cannot be negative"),
            Some(n) => Ok(json!({"balance": n})),
            None => Err("expected a number"),
        }
    }

    /// Add two numbers.
    #[tool(output_schema = no_negatives)]
    async fn add(a: i64, b: i64) -> i64 {
        a + b
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("ok", "add", json!({"a": 2, "b": 3})),
            ToolCall::new("bad", "add", json!({"a": 2, "b": -3})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(add)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let request = &model.requests()[1];
    assert_eq!(result_of(request, "ok"), json!({"balance": 5}));
    assert_eq!(
        result_of(request, "bad"),
        json!({"error": "Invalid tool output: $: the balance cannot be negative"})
    );
}

#[tokio::test]
async fn event_schema_checks_each_progress_value() {
    use futures::StreamExt;

    fn percent(event: Value) -> Result<Value, String> {
        match event["percent"].as_u64() {
            Some(p) if p <= 100 => Ok(event),
            _ => Err(format!("{event} is not a percentage")),
        }
    }

    /// Index a repository, reporting progress.
    #[tool(event_schema = percent)]
    async fn index(steps: Vec<u64>, ctx: &ToolContext) -> Result<&'static str, AgentError> {
        for step in steps {
            ctx.emit_progress(json!({"percent": step}))?;
        }
        Ok("indexed")
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("ok", "index", json!({"steps": [50, 100]})),
            ToolCall::new("bad", "index", json!({"steps": [50, 150, 100]})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(index)
        .build()
        .unwrap();
    let events: Vec<Event> = agent.run("go").stream().collect().await;
    let published: Vec<(String, Value)> = events
        .iter()
        .filter_map(|e| match e {
            Event::PreliminaryResult { call_id, value, .. } => {
                Some((call_id.clone(), value.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        published,
        [
            ("ok".to_owned(), json!({"percent": 50})),
            ("ok".to_owned(), json!({"percent": 100})),
            ("bad".to_owned(), json!({"percent": 50})),
        ],
        "a rejected value is not published"
    );
    let request = &model.requests()[1];
    assert_eq!(result_of(request, "ok"), json!("indexed"));
    assert_eq!(
        result_of(request, "bad"),
        json!({"error": "Invalid tool event: $: {\"percent\":150} is not a percentage"})
    );
}

#[tokio::test]
async fn on_tool_called_answers_at_once_or_hands_the_call_to_a_person() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    static RAN: AtomicUsize = AtomicUsize::new(0);

    fn small_refunds(input: &Value, ctx: &ToolContext) -> Option<Value> {
        let amount = input["amount"].as_f64()?;
        (amount <= 20.0).then(|| json!({"refunded": amount, "call": ctx.tool_call().id}))
    }

    fn cents(answer: Value) -> Result<Value, String> {
        let amount = answer["refunded"]
            .as_f64()
            .ok_or_else(|| format!("{answer} has no `refunded` amount"))?;
        Ok(json!({"refunded_cents": (amount * 100.0).round() as i64}))
    }

    /// Refund an order.
    #[tool(on_tool_called = small_refunds, on_response_received = cents)]
    fn refund(amount: f64) -> String {
        RAN.fetch_add(1, Ordering::SeqCst);
        format!("refunded {amount}")
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("small", "refund", json!({"amount": 5.0})),
            ToolCall::new("large", "refund", json!({"amount": 500.0})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(refund)
        .build()
        .unwrap();
    let paused = agent.run("refund both").await.unwrap();
    assert_eq!(paused.pending().len(), 1);
    assert_eq!(paused.pending()[0].call.id, "large");
    assert_eq!(paused.pending()[0].kind, PendingKind::Hitl);

    let refused = agent
        .resume(
            &paused.state,
            Decisions::new().output("large", json!({"ok": true})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        r#"invalid tool output: $: {"ok":true} has no `refunded` amount"#
    );

    let done = agent
        .resume(
            &paused.state,
            Decisions::new().output("large", json!({"refunded": 499.99})),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("done"));
    let request = model.requests().pop().unwrap();
    assert_eq!(
        result_of(&request, "small"),
        json!({"refunded": 5.0, "call": "small"})
    );
    assert_eq!(
        result_of(&request, "large"),
        json!({"refunded_cents": 49_999})
    );
    assert_eq!(
        RAN.load(Ordering::SeqCst),
        0,
        "the hook ran instead of the function"
    );
}

#[tokio::test]
async fn next_turn_changes_the_next_model_request() {
    fn senior(input: &Value, current: &TurnParams) -> TurnParams {
        current.clone().model("senior-model").instructions(format!(
            "Escalated: {}",
            input["reason"].as_str().unwrap_or("")
        ))
    }

    /// Hand the conversation to the senior model.
    #[tool(next_turn = senior)]
    fn escalate(reason: String) -> String {
        format!("escalated ({reason})")
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "escalate", json!({"reason": "angry customer"}))
        .text("Hello from the senior model.");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(escalate)
        .build()
        .unwrap();
    agent.run("help").await.unwrap();
    let requests = model.requests();
    assert_eq!(requests[0].model, None);
    assert_eq!(requests[1].model.as_deref(), Some("senior-model"));
    assert_eq!(requests[1].instructions, "Escalated: angry customer");
    assert_eq!(
        result_of(&requests[1], "c1"),
        json!("escalated (angry customer)")
    );
}

#[tokio::test]
async fn require_approval_takes_a_function_of_the_input_and_the_context() {
    fn unless_admin(args: &DeleteArgs, ctx: &ToolContext) -> bool {
        args.path.starts_with("/etc") && ctx.context()["role"] != "admin"
    }

    /// Delete a file.
    #[tool(require_approval = unless_admin)]
    fn delete(path: String) -> String {
        format!("deleted {path}")
    }

    let run = |role: &str| {
        let model = ScriptedModel::new()
            .record_requests()
            .tool_calls([
                ToolCall::new("tmp", "delete", json!({"path": "/tmp/x"})),
                ToolCall::new("etc", "delete", json!({"path": "/etc/hosts"})),
            ])
            .text("done");
        let agent = Agent::builder("t")
            .model(model)
            .tool(delete)
            .build()
            .unwrap();
        let run = agent.run("clean up").context(json!({"role": role}));
        async move { run.await.unwrap() }
    };
    let as_user = run("user").await;
    let pending: Vec<&str> = as_user
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(pending, ["etc"]);
    let as_admin = run("admin").await;
    assert!(!as_admin.is_paused());
    assert_eq!(as_admin.output(), Some("done"));
}

/// Every key on one external tool. The hooks and the input validator are observed here;
/// `max_output_chars`, `on_error`, `exclusive` and `timeout_ms` only show that they combine (each
/// has its own behaviour test above).
#[tokio::test]
async fn the_keys_combine_on_an_external_tool_with_a_typed_input() {
    use phaseo_agent::serde_json::Value as JsonValue;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)] // An external tool's input is only read as JSON, by the hooks.
    struct Lookup {
        email: String,
    }

    fn an_email(input: JsonValue) -> Result<JsonValue, String> {
        match input["email"].as_str() {
            Some(email) if email.contains('@') => Ok(input),
            _ => Err(format!("{} is not an email address", input["email"])),
        }
    }

    fn known(input: &JsonValue, _ctx: &ToolContext) -> Option<JsonValue> {
        (input["email"] == "ada@example.com").then(|| json!({"name": "Ada"}))
    }

    /// Look up a customer in the CRM.
    #[tool(
        external,
        id = "crm-lookup",
        input_schema = an_email,
        on_tool_called = known,
        max_output_chars = 100,
        on_error = "fail-run",
        exclusive,
        timeout_ms = 5_000
    )]
    fn crm_lookup(input: Lookup) -> JsonValue;

    let tool = crm_lookup.into_tool();
    assert_eq!(tool.id(), "crm-lookup");
    assert!(tool.is_external());
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "crm-lookup", json!({"email": "ada@example.com"})),
            ToolCall::new("c2", "crm-lookup", json!({"email": "ada"})),
        ])
        .text("done");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(crm_lookup)
        .build()
        .unwrap();
    let done = agent.run("who is ada").await.unwrap();
    assert_eq!(done.output(), Some("done"));
    let request = &model.requests()[1];
    assert_eq!(result_of(request, "c1"), json!({"name": "Ada"}));
    assert_eq!(
        result_of(request, "c2"),
        json!({"error": "Invalid tool input: $: \"ada\" is not an email address"})
    );
}
