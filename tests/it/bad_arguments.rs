//! The bad-argument corpus (`tests/corpus/bad_arguments.jsonl`): argument texts a model might send to
//! four shapes of tool (a typed input, plain arguments, a hand-written JSON schema, nested types with
//! enums), each with its expected outcome: `ok` (the tool runs) or `invalid` (the call is refused as
//! `Invalid tool input: $...` and the tool does not run).
//!
//! Each case runs in a child process (this test binary, re-run for one case), so a crash or a stack
//! overflow fails its case with the case named, not the whole suite.
//!
//! A case may also say `today`: the outcome of a known, still open defect (the expected outcome is
//! what must hold once it is fixed). Such a case checks `today`, so fixing the defect fails it and
//! asks for `today` to be removed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use phaseo_agent::{AgentError, Tool, ToolContext, tool};
use serde::Deserialize;
use serde_json::{Value, json};

const CORPUS: &str = include_str!("../corpus/bad_arguments.jsonl");
const CASE_VAR: &str = "PHASEO_CORPUS_CASE";

#[derive(Deserialize)]
struct Case {
    tool: String,
    expect: String,
    arguments: String,
    why: String,
    #[serde(default)]
    today: Option<String>,
}

fn corpus() -> Vec<Case> {
    CORPUS
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a corpus line is a case"))
        .collect()
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Ticket {
    id: String,
    #[schemars(range(min = 1, max = 5))]
    priority: u8,
    tags: Vec<String>,
    note: Option<String>,
}

/// Add two numbers.
#[tool]
fn add(a: i64, b: i64) -> i64 {
    a.wrapping_add(b)
}

#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Size {
    Small,
    Large,
}

// The decoded values are not used: these tests check what decodes.
#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
struct Item {
    sku: String,
    #[schemars(range(min = 1))]
    qty: u32,
}

#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Contact {
    Email { address: String },
    Sms { number: String },
}

/// An untagged enum whose variants read different kinds of JSON value (overlapping ones are
/// refused when the tool is built).
#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum When {
    InDays(#[schemars(range(max = 30))] u32),
    On(#[schemars(length(equal = 10))] String),
}

#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
struct Order {
    size: Size,
    items: Vec<Item>,
    contact: Contact,
    when: Option<When>,
    /// An `f32`: the schema says `number`, the type holds less.
    #[schemars(range(min = 0.0))]
    discount: Option<f32>,
    /// An alias the schema does not describe.
    #[serde(alias = "lim", default)]
    #[schemars(range(max = 10))]
    limit: Option<u8>,
}

/// The tool of a shape, and a flag set when its code runs.
fn tool_of(shape: &str) -> (Tool, Arc<AtomicBool>) {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let mark = move || flag.store(true, Ordering::SeqCst);
    let tool = match shape {
        "typed" => Tool::typed("ticket", "Files a ticket", move |input: Ticket, _ctx| {
            mark();
            let _ = (input.id, input.priority, input.tags, input.note);
            async { Ok::<_, String>(json!("filed")) }
        }),
        "plain" => {
            let tool = phaseo_agent::IntoTool::into_tool(add);
            // Plain arguments: the run flag is the call's result, checked below.
            return (tool, ran);
        }
        "json" => Tool::new(
            "rename",
            "Renames a thing",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 20},
                    "count": {"type": "integer", "minimum": 0}
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            move |input, _ctx| {
                mark();
                Ok(input)
            },
        ),
        "nested" => Tool::typed("order", "Places an order", move |_input: Order, _ctx| {
            mark();
            async { Ok::<_, String>(json!("placed")) }
        }),
        other => panic!("no tool shape `{other}` in this test"),
    };
    (tool, ran)
}

/// Runs one case in this process; the panic message says what went wrong.
fn run_case(case: &Case) {
    let (tool, ran) = tool_of(&case.tool);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let result = runtime.block_on(tool.invoke(&case.arguments, &ToolContext::detached()));
    let outcome = match &result {
        Ok(_) => "ok",
        Err(AgentError::InvalidInput(reason)) => {
            assert!(
                reason.starts_with('$'),
                "the reason names a JSON path: {reason}"
            );
            "invalid"
        }
        Err(other) => panic!("neither a result nor invalid input: {other}"),
    };
    let expected = case.today.as_deref().unwrap_or(&case.expect);
    assert_eq!(outcome, expected, "{result:?}");
    if case.tool != "plain" {
        assert_eq!(
            ran.load(Ordering::SeqCst),
            outcome == "ok",
            "the tool ran iff the case is ok"
        );
    }
}

/// The child's entry: runs the case named by `PHASEO_CORPUS_CASE`, if any (the parent test below
/// starts one child per case; in a plain `cargo test` run this returns at once).
#[test]
fn corpus_case() {
    if let Ok(index) = std::env::var(CASE_VAR) {
        let index: usize = index.parse().expect("a case number");
        run_case(&corpus()[index]);
    }
}

