//! Validators: the parameter schema on every call (draft chosen by `$schema`), custom input
//! validators before typed decoding, output and event validators.

use crate::support::agent::{Counter, result_of};
use phaseo_agent::{
    Agent, AgentError, Decisions, OnError, ScriptedModel, Tool, ToolCall, ToolContext,
};
use serde_json::{Value, json};

fn counted(id: &str, schema: Value, runs: &Counter) -> Tool {
    let runs = runs.clone();
    Tool::new(id, "Counts its runs", schema, move |input, _| {
        runs.bump();
        Ok(input)
    })
}

#[tokio::test]
async fn the_draft_is_chosen_by_dollar_schema() {
    // `prefixItems` exists since draft 2020-12; draft-07 does not know it and ignores it.
    // Without `$schema`, a schema is read as draft 2020-12 (what the docs promise).
    let schema = |dollar_schema: Option<&str>| {
        let mut schema = json!({
            "type": "object",
            "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}}
        });
        if let Some(dollar_schema) = dollar_schema {
            schema["$schema"] = json!(dollar_schema);
        }
        schema
    };
    let runs7 = Counter::default();
    let runs2020 = Counter::default();
    let runs_default = Counter::default();
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "pair7", json!({"pair": [5]})),
            ToolCall::new("c2", "pair2020", json!({"pair": [5]})),
            ToolCall::new("c3", "pair_default", json!({"pair": [5]})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(counted(
            "pair7",
            schema(Some("http://json-schema.org/draft-07/schema#")),
            &runs7,
        ))
        .tool(counted(
            "pair2020",
            schema(Some("https://json-schema.org/draft/2020-12/schema")),
            &runs2020,
        ))
        .tool(counted("pair_default", schema(None), &runs_default))
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(runs7.get(), 1, "draft-07 ignores `prefixItems`");
    assert_eq!(runs2020.get(), 0, "2020-12 enforces it");
    assert_eq!(runs_default.get(), 0, "no `$schema` reads as 2020-12");
    assert_eq!(
        result_of(&model.requests()[1], "c2"),
        json!({"error": "Invalid tool input: $.pair[0]: 5 is not of type \"string\""})
    );
}

#[tokio::test]
async fn a_custom_input_validator_runs_after_the_schema_and_may_transform() {
    let runs = Counter::default();
    let search = counted(
        "search",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        &runs,
    )
    .input_schema(|mut input: Value| {
        let query = input["query"].as_str().unwrap_or_default().trim().to_lowercase();
        if query.is_empty() {
            return Err("query must not be blank".to_string());
        }
        input["query"] = json!(query);
        Ok(input)
    });
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "search", json!({"query": "  Printer "})),
            ToolCall::new("c2", "search", json!({"query": "   "})),
            ToolCall::new("c3", "search", json!({"query": 5})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(search)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!({"query": "printer"}));
    assert_eq!(
        result_of(req, "c2"),
        json!({"error": "Invalid tool input: $: query must not be blank"})
    );
    assert_eq!(
        result_of(req, "c3"),
        json!({"error": "Invalid tool input: $.query: 5 is not of type \"string\""}),
        "the schema runs before the custom validator"
    );
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn a_typed_tool_validates_custom_input_before_decoding() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Transfer {
        cents: i64,
    }
    let tool = Tool::typed(
        "transfer",
        "Move money",
        |input: Transfer, _ctx: ToolContext| async move {
            Ok::<_, AgentError>(json!({"moved": input.cents}))
        },
    )
    .input_schema(|input: Value| {
        if input["cents"].as_i64().is_some_and(|c| c > 0) {
            Ok(input)
        } else {
            Err("cents must be positive")
        }
    });
    let ctx = ToolContext::detached();
    assert_eq!(
        tool.invoke(r#"{"cents": 5}"#, &ctx).await.unwrap(),
        r#"{"moved":5}"#
    );
    let err = tool.invoke(r#"{"cents": -5}"#, &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool input: $: cents must be positive"
    );
    let err = tool.invoke(r#"{"cents": "x"}"#, &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool input: $.cents: \"x\" is not of type \"integer\""
    );
}

