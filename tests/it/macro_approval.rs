//! `#[tool(require_approval)]`, `#[tool(require_approval = path)]` and `#[tool(external)]` through the
//! agent loop: exactly the calls they select pause, with the right pending kind, and resume.

use phaseo_agent::{Agent, Decisions, PendingKind, ScriptedModel, ToolCall, tool};
use serde_json::json;

/// The calls' results in the model's last request.
fn tool_results(model: &ScriptedModel) -> Vec<(String, String)> {
    crate::support::agent::tool_results(model.requests().last().expect("the model was called"))
}

#[tokio::test]
async fn require_approval_as_a_flag_pauses_every_call() {
    /// Restart a service.
    #[tool(require_approval)]
    fn restart(service: String) -> String {
        format!("{service} restarted")
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "restart", json!({"service": "api"}))
        .text("Restarted.");
    let agent = Agent::builder("ops")
        .model(model.clone())
        .tool(restart)
        .build()
        .unwrap();

    let paused = agent.run("Restart the API").await.unwrap();
    assert!(paused.is_paused());
    assert_eq!(paused.pending().len(), 1);
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    assert_eq!(paused.pending()[0].arguments, json!({"service": "api"}));

    let done = agent
        .resume(&paused.state, Decisions::new().approve("call_1"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Restarted."));
    assert_eq!(
        tool_results(&model),
        [("call_1".to_owned(), r#""api restarted""#.to_owned())]
    );
}

#[tokio::test]
async fn require_approval_as_a_function_of_the_typed_input_pauses_only_what_it_selects() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Deploy {
        environment: String,
    }

    fn is_production(input: &Deploy) -> bool {
        input.environment == "production"
    }

    static RUNS: AtomicUsize = AtomicUsize::new(0);

    /// Deploy an application environment.
    #[tool(require_approval = is_production)]
    async fn deploy(input: Deploy) -> Result<String, String> {
        RUNS.fetch_add(1, Ordering::SeqCst);
        Ok(format!("{} deployed", input.environment))
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "deploy", json!({"environment": "staging"})),
            ToolCall::new("call_2", "deploy", json!({"environment": "production"})),
        ])
        .text("Both deployed.");
    let agent = Agent::builder("release")
        .model(model.clone())
        .tool(deploy)
        .build()
        .unwrap();

    let paused = agent.run("Deploy everywhere").await.unwrap();
    let pending: Vec<&str> = paused
        .pending()
        .iter()
        .map(|p| p.call.id.as_str())
        .collect();
    assert_eq!(pending, ["call_2"]);
    assert_eq!(paused.pending()[0].kind, PendingKind::ToolApproval);
    // The staging call ran before the pause, once; its result is kept across it.
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);

    let done = agent
        .resume(&paused.state, Decisions::new().approve("call_2"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Both deployed."));
    assert_eq!(RUNS.load(Ordering::SeqCst), 2);
    assert_eq!(
        tool_results(&model),
        [
            ("call_1".to_owned(), r#""staging deployed""#.to_owned()),
            ("call_2".to_owned(), r#""production deployed""#.to_owned()),
        ]
    );
}

#[tokio::test]
async fn require_approval_as_a_function_of_the_generated_arguments() {
    struct Rules;
    impl Rules {
        fn is_large(args: &TransferArgs) -> bool {
            args.amount > 1_000
        }
    }

    /// Transfer money between accounts.
    #[tool(require_approval = Rules::is_large)]
    fn transfer(amount: u64, note: Option<String>) -> String {
        format!("moved {amount} ({})", note.unwrap_or_default())
    }

    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("call_1", "transfer", json!({"amount": 5_000})),
            ToolCall::new("call_2", "transfer", json!({"amount": 10, "note": "lunch"})),
        ])
        .text("Done.");
    let agent = Agent::builder("bank")
        .model(model.clone())
        .tool(transfer)
        .build()
        .unwrap();

    let paused = agent.run("Pay").await.unwrap();
    assert_eq!(paused.pending().len(), 1);
    assert_eq!(paused.pending()[0].call.id, "call_1");

    let done = agent
        .resume(
            &paused.state,
            Decisions::new().reject("call_1", "Too much at once"),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Done."));
    let results = tool_results(&model);
    assert!(results[0].1.contains("Too much at once"), "{results:?}");
    assert_eq!(results[1].1, r#""moved 10 (lunch)""#);
}

#[tokio::test]
async fn an_external_tool_pauses_for_its_output() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Lookup {
        /// The ticket to load.
        #[allow(dead_code)]
        ticket_id: String,
    }

    #[derive(serde::Deserialize)]
    struct Ticket {
        #[allow(dead_code)]
        title: String,
    }

    /// Load one support ticket from the help desk.
    #[tool(external)]
    async fn ticket_lookup(input: Lookup) -> Ticket;

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "ticket_lookup", json!({"ticket_id": "T-7"}))
        .text("The printer is on fire.");
    let agent = Agent::builder("support")
        .model(model.clone())
        .tool(ticket_lookup)
        .build()
        .unwrap();
    assert!(agent.tools()[0].is_external());
    assert_eq!(
        agent.tools()[0].parameters()["properties"]["ticket_id"]["description"],
        "The ticket to load."
    );

    let paused = agent.run("What is T-7?").await.unwrap();
    assert_eq!(paused.pending()[0].kind, PendingKind::ExternalOutput);
    assert_eq!(paused.pending()[0].arguments, json!({"ticket_id": "T-7"}));

    // An output that does not decode as `Ticket` is refused, and the state is left as it was.
    let before = paused.state.to_json();
    let wrong = agent
        .resume(
            &paused.state,
            Decisions::new().output("call_1", json!({"name": "x"})),
        )
        .await;
    assert!(wrong.is_err());
    assert_eq!(paused.state.to_json(), before);

    let done = agent
        .resume(
            &paused.state,
            Decisions::new().output("call_1", json!({"title": "Printer on fire"})),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("The printer is on fire."));
    assert_eq!(
        tool_results(&model),
        [(
            "call_1".to_owned(),
            r#"{"title":"Printer on fire"}"#.to_owned()
        )]
    );
}

#[tokio::test]
async fn an_external_tool_with_plain_arguments_and_approval() {
    /// Ask a person in the CRM team to look up a customer.
    #[tool(external, id = "crm-lookup", require_approval)]
    fn crm_lookup(
        /// The customer's email address.
        email: String,
    ) -> serde_json::Value;

    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("call_1", "crm-lookup", json!({"email": "ada@example.com"}))
        .text("Found.");
    let agent = Agent::builder("crm")
        .model(model)
        .tool(crm_lookup)
        .build()
        .unwrap();
    let tool = &agent.tools()[0];
    assert_eq!(tool.id(), "crm-lookup");
    assert_eq!(
        tool.parameters()["properties"]["email"]["description"],
        "The customer's email address."
    );

    let paused = agent.run("Who is ada@example.com?").await.unwrap();
    assert_eq!(paused.pending().len(), 1);
    let _: CrmLookupArgs = serde_json::from_value(paused.pending()[0].arguments.clone()).unwrap();
}
