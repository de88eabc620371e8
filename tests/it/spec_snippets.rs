//! The Rust snippets of the SDK's tools page (the page of every language's SDK that this crate
//! implements in Rust), verbatim, with only `fn main()` (here: a test function, which then calls the
//! tool) around them. If one stops compiling, the
//! public API broke the page.

#[tokio::test]
async fn get_status_snippet_compiles_and_runs() {
    use phaseo_agent::Tool;
    use serde_json::json;

    let get_status = Tool::new(
        "get_status",
        "Get the current service status",
        json!({
            "type": "object",
            "properties": {
                "service": { "type": "string" }
            },
            "required": ["service"]
        }),
        |input, _context| {
            Ok(json!({
                "service": input["service"],
                "status": "healthy"
            }))
        },
    );

    let ctx = phaseo_agent::ToolContext::detached();
    let result = get_status.invoke(r#"{"service": "api"}"#, &ctx).await;
    assert_eq!(result.unwrap(), r#"{"service":"api","status":"healthy"}"#);
}

#[tokio::test]
async fn deploy_snippet_compiles_and_runs() {
    use phaseo_agent::Tool;
    use serde_json::json;

    let deploy = Tool::new(
        "deploy",
        "Deploy an application environment",
        json!({
            "type": "object",
            "properties": {
                "environment": { "type": "string" }
            },
            "required": ["environment"]
        }),
        |input, _context| {
            Ok(json!({
                "environment": input["environment"],
                "deployed": true
            }))
        },
    )
    .require_approval();

    let ctx = phaseo_agent::ToolContext::detached();
    let result = deploy.invoke(r#"{"environment": "staging"}"#, &ctx).await;
    assert_eq!(
        result.unwrap(),
        r#"{"deployed":true,"environment":"staging"}"#
    );
}

#[tokio::test]
async fn ticket_lookup_snippet_compiles_and_runs() {
    use phaseo_agent::Tool;
    use serde_json::json;

    let ticket_lookup = Tool::external(
        "ticket_lookup",
        "Load one support ticket",
        json!({
            "type": "object",
            "properties": {
                "ticket_id": { "type": "string" }
            },
            "required": ["ticket_id"]
        }),
    );

    assert!(ticket_lookup.is_external());
    // No executor: its result comes from outside, so invoking it is an error, not a result.
    let ctx = phaseo_agent::ToolContext::detached();
    let err = ticket_lookup
        .invoke(r#"{"ticket_id": "T-1"}"#, &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no executor"), "{err}");
}
