//! Spans and metrics exported over OTLP/HTTP to a receiver that decodes them with the official
//! protobuf definitions (`interop/otlp.sh`, PyPI `opentelemetry-proto`), which writes each span
//! and metric point as a JSON line with its attributes' OTLP types. The `tracing_otlp` example,
//! run as a process against it: a run that pauses and a second agent that resumes it from the
//! stored JSON, linked across the pause.
//!
//! Run by `interop/run.sh` (`--ignored`); without the receiver's URL and dump the tests fail,
//! never pass.

use std::collections::HashSet;
use std::process::Command;

use phaseo_agent::telemetry::semconv;
use serde_json::{Value, json};

/// The receiver's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
pub(super) fn otlp_url() -> String {
    std::env::var("PHASEO_INTEROP_OTLP_URL").expect(
        "PHASEO_INTEROP_OTLP_URL is not set: run the interop suite with interop/run.sh, which \
         starts the OTLP receiver",
    )
}

/// Every line the receiver wrote so far.
pub(super) fn received() -> Vec<Value> {
    let dump = std::env::var("PHASEO_INTEROP_OTLP_DUMP").expect(
        "PHASEO_INTEROP_OTLP_DUMP is not set: run the interop suite with interop/run.sh, which \
         starts the OTLP receiver",
    );
    let text = std::fs::read_to_string(&dump).unwrap_or_else(|e| panic!("{dump}: {e}"));
    text.lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// The received spans of the run `run_id`: its `invoke_agent` spans and everything in their
/// traces.
pub(super) fn run_spans(run_id: &str) -> Vec<Value> {
    let lines = received();
    let spans = lines.iter().filter(|l| l["signal"] == "span");
    let traces: HashSet<String> = spans
        .clone()
        .filter(|s| s["attributes"][semconv::GEN_AI_CONVERSATION_ID] == json!({"string": run_id}))
        .map(|s| s["trace_id"].as_str().unwrap().to_owned())
        .collect();
    spans
        .filter(|s| traces.contains(s["trace_id"].as_str().unwrap()))
        .cloned()
        .collect()
}

/// A received `chat` span: CLIENT, of `provider`, with its input and output token counts as
/// integers above 0.
pub(super) fn assert_chat_span(chat: &Value, provider: &str) {
    assert_eq!(chat["kind"], "SPAN_KIND_CLIENT");
    assert_eq!(
        attr(chat, semconv::GEN_AI_PROVIDER_NAME),
        &json!({"string": provider})
    );
    for key in [
        semconv::GEN_AI_USAGE_INPUT_TOKENS,
        semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
    ] {
        let count = attr(chat, key)["int"].as_i64();
        assert!(
            count.is_some_and(|n| n > 0),
            "{key} is an integer above 0: {}",
            attr(chat, key)
        );
    }
}

/// An attribute as the receiver decoded it: `{"int": 3}`, `{"string": "x"}`, ...
pub(super) fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

#[test]
#[ignore = "run by interop/run.sh"]
fn the_example_exports_a_paused_run_linked_to_its_resumption() {
    let url = otlp_url();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let output = Command::new(env!("CARGO"))
        .current_dir(root)
        .args([
            "run",
            "-q",
            "--example",
            "tracing_otlp",
            "--features",
            "otel",
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the example failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.lines().any(|l| l == "exported"),
        "the example says it exported: {stdout}"
    );
    // `paused run RUN_ID under 00-TRACE-SPAN-01`
    let paused_line = stdout
        .lines()
        .find(|l| l.starts_with("paused run "))
        .expect("the example prints the paused run");
    let words: Vec<&str> = paused_line.split(' ').collect();
    let (run_id, traceparent) = (words[2], words[4]);
    let (paused_trace, paused_span) = (&traceparent[3..35], &traceparent[36..52]);

    let spans = run_spans(run_id);
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    let runs = named(&spans, "invoke_agent ops");
    assert_eq!(runs.len(), 2, "{names:?}");
    for run in &runs {
        assert_eq!(run["kind"], "SPAN_KIND_INTERNAL");
        assert_eq!(run["service"], "phaseo-tracing-otlp-example");
        assert_eq!(
            attr(run, semconv::GEN_AI_OPERATION_NAME),
            &json!({"string": "invoke_agent"})
        );
        assert_eq!(
            attr(run, semconv::GEN_AI_AGENT_NAME),
            &json!({"string": "ops"})
        );
    }
    let paused = runs
        .iter()
        .find(|r| r["span_id"] == paused_span)
        .expect("the paused span, as the stored state names it");
    assert_eq!(paused["trace_id"], paused_trace);
    assert_eq!(
        attr(paused, semconv::PHASEO_RUN_STATUS),
        &json!({"string": "waiting_for_human"})
    );
    let resumed = runs
        .iter()
        .find(|r| r["span_id"] != paused_span)
        .expect("the resumed span");
    assert_eq!(
        attr(resumed, semconv::PHASEO_RUN_RESUMED),
        &json!({"bool": true})
    );
    assert_eq!(
        resumed["links"],
        json!([{
            "trace_id": paused_trace,
            "span_id": paused_span,
            "attributes": {semconv::PHASEO_LINK_KIND: {"string": "paused"}},
        }]),
        "the resumed run links to the span that paused"
    );

    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 3, "{names:?}");
    for chat in &chats {
        assert!(
            runs.iter().any(|r| r["span_id"] == chat["parent_span_id"]),
            "a chat span under a run's span"
        );
        assert_chat_span(chat, "scripted");
    }
    assert_eq!(
        attr(chats[0], semconv::GEN_AI_USAGE_INPUT_TOKENS),
        &json!({"int": 120})
    );
    for (name, tool) in [
        ("execute_tool get_status", "get_status"),
        ("execute_tool deploy", "deploy"),
    ] {
        let calls = named(&spans, name);
        assert!(!calls.is_empty(), "{name} in {names:?}");
        for call in calls {
            assert_eq!(call["kind"], "SPAN_KIND_INTERNAL");
            assert_eq!(
                attr(call, semconv::GEN_AI_TOOL_NAME),
                &json!({"string": tool})
            );
        }
    }

    // The metrics arrived, with the conventions' bucket boundaries.
    let lines = received();
    let metrics: Vec<&Value> = lines
        .iter()
        .filter(|l| l["signal"] == "metric" && l["service"] == "phaseo-tracing-otlp-example")
        .collect();
    let metric = |name: &str| -> &Value {
        metrics
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no metric {name}"))
    };
    let duration = metric(semconv::GEN_AI_CLIENT_OPERATION_DURATION);
    assert_eq!(duration["type"], "histogram");
    assert_eq!(duration["unit"], "s");
    assert_eq!(
        duration["bounds"],
        json!(semconv::OPERATION_DURATION_BUCKETS)
    );
    let tokens = metric(semconv::GEN_AI_CLIENT_TOKEN_USAGE);
    assert_eq!(tokens["bounds"], json!(semconv::TOKEN_USAGE_BUCKETS));
    assert!(tokens["sum"].as_f64().unwrap() > 0.0);
    let wait = metric(semconv::PHASEO_RUN_WAIT_DURATION);
    assert_eq!(wait["bounds"], json!(semconv::WAIT_DURATION_BUCKETS));
    let calls = metric(semconv::PHASEO_TOOL_CALLS);
    assert_eq!(calls["type"], "sum");
    assert_eq!(calls["monotonic"], true);
    let pauses = metric(semconv::PHASEO_RUN_PAUSES);
    assert!(pauses["value"].as_i64().is_some_and(|n| n >= 1), "{pauses}");
}