#[tokio::test]
async fn output_validators_check_results_under_the_error_policy() {
    let status = |id: &str, out: Value| {
        Tool::new(id, "Status", json!({"type": "object"}), move |_, _| {
            Ok(out.clone())
        })
    };
    let schema = json!({"type": "object", "properties": {"status": {"enum": ["up", "down"]}}, "required": ["status"]});
    let model = ScriptedModel::new()
        .record_requests()
        .tool_calls([
            ToolCall::new("c1", "good", json!({})),
            ToolCall::new("c2", "bad", json!({})),
            ToolCall::new("c3", "shouting", json!({})),
        ])
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(status("good", json!({"status": "up"})).output_json_schema(schema.clone()))
        .tool(status("bad", json!({"status": "sideways"})).output_json_schema(schema))
        .tool(
            status("shouting", json!({"status": "UP"})).output_schema(|mut v: Value| {
                let lower = v["status"].as_str().map(str::to_lowercase);
                v["status"] = json!(lower);
                Ok::<_, String>(v)
            }),
        )
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let req = &model.requests()[1];
    assert_eq!(result_of(req, "c1"), json!({"status": "up"}));
    let error = result_of(req, "c2")["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("Invalid tool output: $.status: "),
        "{error}"
    );
    assert_eq!(
        result_of(req, "c3"),
        json!({"status": "up"}),
        "an output validator may transform"
    );

    // Under fail-run, an invalid output fails the run.
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "bad", json!({}))
        .text("unreachable");
    let agent = Agent::builder("t")
        .model(model)
        .tool(
            Tool::new("bad", "Status", json!({"type": "object"}), |_, _| {
                Ok(json!({}))
            })
            .output_json_schema(json!({"required": ["status"]}))
            .on_error(OnError::FailRun),
        )
        .build()
        .unwrap();
    let err = agent.run("go").await.unwrap_err();
    assert!(matches!(err.error, AgentError::InvalidOutput(_)), "{err}");
}

