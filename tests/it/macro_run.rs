//! `#[tool]` functions run through the agent loop with the scripted model: sync and async, typed
//! input and plain arguments, the context parameter, and errors reaching the model.

use phaseo_agent::{Agent, ModelRequest, ScriptedModel, ToolContext, tool};
use serde_json::{Value, json};

/// The result text each tool call sent back to the model, in order, from the last request.
fn tool_results(requests: &[ModelRequest]) -> Vec<String> {
    let last = requests.last().expect("the model was called");
    crate::support::agent::tool_results(last)
        .into_iter()
        .map(|(_, content)| content)
        .collect()
}

#[tokio::test]
async fn async_tool_with_a_typed_input_and_the_context() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct FetchTicket {
        /// The ticket's id.
        ticket_id: String,
    }

    #[derive(serde::Serialize)]
    struct Ticket {
        id: String,
        tenant: Value,
        step: usize,
    }

    /// Load one internal support ticket.
    #[tool(id = "fetch-ticket")]
    async fn fetch_ticket(input: FetchTicket, ctx: &ToolContext) -> Result<Ticket, String> {
        ctx.emit_progress(json!({"loading": input.ticket_id}))
            .map_err(|e| e.to_string())?;
        tokio::task::yield_now().await;
        Ok(Ticket {
            id: input.ticket_id,
            tenant: ctx.context()["tenant"].clone(),
            step: ctx.step_index(),
        })
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "fetch-ticket", json!({"ticket_id": "T-42"}))
        .text("It is on fire.");
    let agent = Agent::builder("support")
        .model(model.clone())
        .tool(fetch_ticket)
        .build()
        .unwrap();
    let result = agent
        .run("What about T-42?")
        .context(json!({"tenant": "acme"}))
        .await
        .unwrap();
    assert_eq!(result.output(), Some("It is on fire."));

    let requests = model.requests();
    let definition = &requests[0].tools[0];
    assert_eq!(definition.name, "fetch-ticket");
    assert_eq!(definition.description, "Load one internal support ticket.");
    assert_eq!(
        definition.parameters,
        json!({
            "type": "object",
            "properties": {"ticket_id": {"type": "string", "description": "The ticket's id."}},
            "required": ["ticket_id"]
        })
    );
    let sent: Value = serde_json::from_str(&tool_results(&requests)[0]).unwrap();
    assert_eq!(sent, json!({"id": "T-42", "tenant": "acme", "step": 0}));
    assert_eq!(
        result.state.steps()[0].preliminary_results,
        [json!({"loading": "T-42"})]
    );
}

#[tokio::test]
async fn sync_tool_with_plain_arguments_runs_off_the_async_thread() {
    use std::sync::Mutex;
    use std::thread::{self, ThreadId};

    static RAN_ON: Mutex<Option<ThreadId>> = Mutex::new(None);

    /// Add two numbers.
    #[tool]
    fn add(a: i64, b: i64) -> i64 {
        *RAN_ON.lock().unwrap() = Some(thread::current().id());
        a + b
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "add", json!({"a": 2, "b": 40}))
        .text("42");
    let agent = Agent::builder("math")
        .model(model.clone())
        .tool(add)
        .build()
        .unwrap();
    agent.run("2 + 40?").await.unwrap();

    assert_eq!(tool_results(&model.requests()), ["42"]);
    // `#[tokio::test]` runs the agent on this thread; a sync tool runs on the blocking pool.
    let ran_on = RAN_ON.lock().unwrap().expect("the tool ran");
    assert_ne!(ran_on, thread::current().id());
}