#[test]
fn the_bad_argument_corpus_gets_its_expected_outcomes() {
    if std::env::var(CASE_VAR).is_ok() {
        return; // a child process: only `corpus_case` runs
    }
    let cases = corpus();
    let shapes: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.tool.as_str()).collect();
    assert!(
        cases.len() >= 300 && shapes.len() >= 4,
        "{} cases over {shapes:?}",
        cases.len()
    );
    let exe = std::env::current_exe().expect("the test binary");
    let mut failures = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let output = std::process::Command::new(&exe)
            .args([
                "--exact",
                "bad_arguments::corpus_case",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CASE_VAR, index.to_string())
            .output()
            .expect("the test binary runs");
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let why: String = stderr
                .lines()
                .filter(|l| {
                    !l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && !l.contains(" at ")
                })
                .take(6)
                .collect::<Vec<_>>()
                .join("\n    ");
            let shown: String = case.arguments.chars().take(80).collect();
            failures.push(format!(
                "case {index} ({}, {}: {}), arguments {shown:?}: {}\n    {why}",
                case.tool, case.expect, case.why, output.status
            ));
        }
    }
    let known = cases.iter().filter(|c| c.today.is_some()).count();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    println!(
        "{} cases passed ({known} of them pinned to a known open defect)",
        cases.len()
    );
}

#[test]
fn a_case_that_crashes_fails_its_case_not_the_suite() {
    // The isolation itself: a child that aborts is reported as that case's failure.
    if std::env::var(CASE_VAR).is_ok() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(&exe)
        .args([
            "--exact",
            "bad_arguments::corpus_case",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CASE_VAR, "not a number")
        .output()
        .expect("the test binary runs");
    assert!(!output.status.success());
}

/// The input of the issue a new user hit: two fields, both wrong in one call.
#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Environment {
    Staging,
    Production,
}

#[allow(dead_code)]
#[derive(Deserialize, schemars::JsonSchema)]
struct Restart {
    name: String,
    environment: Environment,
}

/// What the model reads for the arguments, from the typed tool (whose fast path fails and whose
/// slow path validates), the same schema as a JSON tool (the validator only), and the typed tool
/// with a custom input check (parse, validate, check, decode the value): the three ways a call's
/// arguments are checked.
fn refusals(arguments: &str) -> [String; 3] {
    let typed = || {
        Tool::typed("restart", "Restarts a service", |_: Restart, _ctx| async {
            Ok::<_, String>("restarted")
        })
    };
    let json_tool = Tool::new(
        "restart",
        "Restarts a service",
        typed().parameters().clone(),
        |input, _ctx| Ok(input),
    );
    let checked = typed().input_schema(Ok::<_, String>);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let ctx = ToolContext::detached();
    [typed(), json_tool, checked].map(|tool| {
        let result = runtime.block_on(tool.invoke(arguments, &ctx));
        match result {
            Err(AgentError::InvalidInput(reason)) => reason,
            other => panic!("{arguments}: not refused as invalid input: {other:?}"),
        }
    })
}

#[test]
fn every_invalid_argument_is_reported_at_once_with_its_path() {
    for reason in refusals(r#"{"name": 42, "environment": "prod"}"#) {
        assert_eq!(
            reason,
            "$.environment: \"prod\" is not one of \"staging\", \"production\"\n\
             $.name: 42 is not of type \"string\""
        );
    }
    // A missing property is one of the errors; a value outside an enum gets the allowed values
    // (its type error would say less).
    for reason in refusals(r#"{"environment": 3}"#) {
        assert_eq!(
            reason,
            "$: \"name\" is a required property\n\
             $.environment: 3 is not one of \"staging\", \"production\""
        );
    }
}

/// Why a tool taking `{"tags": [<item_type>, ...]}` refuses the tags: the reason the model reads.
fn tags_refused(item_type: &str, tags: Value) -> String {
    let tool = Tool::new(
        "tag",
        "Tags things",
        json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": item_type}}}
        }),
        |input, _ctx| Ok(input),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let arguments = json!({ "tags": tags }).to_string();
    match runtime.block_on(tool.invoke(&arguments, &ToolContext::detached())) {
        Err(AgentError::InvalidInput(reason)) => reason,
        other => panic!("not refused as invalid input: {other:?}"),
    }
}

#[test]
fn the_list_of_errors_is_cut_with_a_count() {
    // Fifteen wrong tags, one error each: ten are listed, the other five counted.
    let reason = tags_refused("string", json!((0..15).collect::<Vec<usize>>()));
    let lines: Vec<&str> = reason.lines().collect();
    assert_eq!(
        lines.len(),
        phaseo_agent::schema::MAX_LISTED_ERRORS + 1,
        "{reason}"
    );
    assert_eq!(lines[0], r#"$.tags[0]: 0 is not of type "string""#);
    assert_eq!(lines[9], r#"$.tags[9]: 9 is not of type "string""#);
    assert_eq!(lines[10], "(and 5 more errors)");

    // Each error is cut on its own: a long value quoted in every one.
    let long = "x".repeat(5_000);
    let reason = tags_refused("integer", json!([&long, 1, &long]));
    let lines: Vec<&str> = reason.lines().collect();
    assert_eq!(lines.len(), 2, "{reason}");
    assert!(lines[0].starts_with("$.tags[0]: \"xxx"), "{}", lines[0]);
    assert!(lines[1].starts_with("$.tags[2]: \"xxx"), "{}", lines[1]);
    for line in lines {
        assert!(line.contains("characters cut"), "{line}");
        assert!(
            line.chars().count() < 700,
            "{} characters",
            line.chars().count()
        );
    }
}

#[test]
fn a_large_value_gets_its_first_error_and_a_note() {
    // Past 10,000 values, jsonschema's list of every error would cost memory in proportion to
    // the value: the first error is reported, and the note says why it is the only one.
    let reason = tags_refused("string", json!((0..20_000).collect::<Vec<usize>>()));
    assert_eq!(
        reason,
        "$.tags[0]: 0 is not of type \"string\"\n\
         (only the first error is listed: the value holds more than 10000 JSON values)"
    );
}
