//! Strict tools (`#[tool(strict)]`, `Tool::strict`): the schema must have a strict form, requests
//! say the tool is strict, and the `null`s strict mode makes a model send for optional fields are
//! read as left out, while the canonical schema is still enforced.

use std::collections::HashMap;

use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Deserialize, JsonSchema)]
struct Window {
    #[schemars(range(min = 1, max = 30))]
    days: u32,
    #[serde(default)]
    label: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Search {
    query: String,
    /// How many results.
    #[serde(default = "ten")]
    #[schemars(range(max = 50))]
    limit: u32,
    cursor: Option<String>,
    window: Option<Window>,
    #[serde(default)]
    windows: Vec<Window>,
}

fn ten() -> u32 {
    10
}

/// Search the archive.
#[tool(strict)]
async fn search(input: Search) -> Value {
    json!({
        "query": input.query,
        "limit": input.limit,
        "cursor": input.cursor,
        "window": input.window.map(|w| json!([w.days, w.label])),
        "windows": input.windows.len(),
    })
}

async fn call(arguments: Value) -> Result<Value, AgentError> {
    let tool = phaseo_agent::IntoTool::into_tool(search);
    let out = tool
        .invoke(&arguments.to_string(), &ToolContext::detached())
        .await?;
    Ok(serde_json::from_str(&out).expect("JSON output"))
}

#[tokio::test]
async fn nulls_for_optional_fields_are_read_as_left_out() {
    // What a model in strict mode sends: every property, `null` for those it leaves out.
    let out = call(json!({
        "query": "q",
        "limit": null,
        "cursor": null,
        "window": {"days": 3, "label": null},
        "windows": [{"days": 1, "label": null}]
    }))
    .await
    .unwrap();
    assert_eq!(
        out,
        json!({"query": "q", "limit": 10, "cursor": null, "window": [3, ""], "windows": 1})
    );
}

#[tokio::test]
async fn the_canonical_schema_is_still_enforced() {
    for bad in [
        json!({"query": null}),
        json!({"query": "q", "limit": 51}),
        json!({"query": "q", "window": {"days": null}}),
        json!({"query": "q", "window": {"days": 31, "label": null}}),
        json!({"query": "q", "windows": [{"days": 0}]}),
    ] {
        let error = call(bad.clone()).await.unwrap_err();
        assert!(
            matches!(error, AgentError::InvalidInput(_)),
            "{bad}: {error}"
        );
    }
}

#[tokio::test]
async fn requests_mark_strict_tools() {
    let model = ScriptedModel::new().record_requests().text("ok");
    let plain = Tool::new(
        "plain",
        "A plain tool",
        json!({"type": "object"}),
        |v, _| Ok(v),
    );
    let agent = Agent::builder("a")
        .model(model.clone())
        .tool(search)
        .tool(plain)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let tools = &model.requests()[0].tools;
    assert!(tools[0].strict);
    assert!(!tools[1].strict);
    // The definition keeps the canonical schema; providers convert it.
    assert_eq!(tools[0].parameters["required"], json!(["query"]));
}

#[derive(Deserialize, JsonSchema)]
struct Tags {
    #[allow(dead_code)]
    counts: HashMap<String, u32>,
}

#[tokio::test]
async fn a_strict_tool_without_a_strict_form_fails_the_build_naming_the_path() {
    let tool = Tool::typed("tags", "Tags", |_t: Tags, _ctx| async {
        Ok::<_, String>(json!("ok"))
    })
    .strict();
    let error = Agent::builder("a")
        .model(ScriptedModel::new().record_requests())
        .tool(tool)
        .build()
        .expect_err("refused");
    let AgentError::InvalidTool { tool, reason } = &error else {
        panic!("{error}")
    };
    assert_eq!(tool, "tags");
    assert!(reason.contains("$.properties.counts"), "{reason}");
    assert!(reason.contains("remove `strict`"), "{reason}");
}
