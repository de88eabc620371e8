//! Our MCP client against the reference server of the Model Context Protocol project, npm
//! `@modelcontextprotocol/server-everything` (a TypeScript server on the official SDK, whose
//! schemas are draft-07), started as a child process over stdio: its tools listed, `echo` and
//! `get-sum` called (alone and from an agent), arguments its schema refuses kept from it, and
//! progress from `trigger-long-running-operation`.
//!
//! Run by `interop/run.sh` (`--ignored`), which installs the server and sets
//! `PHASEO_INTEROP_MCP_EVERYTHING` to its entry point; without it the tests fail, never pass.

use phaseo_agent::mcp::McpClient;
use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext};
use serde_json::json;

/// The server's entry point, run as `node PATH stdio`.
fn everything() -> String {
    std::env::var("PHASEO_INTEROP_MCP_EVERYTHING").expect(
        "PHASEO_INTEROP_MCP_EVERYTHING is not set: run the interop suite with interop/run.sh, \
         which installs @modelcontextprotocol/server-everything",
    )
}

async fn connect() -> McpClient {
    McpClient::command("node", [everything().as_str(), "stdio"])
        .await
        .expect("server-everything initialises")
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn lists_the_reference_servers_tools() {
    let client = connect().await;
    let (name, _version) = client.server_info().expect("the server says who it is");
    assert!(name.contains("everything"), "{name}");
    let ids: Vec<String> = client.tools().iter().map(|t| t.id().to_owned()).collect();
    for expected in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(ids.iter().any(|id| id == expected), "{expected} in {ids:?}");
    }
    let echo = client.tool("echo").expect("the server lists it");
    assert_eq!(echo.description(), "Echoes back the input string");
    // The model reads the schema without `$schema`; its property is as the server wrote it.
    assert!(
        echo.parameters().get("$schema").is_none(),
        "{}",
        echo.parameters()
    );
    assert_eq!(echo.parameters()["properties"]["message"]["type"], "string");
    assert_eq!(echo.parameters()["required"], json!(["message"]));
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn calls_echo_and_get_sum() {
    let client = connect().await;
    let ctx = ToolContext::detached();
    let echo = client
        .tool("echo")
        .expect("the server lists it")
        .invoke(r#"{"message": "hello, MCP"}"#, &ctx)
        .await;
    assert_eq!(echo.unwrap(), r#""Echo: hello, MCP""#);
    let sum = client
        .tool("get-sum")
        .expect("the server lists it")
        .invoke(r#"{"a": 2, "b": 40}"#, &ctx)
        .await;
    assert_eq!(sum.unwrap(), r#""The sum of 2 and 40 is 42.""#);

    // Arguments the server's schema refuses are refused here, before a request is sent.
    let err = client
        .tool("get-sum")
        .expect("the server lists it")
        .invoke(r#"{"a": "two", "b": 40}"#, &ctx)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        AgentError::InvalidInput(r#"$.a: "two" is not of type "number""#.into())
    );
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn receives_progress_from_the_long_running_tool() {
    let client = connect().await;
    let ctx = ToolContext::detached();
    let long = client
        .tool("trigger-long-running-operation")
        .expect("the server lists it");
    let out = long
        .invoke(r#"{"duration": 1, "steps": 3}"#, &ctx)
        .await
        .unwrap();
    assert!(out.contains("Long running operation completed"), "{out}");
    let progress = ctx.progress();
    assert_eq!(progress.len(), 3, "{progress:?}");
    for (step, value) in progress.iter().enumerate() {
        assert_eq!(value["progress"], json!(step + 1), "{value}");
        assert_eq!(value["total"], json!(3), "{value}");
    }
}

#[tokio::test]
#[ignore = "run by interop/run.sh"]
async fn an_agent_uses_the_reference_servers_tools() {
    let client = connect().await;
    let tools: Vec<Tool> = ["echo", "get-sum"]
        .iter()
        .map(|id| client.tool(id).expect("the server lists it"))
        .collect();
    let model = ScriptedModel::new()
        .tool_call("call_1", "get-sum", json!({"a": 19, "b": 23}))
        .tool_call("call_2", "echo", json!({"message": "42"}))
        .text("It is 42.");
    let agent = Agent::builder("interop")
        .model(model)
        .tools(tools)
        .build()
        .unwrap();
    let done = agent.run("Add 19 and 23, then say it").await.unwrap();
    assert_eq!(
        done.state.tool_result("call_1"),
        Some(r#""The sum of 19 and 23 is 42.""#)
    );
    assert_eq!(done.state.tool_result("call_2"), Some(r#""Echo: 42""#));
    assert_eq!(done.output(), Some("It is 42."));
}