#[tokio::test]
async fn a_supplied_output_is_checked_and_a_bad_one_is_refused_without_changing_the_state() {
    let lookup = Tool::external("lookup", "Load a ticket", json!({"type": "object"}))
        .output_json_schema(json!({"type": "object", "required": ["title"]}));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "lookup", json!({}))
        .text("ok");
    let agent = Agent::builder("t")
        .model(model.clone())
        .tool(lookup)
        .build()
        .unwrap();
    let paused = agent.run("go").await.unwrap();
    let before = paused.state.to_json();
    let err = agent
        .resume(
            &paused.state,
            Decisions::new().output("c1", json!({"name": "x"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid tool output: $: \"title\" is a required property"
    );
    assert_eq!(paused.state.to_json(), before);
    let done = agent
        .resume(
            &paused.state,
            Decisions::new().output("c1", json!({"title": "x"})),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("ok"));
}

#[tokio::test]
async fn a_typed_external_tool_checks_the_supplied_output_against_its_type() {
    // An external tool's input is read by whoever answers the call, not by this code.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Lookup {
        ticket_id: String,
    }
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Ticket {
        title: String,
    }
    let tool = Tool::external_typed::<Lookup, Ticket>("lookup", "Load a ticket");
    assert_eq!(tool.parameters()["required"], json!(["ticket_id"]));
    let model = ScriptedModel::new()
        .record_requests()
        .tool_call("c1", "lookup", json!({"ticket_id": "T-1"}))
        .text("ok");
    let agent = Agent::builder("t").model(model).tool(tool).build().unwrap();
    let paused = agent.run("go").await.unwrap();
    let err = agent
        .resume(
            &paused.state,
            Decisions::new().output("c1", json!({"title": 3})),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid tool output: $: invalid type: integer `3`"),
        "{err}"
    );
    assert!(
        agent
            .resume(
                &paused.state,
                Decisions::new().output("c1", json!({"title": "Printer"}))
            )
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_schema_that_does_not_compile_is_refused_when_the_agent_is_built() {
    let tool = Tool::new("t", "d", json!({"type": "object"}), |v, _| Ok(v))
        .output_json_schema(json!({"type": "object", "properties": {"a": {"pattern": "(["}}}));
    let err = Agent::builder("a")
        .model(ScriptedModel::new().record_requests())
        .tool(tool)
        .build()
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("invalid tool definition `t`"),
        "{err}"
    );
}

mod defaults {
    use phaseo_agent::{Agent, AgentError, ScriptedModel, Tool, ToolContext, ToolInput};
    use serde::Deserialize;

    /// Builds an agent with one typed tool over `I`: the reason its build refuses the tool.
    fn refusal<I: ToolInput>() -> Option<String> {
        let tool = Tool::typed("files", "Lists files", |_: I, _ctx| async {
            Ok::<_, String>("listed")
        });
        match Agent::builder("t")
            .model(ScriptedModel::new())
            .tool(tool)
            .build()
        {
            Ok(_) => None,
            Err(AgentError::InvalidTool { tool, reason }) => {
                assert_eq!(tool, "files");
                Some(reason)
            }
            Err(other) => panic!("refused for another reason: {other}"),
        }
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct BadPath {
        #[serde(default)]
        #[schemars(regex(pattern = "^[a-z]+$"))]
        path: String,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct GoodPath {
        #[serde(default = "home")]
        #[schemars(regex(pattern = "^[a-z]+$"))]
        path: String,
        #[serde(default)]
        #[schemars(range(max = 10))]
        depth: u8,
        #[serde(default)]
        note: Option<String>,
    }

    fn home() -> String {
        "home".into()
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct Limits {
        #[serde(default)]
        #[schemars(range(min = 1))]
        retries: u32,
    }

    /// The bad default deeper down: in a nested struct, and in a variant of a tagged enum.
    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct Nested {
        limits: Limits,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(tag = "kind")]
    enum Job {
        Copy {
            #[serde(default)]
            #[schemars(length(min = 1))]
            target: String,
        },
    }

    #[allow(dead_code)]
    #[derive(Deserialize, schemars::JsonSchema)]
    struct InEnum {
        job: Job,
    }

    /// A recursive type keeps its `$ref`s to the root: a default is checked against the schema it
    /// refers to (its child's `weight` is below the minimum).
    #[allow(dead_code)]
    #[derive(Deserialize, serde::Serialize, schemars::JsonSchema)]
    struct Tree {
        #[serde(default = "one_light_child")]
        #[schemars(length(max = 1))]
        children: Vec<Tree>,
        #[schemars(range(min = 1))]
        weight: u32,
    }

    fn one_light_child() -> Vec<Tree> {
        vec![Tree {
            children: Vec::new(),
            weight: 0,
        }]
    }

    #[test]
    fn a_default_its_own_schema_refuses_refuses_the_tool() {
        let reason = refusal::<BadPath>().expect("refused");
        assert_eq!(
            reason,
            r#"the default of the field "path" (at `/properties/path` in the parameter schema) fails its own schema: "" does not match "^[a-z]+$"; the tool would receive it whenever the model leaves the field out, although the model may not send it: make the default pass the schema, or change the schema"#
        );
        // The call is refused too, rather than run on a value its schema refuses.
        let tool = Tool::typed("files", "Lists files", |_: BadPath, _ctx| async {
            Ok::<_, String>("listed")
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert!(
            runtime
                .block_on(tool.invoke("{}", &ToolContext::detached()))
                .is_err()
        );

        assert_eq!(refusal::<GoodPath>(), None);

        for (reason, field, rule) in [
            (
                refusal::<Nested>(),
                r#"the default of the field "retries" (at `/properties/limits/properties/retries`"#,
                "0 is less than the minimum of 1",
            ),
            (
                refusal::<InEnum>(),
                r#"the default of the field "target""#,
                r#""" is shorter than 1 character"#,
            ),
            (
                refusal::<Tree>(),
                r#"the default of the field "children""#,
                "weight: 0 is less than the minimum of 1",
            ),
        ] {
            let reason = reason.expect("refused");
            assert!(reason.starts_with(field), "{reason}");
            assert!(reason.contains(rule), "{reason}");
        }
    }
}
