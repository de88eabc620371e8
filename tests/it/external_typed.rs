//! External tools typed where they are used: a pending call's arguments read as the tool's input
//! type, and an output of the tool's output type, checked when the decision is made.

use phaseo_agent::serde_json::{Value, json};
use phaseo_agent::{
    Agent, AgentError, Decisions, PendingCall, RunState, ScriptedModel, Tool, ToolCall, tool,
};
use serde::{Deserialize, Serialize};

/// What the pager answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
struct PageReceipt {
    /// The page's id at the pager.
    page_id: String,
}

/// A page id is never blank.
fn has_a_page_id(output: Value) -> Result<Value, String> {
    match output["page_id"].as_str() {
        Some(id) if !id.trim().is_empty() => Ok(output),
        _ => Err("the page id is blank".to_owned()),
    }
}

/// Page the on-call person of a team.
#[tool(external, output_schema = has_a_page_id)]
fn page_oncall(team: String, message: String) -> PageReceipt;

/// Which ticket to load.
#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Lookup {
    ticket_id: String,
}

/// Load one ticket from the helpdesk.
#[tool(external)]
async fn lookup(input: Lookup) -> Value;

/// Paused on one call of `page_oncall` (`c1`) and one of `lookup` (`c2`).
async fn paused() -> (Agent, RunState) {
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new(
                "c1",
                "page_oncall",
                json!({"team": "db", "message": "disk full"}),
            ),
            ToolCall::new("c2", "lookup", json!({"ticket_id": "T-7"})),
        ])
        .text("Paged.");
    let agent = Agent::builder("oncall")
        .model(model)
        .tools((page_oncall, lookup))
        .build()
        .unwrap();
    let state = agent.run("The db disk is full").await.unwrap().state;
    (agent, state)
}

fn pending<'a>(state: &'a RunState, call_id: &str) -> &'a PendingCall {
    state
        .pending()
        .iter()
        .find(|p| p.call.id == call_id)
        .unwrap()
}

#[tokio::test]
async fn a_pending_call_reads_its_arguments_as_the_tools_input_type() {
    let (_, state) = paused().await;
    let args: PageOncallArgs = pending(&state, "c1").input(page_oncall).unwrap();
    assert_eq!(
        (args.team.as_str(), args.message.as_str()),
        ("db", "disk full")
    );
    let input: Lookup = pending(&state, "c2").input(lookup).unwrap();
    assert_eq!(
        input,
        Lookup {
            ticket_id: "T-7".into()
        }
    );
    // Without the tool item: name the type.
    let input: Lookup = pending(&state, "c2").input_as().unwrap();
    assert_eq!(input.ticket_id, "T-7");
}

#[tokio::test]
async fn reading_a_pending_call_as_another_tools_input_is_a_typed_error() {
    let (_, state) = paused().await;
    let Err(err) = pending(&state, "c2").input(page_oncall) else {
        panic!("a call of `lookup` read as `page_oncall`'s input")
    };
    assert_eq!(
        err,
        AgentError::WrongTool {
            call_id: "c2".into(),
            expected: "page_oncall".into(),
            found: "lookup".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "pending call `c2` is a call of tool `lookup`, not of `page_oncall`"
    );
    // A type that does not fit the arguments is refused with their path.
    let err = pending(&state, "c2").input_as::<PageReceipt>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool input: $: missing field `page_id`"
    );
}

#[tokio::test]
async fn a_typed_output_is_checked_against_the_tool_when_it_is_decided() {
    let (agent, state) = paused().await;
    let blank = PageReceipt {
        page_id: " ".into(),
    };
    let err = Decisions::for_run(state.run_id())
        .typed_output("c1", page_oncall, blank)
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidOutput("$: the page id is blank".into())
    );

    let receipt = PageReceipt {
        page_id: "P-12".into(),
    };
    let decisions = Decisions::for_run(state.run_id())
        .typed_output("c1", page_oncall, receipt)
        .unwrap()
        .typed_output("c2", lookup, json!({"title": "Disk full"}))
        .unwrap();
    let done = agent.resume(&state, decisions).await.unwrap();
    assert_eq!(done.output(), Some("Paged."));
    assert_eq!(done.state.tool_result("c1"), Some(r#"{"page_id":"P-12"}"#));
}

#[tokio::test]
async fn a_tool_value_checks_a_supplied_output_when_it_is_decided() {
    #[derive(Deserialize)]
    struct Ticket {
        #[expect(dead_code, reason = "only its shape is checked")]
        title: String,
    }
    let typed = Tool::external_typed::<Lookup, Ticket>("lookup", "Load one ticket");
    let err = Decisions::new()
        .typed_output("c2", &typed, json!({"name": "Disk full"}))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool output: $: missing field `title`"
    );
    let decisions = Decisions::new()
        .typed_output("c2", &typed, json!({"title": "Disk full"}))
        .unwrap();
    assert_eq!(decisions.len(), 1);
}

/// External tools under `deny(warnings)`: a typed input whose fields are read only from pending
/// calls, and plain arguments nobody reads (their generated struct draws no warning either). This
/// module fails to compile if either warns.
#[deny(warnings)]
mod quiet {
    use phaseo_agent::serde_json::json;
    use phaseo_agent::{Agent, Decisions, ScriptedModel, ToolCall, tool};

    /// Which host to restart.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Host {
        name: String,
    }

    /// Ask an operator to restart a host.
    #[tool(external)]
    fn restart_host(input: Host) -> bool;

    /// Ask a person a question.
    #[tool(external)]
    fn ask(question: String, urgent: bool) -> String;

    #[tokio::test]
    async fn an_external_tools_input_is_read_where_it_is_used() {
        let model = ScriptedModel::new()
            .tool_calls([
                ToolCall::new("c1", "restart_host", json!({"name": "db-1"})),
                ToolCall::new("c2", "ask", json!({"question": "Now?", "urgent": true})),
            ])
            .text("Restarted.");
        let agent = Agent::builder("quiet")
            .model(model)
            .tools((restart_host, ask))
            .build()
            .unwrap();
        let paused = agent.run("Restart db-1").await.unwrap();
        let host = paused.pending()[0].input(restart_host).unwrap();
        assert_eq!(host.name, "db-1");
        let decisions = Decisions::for_run(paused.state.run_id())
            .typed_output("c1", restart_host, true)
            .unwrap()
            .typed_output("c2", ask, "yes".to_owned())
            .unwrap();
        let done = agent.resume(&paused.state, decisions).await.unwrap();
        assert_eq!(done.state.tool_result("c1"), Some("true"));
        assert_eq!(done.state.tool_result("c2"), Some(r#""yes""#));
    }
}

/// What to do with a host; `count` is an integer inside an internally tagged enum.
#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
enum HostAction {
    Restart { count: u32 },
}

/// Act on a host, by hand.
#[tool(external)]
fn act(action: HostAction) -> Value;

#[tokio::test]
async fn a_pending_call_reads_an_integer_written_as_a_float_as_the_tool_would() {
    // The argument check accepts `2.0` for an integer (JSON Schema counts it as one), so the
    // call pauses; reading it must accept it too, as the tool's own decoding does.
    let model =
        ScriptedModel::new().tool_call("c1", "act", json!({"type": "restart", "count": 2.0}));
    let agent = Agent::builder("ops")
        .model(model)
        .tool(act)
        .build()
        .unwrap();
    let state = agent.run("Restart it twice").await.unwrap().state;
    let input = pending(&state, "c1")
        .input(act)
        .expect("the arguments the check accepted");
    assert_eq!(input, HostAction::Restart { count: 2 });
}
