//! The Rust snippets of the spec page (`shared/spec/tools-page.txt`), verbatim, with only `fn main()`
//! (here: a test function) around them. If one stops compiling, the public API broke the page.

#[test]
fn get_status_snippet_compiles_and_runs() {
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

    assert_eq!(get_status.id(), "get_status");
    assert!(!get_status.is_external());
}

#[test]
fn deploy_snippet_compiles_and_runs() {
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

    assert_eq!(deploy.id(), "deploy");
}

#[test]
fn ticket_lookup_snippet_compiles_and_runs() {
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
}