#[tokio::test]
async fn plain_arguments_become_the_advertised_schema() {
    /// Greet someone.
    ///
    /// Say hello politely.
    #[tool]
    async fn greet(
        /// Who to greet.
        name: &str,
        /// How many times; once if unset.
        times: Option<u32>,
        #[serde(rename = "exclaim")] loud: bool,
        ctx: &ToolContext,
    ) -> String {
        let _ = ctx.run_id();
        let mark = if loud { "!" } else { "." };
        format!("Hello, {name}{mark}").repeat(times.unwrap_or(1) as usize)
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            phaseo_agent::ToolCall::new("call_1", "greet", json!({"name": "Ada", "exclaim": true})),
            phaseo_agent::ToolCall::new(
                "call_2",
                "greet",
                json!({"name": "Bo", "times": 2, "exclaim": false}),
            ),
        ])
        .text("Done.");
    let agent = Agent::builder("greeter")
        .model(model.clone())
        .tool(greet)
        .build()
        .unwrap();
    agent.run("Greet them").await.unwrap();

    let requests = model.requests();
    let definition = &requests[0].tools[0];
    assert_eq!(
        definition.description,
        "Greet someone.\n\nSay hello politely."
    );
    let parameters = &definition.parameters;
    assert_eq!(parameters["type"], "object");
    assert_eq!(
        parameters["properties"]["name"],
        json!({"type": "string", "description": "Who to greet."})
    );
    assert_eq!(
        parameters["properties"]["times"]["description"],
        "How many times; once if unset."
    );
    assert_eq!(parameters["properties"]["exclaim"]["type"], "boolean");
    let mut required: Vec<&str> = parameters["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["exclaim", "name"]);
    assert!(parameters.get("title").is_none() && parameters.get("description").is_none());
    assert_eq!(
        tool_results(&requests),
        [r#""Hello, Ada!""#, r#""Hello, Bo.Hello, Bo.""#]
    );
}

#[tokio::test]
async fn a_tool_without_parameters_takes_an_empty_object() {
    /// The current status.
    #[tool]
    fn status() -> &'static str {
        "healthy"
    }

    let model = ScriptedModel::new()
        .record_requests()
        .turn(phaseo_agent::ModelResponse::tool_calls([
            phaseo_agent::ToolCall::raw("call_1", "status", ""),
        ]))
        .text("Healthy.");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(status)
        .build()
        .unwrap();
    agent.run("Status?").await.unwrap();

    let requests = model.requests();
    assert_eq!(
        requests[0].tools[0].parameters,
        json!({"type": "object", "properties": {}})
    );
    assert_eq!(tool_results(&requests), [r#""healthy""#]);
}

#[tokio::test]
async fn an_error_reaches_the_model() {
    /// Divide two numbers.
    #[tool]
    async fn divide(a: f64, b: f64) -> Result<f64, String> {
        if b == 0.0 {
            return Err(format!("cannot divide {a} by zero"));
        }
        Ok(a / b)
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "divide", json!({"a": 1.0, "b": 0.0}))
        .text("Division by zero.");
    let agent = Agent::builder("math")
        .model(model.clone())
        .tool(divide)
        .build()
        .unwrap();
    let result = agent.run("1 / 0?").await.unwrap();

    assert_eq!(result.output(), Some("Division by zero."));
    assert_eq!(
        tool_results(&model.requests()),
        [r#"{"error":"cannot divide 1 by zero"}"#]
    );
}

#[tokio::test]
async fn a_sync_error_of_another_result_type_reaches_the_model() {
    /// The size of a file in bytes.
    #[tool]
    fn file_size(path: String) -> std::io::Result<u64> {
        std::fs::metadata(path).map(|m| m.len())
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call(
            "call_1",
            "file_size",
            json!({"path": "/nonexistent/phaseo/file"}),
        )
        .text("No such file.");
    let agent = Agent::builder("files")
        .model(model.clone())
        .tool(file_size)
        .build()
        .unwrap();
    agent.run("How big?").await.unwrap();

    let sent: Value = serde_json::from_str(&tool_results(&model.requests())[0]).unwrap();
    let error = sent["error"].as_str().expect("an error object");
    assert!(error.contains("No such file"), "{error}");
}

#[tokio::test]
async fn invalid_arguments_never_reach_the_function() {
    /// Add two numbers.
    #[tool]
    fn add(a: i64, b: i64) -> i64 {
        a + b
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "add", json!({"a": "two", "b": 2}))
        .text("Oops.");
    let agent = Agent::builder("math")
        .model(model.clone())
        .tool(add)
        .build()
        .unwrap();
    agent.run("two + 2?").await.unwrap();

    let sent: Value = serde_json::from_str(&tool_results(&model.requests())[0]).unwrap();
    let error = sent["error"].as_str().expect("an error object");
    assert!(error.contains("$.a"), "{error}");
}

#[tokio::test]
async fn a_unit_returning_tool_sends_null() {
    /// Remember a note.
    #[tool]
    async fn remember(note: String, ctx: &ToolContext) {
        ctx.set_context(json!({"note": note})).unwrap();
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "remember", json!({"note": "buy milk"}))
        .text("Noted.");
    let agent = Agent::builder("notes")
        .model(model.clone())
        .tool(remember)
        .build()
        .unwrap();
    let result = agent.run("Remember to buy milk").await.unwrap();

    assert_eq!(tool_results(&model.requests()), ["null"]);
    assert_eq!(result.state.context(), &json!({"note": "buy milk"}));
}
