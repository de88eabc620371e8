//! The runtime's spans and metrics, captured in memory through the same `tracing-opentelemetry`
//! layers a user installs: names, kinds, parents, links and attributes for a run that pauses and
//! is resumed by a second agent, a timeout, a rejection, a panic, a retried model error, a model
//! that fails, a recovered run, and content capture. Every `gen_ai.*` name the crate writes is
//! checked against the conventions' published registry.

use std::time::Duration;

use opentelemetry::trace::{SpanKind, Status};
use phaseo_agent::durable::{EnqueueOptions, Runs};
use phaseo_agent::store::{MemoryStore, PendingFilter, StoredStatus};
use phaseo_agent::telemetry::{CaptureContent, semconv};
use phaseo_agent::worker::Worker;
use phaseo_agent::{
    Agent, Decisions, ModelError, ModelErrorKind, ModelResponse, RetryPolicy, RunState,
    ScriptedModel, Tool, ToolCall, Usage,
};
use serde_json::json;

use crate::support::agent::{Counter, deploy_tool, status_tool};
use crate::support::durable::{ByPosition, Hooked};
use crate::support::otel::{attr, capture, children, named, names, one, text};

fn ops_agent(model: ScriptedModel, counter: &Counter) -> Agent {
    Agent::builder("ops")
        .model(model)
        .tool(status_tool(counter))
        .tool(deploy_tool(counter))
        .build()
        .unwrap()
}

#[test]
#[allow(deprecated)] // The registry crate marks GenAI names as moved to their own repository.
fn every_gen_ai_name_is_in_the_conventions_registry() {
    use opentelemetry_semantic_conventions::{attribute as a, metric as m};
    let checked = [
        (semconv::GEN_AI_OPERATION_NAME, a::GEN_AI_OPERATION_NAME),
        (semconv::GEN_AI_PROVIDER_NAME, a::GEN_AI_PROVIDER_NAME),
        (semconv::GEN_AI_REQUEST_MODEL, a::GEN_AI_REQUEST_MODEL),
        (semconv::GEN_AI_RESPONSE_MODEL, a::GEN_AI_RESPONSE_MODEL),
        (semconv::GEN_AI_RESPONSE_ID, a::GEN_AI_RESPONSE_ID),
        (
            semconv::GEN_AI_RESPONSE_FINISH_REASONS,
            a::GEN_AI_RESPONSE_FINISH_REASONS,
        ),
        (
            semconv::GEN_AI_USAGE_INPUT_TOKENS,
            a::GEN_AI_USAGE_INPUT_TOKENS,
        ),
        (
            semconv::GEN_AI_USAGE_OUTPUT_TOKENS,
            a::GEN_AI_USAGE_OUTPUT_TOKENS,
        ),
        (
            semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            a::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        ),
        (
            semconv::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            a::GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        ),
        (
            semconv::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
            a::GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        ),
        (semconv::GEN_AI_AGENT_NAME, a::GEN_AI_AGENT_NAME),
        (semconv::GEN_AI_CONVERSATION_ID, a::GEN_AI_CONVERSATION_ID),
        (semconv::GEN_AI_TOOL_NAME, a::GEN_AI_TOOL_NAME),
        (semconv::GEN_AI_TOOL_CALL_ID, a::GEN_AI_TOOL_CALL_ID),
        (semconv::GEN_AI_TOOL_TYPE, a::GEN_AI_TOOL_TYPE),
        (semconv::GEN_AI_TOOL_DESCRIPTION, a::GEN_AI_TOOL_DESCRIPTION),
        (
            semconv::GEN_AI_TOOL_CALL_ARGUMENTS,
            a::GEN_AI_TOOL_CALL_ARGUMENTS,
        ),
        (semconv::GEN_AI_TOOL_CALL_RESULT, a::GEN_AI_TOOL_CALL_RESULT),
        (semconv::GEN_AI_INPUT_MESSAGES, a::GEN_AI_INPUT_MESSAGES),
        (semconv::GEN_AI_OUTPUT_MESSAGES, a::GEN_AI_OUTPUT_MESSAGES),
        (
            semconv::GEN_AI_SYSTEM_INSTRUCTIONS,
            a::GEN_AI_SYSTEM_INSTRUCTIONS,
        ),
        (semconv::GEN_AI_TOKEN_TYPE, a::GEN_AI_TOKEN_TYPE),
        (semconv::ERROR_TYPE, a::ERROR_TYPE),
        (semconv::SERVER_ADDRESS, a::SERVER_ADDRESS),
        (semconv::SERVER_PORT, a::SERVER_PORT),
        (
            semconv::GEN_AI_CLIENT_OPERATION_DURATION,
            m::GEN_AI_CLIENT_OPERATION_DURATION,
        ),
        (
            semconv::GEN_AI_CLIENT_TOKEN_USAGE,
            m::GEN_AI_CLIENT_TOKEN_USAGE,
        ),
    ];
    for (ours, registry) in checked {
        assert_eq!(ours, registry);
    }
    // No other `gen_ai.*` name appears anywhere in the runtime's source: a new one must be
    // added above, where it is checked.
    let known: Vec<&str> = checked.iter().map(|(ours, _)| *ours).collect();
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../phaseo-agent/src");
    let mut files = vec![std::path::PathBuf::from(src)];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (at, _) in source.match_indices("\"gen_ai.") {
            let name = &source[at + 1..];
            let name = &name[..name.find('"').unwrap()];
            // A metric's measurement field (`histogram.gen_ai...`) starts before the quote.
            assert!(
                known.contains(&name),
                "{}: `{name}` is not checked against the registry",
                path.display()
            );
            seen += 1;
        }
    }
    let gen_ai = known.iter().filter(|n| n.starts_with("gen_ai.")).count();
    assert!(
        seen >= gen_ai,
        "the source scan found {seen} names, fewer than {gen_ai}"
    );
    let metric_fields = include_str!("../../phaseo-agent/src/telemetry/metric.rs");
    for metric in [
        semconv::GEN_AI_CLIENT_OPERATION_DURATION,
        semconv::GEN_AI_CLIENT_TOKEN_USAGE,
    ] {
        assert!(metric_fields.contains(&format!("\"histogram.{metric}\"")));
    }
}

/// A run that calls `get_status`, then `deploy` (gated), pauses; a second agent built from the
/// same parts resumes it from its JSON, as another process would.
#[tokio::test]
async fn a_paused_run_resumed_by_a_second_agent_links_to_the_span_that_paused_it() {
    let captured = capture();
    let counter = Counter::default();
    let model = || {
        ScriptedModel::new()
            .turn(
                ModelResponse::tool_calls([ToolCall::new(
                    "c1",
                    "get_status",
                    json!({"service": "api"}),
                )])
                .usage(Usage::new(120, 7).cached_input_tokens(100))
                .id("resp_1")
                .model("scripted-2026-12"),
            )
            .tool_call("c2", "deploy", json!({"environment": "prod"}))
            .text("Deployed.")
    };
    let paused = ops_agent(model(), &counter).run("Deploy").await.unwrap();
    let json = paused.state.to_json();
    let run_id = paused.state.run_id().to_owned();

    // Another agent value: nothing shared with the first but the stored text.
    let state = RunState::from_json(&json).unwrap();
    let resuming = ops_agent(ScriptedModel::new().text("Deployed."), &Counter::default());
    let done = resuming
        .resume(&state, Decisions::for_run(&run_id).approve("c2"))
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Deployed."));

    let spans = captured.spans();
    let runs = named(&spans, "invoke_agent ops");
    assert_eq!(runs.len(), 2, "{:?}", names(&spans));
    let (first, second) = (runs[0], runs[1]);
    for run in [first, second] {
        assert_eq!(run.span_kind, SpanKind::Internal);
        assert_eq!(text(run, semconv::GEN_AI_OPERATION_NAME), "invoke_agent");
        assert_eq!(text(run, semconv::GEN_AI_AGENT_NAME), "ops");
        assert_eq!(text(run, semconv::GEN_AI_CONVERSATION_ID), run_id);
        assert_eq!(text(run, semconv::PHASEO_RUN_ID), run_id);
    }
    assert_eq!(text(first, semconv::PHASEO_RUN_STATUS), "waiting_for_human");
    assert_eq!(text(first, semconv::PHASEO_PAUSE_KIND), "tool_approval");
    assert_eq!(text(second, semconv::PHASEO_RUN_STATUS), "completed");
    assert_eq!(text(second, semconv::PHASEO_RUN_RESUMED), "true");

    // The state kept the paused span's context, and the resumed span links to it.
    let kept = state
        .trace_context()
        .expect("the paused state keeps its trace context");
    let paused_ctx = &first.span_context;
    assert_eq!(
        kept.traceparent(),
        format!("00-{}-{}-01", paused_ctx.trace_id(), paused_ctx.span_id())
    );
    let links: Vec<_> = second.links.iter().collect();
    assert_eq!(links.len(), 1, "one link, to the paused span");
    assert_eq!(links[0].span_context.trace_id(), paused_ctx.trace_id());
    assert_eq!(links[0].span_context.span_id(), paused_ctx.span_id());
    assert!(
        links[0]
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == semconv::PHASEO_LINK_KIND && kv.value.as_str() == "paused")
    );
    // The decision is an event of the resumed span.
    let decision = second
        .events
        .iter()
        .find(|e| e.name == semconv::EVENT_DECISION)
        .expect("a decision event");
    let event_attr = |key: &str| {
        decision
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        event_attr(semconv::PHASEO_DECISION).as_deref(),
        Some("approve")
    );
    assert_eq!(
        event_attr(semconv::GEN_AI_TOOL_CALL_ID).as_deref(),
        Some("c2")
    );
    assert_eq!(
        event_attr(semconv::GEN_AI_TOOL_NAME).as_deref(),
        Some("deploy")
    );

    // Model requests: two before the pause, one after, each a CLIENT child of its run's span.
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 3);
    assert_eq!(
        children(&spans, first)
            .iter()
            .filter(|s| s.name == "chat scripted")
            .count(),
        2
    );
    assert_eq!(
        children(&spans, second)
            .iter()
            .filter(|s| s.name == "chat scripted")
            .count(),
        1
    );
    let chat = chats[0];
    assert_eq!(chat.span_kind, SpanKind::Client);
    assert_eq!(text(chat, semconv::GEN_AI_OPERATION_NAME), "chat");
    assert_eq!(text(chat, semconv::GEN_AI_PROVIDER_NAME), "scripted");
    assert_eq!(text(chat, semconv::GEN_AI_REQUEST_MODEL), "scripted");
    // The model that answered, as the response names it; the model asked for otherwise.
    assert_eq!(
        text(chat, semconv::GEN_AI_RESPONSE_MODEL),
        "scripted-2026-12"
    );
    assert_eq!(text(chats[1], semconv::GEN_AI_RESPONSE_MODEL), "scripted");
    assert_eq!(text(chat, semconv::GEN_AI_RESPONSE_ID), "resp_1");
    assert_eq!(text(chat, semconv::GEN_AI_USAGE_INPUT_TOKENS), "120");
    assert_eq!(text(chat, semconv::GEN_AI_USAGE_OUTPUT_TOKENS), "7");
    assert_eq!(
        text(chat, semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        "100"
    );
    // Counts are integers in the exported span, which a backend can sum, not strings.
    for (key, n) in [
        (semconv::GEN_AI_USAGE_INPUT_TOKENS, 120),
        (semconv::GEN_AI_USAGE_OUTPUT_TOKENS, 7),
        (semconv::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, 100),
    ] {
        assert_eq!(
            attr(chat, key),
            Some(&opentelemetry::Value::I64(n)),
            "{key}"
        );
    }
    let reasons = attr(chat, semconv::GEN_AI_RESPONSE_FINISH_REASONS).expect("finish reasons");
    assert!(
        matches!(reasons, opentelemetry::Value::Array(_)),
        "a string array: {reasons:?}"
    );
    assert_eq!(reasons.to_string(), "[\"tool_call\"]");

    // Calls: get_status ran (ok); deploy paused, then ran after the resume (ok).
    let status = one(&spans, "execute_tool get_status");
    assert_eq!(status.span_kind, SpanKind::Internal);
    assert_eq!(status.parent_span_id, first.span_context.span_id());
    assert_eq!(text(status, semconv::GEN_AI_TOOL_NAME), "get_status");
    assert_eq!(text(status, semconv::GEN_AI_TOOL_CALL_ID), "c1");
    assert_eq!(text(status, semconv::GEN_AI_TOOL_TYPE), "function");
    assert_eq!(
        text(status, semconv::GEN_AI_TOOL_DESCRIPTION),
        "Get the current service status"
    );
    assert_eq!(text(status, semconv::PHASEO_CALL_OUTCOME), "ok");
    assert_eq!(
        attr(status, semconv::PHASEO_CALL_ATTEMPT),
        Some(&opentelemetry::Value::I64(0)),
        "a first run is attempt 0"
    );
    let deploys = named(&spans, "execute_tool deploy");
    assert_eq!(deploys.len(), 2);
    assert_eq!(deploys[0].parent_span_id, first.span_context.span_id());
    assert_eq!(text(deploys[0], semconv::PHASEO_CALL_OUTCOME), "paused");
    assert_eq!(
        text(deploys[0], semconv::PHASEO_PAUSE_KIND),
        "tool_approval"
    );
    assert_eq!(deploys[1].parent_span_id, second.span_context.span_id());
    assert_eq!(text(deploys[1], semconv::PHASEO_CALL_OUTCOME), "ok");

    // Content is off by default: no messages, arguments or results recorded.
    for span in &spans {
        for key in [
            semconv::GEN_AI_INPUT_MESSAGES,
            semconv::GEN_AI_OUTPUT_MESSAGES,
            semconv::GEN_AI_SYSTEM_INSTRUCTIONS,
            semconv::GEN_AI_TOOL_CALL_ARGUMENTS,
            semconv::GEN_AI_TOOL_CALL_RESULT,
        ] {
            assert!(attr(span, key).is_none(), "{}: {key} recorded", span.name);
        }
    }

    // Metrics in the same conventions.
    let durations = captured.points(semconv::GEN_AI_CLIENT_OPERATION_DURATION);
    assert_eq!(durations.iter().map(|p| p.count).sum::<u64>(), 3);
    assert!(
        durations
            .iter()
            .all(|p| p.attributes[semconv::GEN_AI_OPERATION_NAME] == "chat"
                && p.attributes[semconv::GEN_AI_PROVIDER_NAME] == "scripted")
    );
    let tokens = captured.points(semconv::GEN_AI_CLIENT_TOKEN_USAGE);
    let of = |kind: &str| {
        tokens
            .iter()
            .find(|p| p.attributes[semconv::GEN_AI_TOKEN_TYPE] == kind)
            .map(|p| p.sum)
    };
    assert_eq!((of("input"), of("output")), (Some(120.0), Some(7.0)));
    let calls = captured.points(semconv::PHASEO_TOOL_CALLS);
    let count = |tool: &str, outcome: &str| {
        calls
            .iter()
            .filter(|p| {
                p.attributes[semconv::GEN_AI_TOOL_NAME] == tool
                    && p.attributes[semconv::PHASEO_CALL_OUTCOME] == outcome
            })
            .map(|p| p.count)
            .sum::<u64>()
    };
    assert_eq!(count("get_status", "ok"), 1);
    // A call that succeeded has no `error.type`, not an empty one.
    assert!(
        calls
            .iter()
            .filter(|p| p.attributes[semconv::PHASEO_CALL_OUTCOME] == "ok")
            .all(|p| !p.attributes.contains_key(semconv::ERROR_TYPE)),
        "{calls:?}"
    );
    assert_eq!(count("deploy", "paused"), 1);
    assert_eq!(count("deploy", "ok"), 1);
    let pauses = captured.points(semconv::PHASEO_RUN_PAUSES);
    assert_eq!(pauses.iter().map(|p| p.count).sum::<u64>(), 1);
    assert_eq!(
        pauses[0].attributes[semconv::PHASEO_PAUSE_KIND],
        "tool_approval"
    );
    let waits = captured.points(semconv::PHASEO_RUN_WAIT_DURATION);
    assert_eq!(waits.iter().map(|p| p.count).sum::<u64>(), 1);
    let ran = captured.points(semconv::PHASEO_TOOL_CALL_DURATION);
    assert_eq!(ran.iter().map(|p| p.count).sum::<u64>(), 2, "two calls ran");
}

#[tokio::test(start_paused = true)]
async fn a_timeout_a_panic_and_a_rejection_end_their_spans_as_such() {
    let captured = capture();
    let slow = Tool::new("slow", "Sleeps", json!({"type": "object"}), |_, _| async {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("late"))
    })
    .timeout(Duration::from_millis(100));
    let panics = Tool::new(
        "panics",
        "Panics",
        json!({"type": "object"}),
        |_, _| -> Result<serde_json::Value, phaseo_agent::AgentError> {
            panic!("index out of bounds")
        },
    );
    let counter = Counter::default();
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("c1", "slow", json!({})),
            ToolCall::new("c2", "panics", json!({})),
            ToolCall::new("c3", "deploy", json!({"environment": "prod"})),
        ])
        .text("Done.");
    let agent = Agent::builder("ops")
        .model(model)
        .tool(slow)
        .tool(panics)
        .tool(deploy_tool(&counter))
        .build()
        .unwrap();
    let paused = agent.run("Go").await.unwrap();
    let run_id = paused.state.run_id().to_owned();
    let done = agent
        .resume(
            &paused.state,
            Decisions::for_run(&run_id).reject("c3", "not today"),
        )
        .await
        .unwrap();
    assert_eq!(done.output(), Some("Done."));
    assert_eq!(counter.get(), 0);

    let spans = captured.spans();
    let slow = one(&spans, "execute_tool slow");
    assert_eq!(text(slow, semconv::PHASEO_CALL_OUTCOME), "timed_out");
    assert_eq!(text(slow, semconv::ERROR_TYPE), "timeout");
    assert!(matches!(slow.status, Status::Error { .. }));
    let panicked = one(&spans, "execute_tool panics");
    assert_eq!(text(panicked, semconv::PHASEO_CALL_OUTCOME), "error");
    assert_eq!(text(panicked, semconv::ERROR_TYPE), "panicked");
    // The panic's message is operator detail that may carry what the tool was given: the
    // status says only the kind unless content is captured.
    assert_eq!(
        panicked.status,
        Status::Error {
            description: "panicked".into()
        }
    );
    let deploys = named(&spans, "execute_tool deploy");
    assert_eq!(deploys.len(), 2);
    assert_eq!(text(deploys[0], semconv::PHASEO_CALL_OUTCOME), "paused");
    assert_eq!(text(deploys[1], semconv::PHASEO_CALL_OUTCOME), "rejected");
    let resumed = &named(&spans, "invoke_agent ops")[1];
    let decision = resumed
        .events
        .iter()
        .find(|e| e.name == semconv::EVENT_DECISION)
        .expect("a decision event");
    assert!(
        decision
            .attributes
            .iter()
            .any(|kv| kv.key.as_str() == semconv::PHASEO_DECISION && kv.value.as_str() == "reject")
    );
    let calls = captured.points(semconv::PHASEO_TOOL_CALLS);
    let outcomes: std::collections::BTreeSet<String> = calls
        .iter()
        .map(|p| p.attributes[semconv::PHASEO_CALL_OUTCOME].clone())
        .collect();
    assert_eq!(
        outcomes.into_iter().collect::<Vec<_>>(),
        ["error", "paused", "rejected", "timed_out"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retried_model_error_is_an_event_of_one_chat_span_and_a_failure_its_status() {
    let captured = capture();
    let model = ScriptedModel::new()
        .error(ModelError::new(ModelErrorKind::Overloaded, "busy"))
        .text("Hello.");
    let retries = RetryPolicy::default()
        .max_retries(1)
        .initial_backoff(Duration::from_millis(10));
    let agent = Agent::builder("ops")
        .model(model)
        .model_retries(retries)
        .build()
        .unwrap();
    agent.run("Hi").await.unwrap();
    let failing = Agent::builder("failing")
        .model(
            ScriptedModel::new().error(ModelError::new(ModelErrorKind::Authentication, "no key")),
        )
        .build()
        .unwrap();
    let failed = failing.run("Hi").await.unwrap_err();
    assert_eq!(failed.error.kind().as_str(), "model");

    let spans = captured.spans();
    let chats = named(&spans, "chat scripted");
    assert_eq!(chats.len(), 2, "one span per request, retries included");
    let retried = chats[0];
    let retry = retried
        .events
        .iter()
        .find(|e| e.name == semconv::EVENT_RETRY)
        .expect("a retry event");
    let attribute = |key: &str| {
        retry
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(
        attribute(semconv::PHASEO_RETRY_ATTEMPT).as_deref(),
        Some("1")
    );
    assert_eq!(
        attribute(semconv::ERROR_TYPE).as_deref(),
        Some("overloaded")
    );
    assert_eq!(retried.status, Status::Unset);
    let broken = chats[1];
    assert_eq!(text(broken, semconv::ERROR_TYPE), "authentication");
    assert!(matches!(broken.status, Status::Error { .. }));
    let run = one(&spans, "invoke_agent failing");
    assert_eq!(text(run, semconv::PHASEO_RUN_STATUS), "failed");
    assert_eq!(text(run, semconv::ERROR_TYPE), "model");
    let durations = captured.points(semconv::GEN_AI_CLIENT_OPERATION_DURATION);
    assert!(durations.iter().any(
        |p| p.attributes.get(semconv::ERROR_TYPE).map(String::as_str) == Some("authentication")
    ));
}

#[tokio::test]
async fn content_is_recorded_only_when_asked_redacted_and_capped() {
    let captured = capture();
    let counter = Counter::default();
    let model = ScriptedModel::new()
        .tool_call("c1", "get_status", json!({"service": "secret-api"}))
        .text("The secret-api is healthy.");
    let agent = Agent::builder("ops")
        .instructions("You watch services.")
        .model(model)
        .tool(status_tool(&counter))
        .capture_content(
            CaptureContent::on().redact(|_, text| text.replace("secret", "[redacted]")),
        )
        .build()
        .unwrap();
    agent.run("How is secret-api?").await.unwrap();
    let spans = captured.spans();
    let call = one(&spans, "execute_tool get_status");
    assert_eq!(
        text(call, semconv::GEN_AI_TOOL_CALL_ARGUMENTS),
        r#"{"service":"[redacted]-api"}"#
    );
    assert!(text(call, semconv::GEN_AI_TOOL_CALL_RESULT).contains("[redacted]-api"));
    let chats = named(&spans, "chat scripted");
    let input = text(chats[1], semconv::GEN_AI_INPUT_MESSAGES);
    let messages: serde_json::Value = serde_json::from_str(&input).unwrap();
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["parts"][0]["content"], "How is [redacted]-api?");
    assert_eq!(messages[1]["parts"][0]["type"], "tool_call");
    assert_eq!(messages[2]["parts"][0]["type"], "tool_call_response");
    assert_eq!(
        text(chats[0], semconv::GEN_AI_SYSTEM_INSTRUCTIONS),
        r#"[{"content":"You watch services.","type":"text"}]"#
    );
    let output: serde_json::Value =
        serde_json::from_str(&text(chats[1], semconv::GEN_AI_OUTPUT_MESSAGES)).unwrap();
    assert_eq!(
        output[0]["parts"][0]["content"],
        "The [redacted]-api is healthy."
    );
    // Capped: a text longer than the cap is cut, and says so.
    let capped = Agent::builder("capped")
        .model(ScriptedModel::new().text("Fine."))
        .capture_content(CaptureContent::on().max_bytes(20))
        .build()
        .unwrap();
    capped
        .run("a question much longer than twenty bytes")
        .await
        .unwrap();
    let spans = captured.spans();
    let chat = named(&spans, "chat scripted").pop().unwrap();
    let input = text(chat, semconv::GEN_AI_INPUT_MESSAGES);
    assert!(input.len() <= 20 + "…[truncated]".len(), "{input}");
    assert!(input.ends_with("…[truncated]"), "{input}");
    drop(captured);

    // The environment variable the other languages' instrumentations read turns it on, for
    // agents built while it is set. Set in a child process: setting it here would race the
    // other tests of this process (and `set_var` needs `unsafe`, which the workspace forbids).
    let exe = std::env::current_exe().unwrap();
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "telemetry::capture_from_env_child",
            "--ignored",
            "--nocapture",
        ])
        .env(semconv::CAPTURE_CONTENT_ENV, "TRUE")
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "{}",
        String::from_utf8_lossy(&child.stdout)
    );
    assert!(String::from_utf8_lossy(&child.stdout).contains("1 passed"));
}

/// Run by `content_is_recorded_only_when_asked_redacted_and_capped` in a child process with
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=TRUE`.
#[tokio::test]
#[ignore = "run as a child process by content_is_recorded_only_when_asked_redacted_and_capped"]
async fn capture_from_env_child() {
    assert!(CaptureContent::from_env().is_on());
    let captured = capture();
    let counter = Counter::default();
    let model = ScriptedModel::new()
        .tool_call("c1", "get_status", json!({"service": "api"}))
        .text("Fine.");
    ops_agent(model, &counter).run("How?").await.unwrap();
    let spans = captured.spans();
    let call = one(&spans, "execute_tool get_status");
    assert_eq!(
        text(call, semconv::GEN_AI_TOOL_CALL_ARGUMENTS),
        r#"{"service":"api"}"#
    );
    // A setting on the agent wins over the environment.
    let quiet = Agent::builder("quiet")
        .model(ScriptedModel::new().text("Hi."))
        .capture_content(CaptureContent::off())
        .build()
        .unwrap();
    quiet.run("Hello").await.unwrap();
    let spans = captured.spans();
    let chat = named(&spans, "chat scripted").pop().unwrap();
    assert!(attr(chat, semconv::GEN_AI_INPUT_MESSAGES).is_none());
}

#[tokio::test]
async fn without_an_opentelemetry_layer_a_state_keeps_no_trace_context() {
    let counter = Counter::default();
    let model = ScriptedModel::new().tool_call("c1", "deploy", json!({"environment": "prod"}));
    let paused = ops_agent(model, &counter).run("Deploy").await.unwrap();
    assert!(paused.state.trace_context().is_none());
    assert!(!paused.state.to_json().contains("traceparent"));
}

/// Through a store: the decision a person recorded (`Runs::decide`) is an event of the span that
/// resumes the run, with who made it and when.
#[tokio::test]
async fn a_stored_decision_says_who_decided_and_when() {
    let captured = capture();
    let counter = Counter::default();
    let runs = Runs::new(MemoryStore::new());
    let model = ScriptedModel::new()
        .tool_call("c1", "deploy", json!({"environment": "prod"}))
        .text("Deployed.");
    let agent = runs.attach(ops_agent(model, &counter));
    let paused = agent.run("Deploy").await.unwrap();
    let run_id = paused.state.run_id().to_owned();
    let waiting = runs.pending(&PendingFilter::default()).await.unwrap();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    runs.decide(&waiting.items[0], phaseo_agent::Decision::Approve, "ada")
        .await
        .unwrap();
    let done = agent.resume(&run_id).await.unwrap();
    assert_eq!(done.output(), Some("Deployed."));

    let spans = captured.spans();
    let resumed = &named(&spans, "invoke_agent ops")[1];
    let decision = resumed
        .events
        .iter()
        .find(|e| e.name == semconv::EVENT_DECISION)
        .expect("a decision event");
    let attribute = |key: &str| {
        decision
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
            .unwrap_or_default()
    };
    assert_eq!(attribute(semconv::PHASEO_DECISION_BY), "ada");
    let at: u64 = attribute(semconv::PHASEO_DECISION_AT_MS).parse().unwrap();
    assert!(at >= before, "{at} < {before}");
    // The stored run kept its trace context through the store's journal, and the span says
    // which version of the run it wrote last.
    let stored = runs.load(&run_id).await.unwrap();
    assert!(stored.state.trace_context().is_some());
    assert_eq!(
        text(resumed, semconv::PHASEO_RUN_VERSION),
        stored.version.to_string()
    );
}

/// A run whose process stopped mid-call is recovered: the recovery's span links to the span that
/// was running (its context was kept from the start), and the call in doubt ends as `in_doubt`.
#[tokio::test]
async fn a_recovered_run_links_to_the_interrupted_span_and_its_doubtful_call_says_so() {
    let captured = capture();
    let memory = std::sync::Arc::new(MemoryStore::new());
    // started (1), the turn with its call's start (2): the process dies after the tool ran.
    let dying = Runs::without_queue(std::sync::Arc::new(Hooked::dies_after(memory.clone(), 2)))
        .lease(Duration::from_millis(100));
    let counter = Counter::default();
    let model = || {
        ScriptedModel::new()
            .tool_call("c1", "get_status", json!({"service": "api"}))
            .text("Fine.")
    };
    let _ = dying
        .attach(ops_agent(model(), &counter))
        .run("How?")
        .run_id("r")
        .await;
    // The dead process's lease runs out.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let runs = Runs::from_arc(memory);
    let recovered = runs
        .attach(ops_agent(model(), &counter))
        .recover("r")
        .await
        .unwrap();
    assert_eq!(recovered.pending().len(), 1);

    let spans = captured.spans();
    let both = named(&spans, "invoke_agent ops");
    assert_eq!(both.len(), 2);
    let (interrupted, recovery) = (both[0], both[1]);
    let link = recovery.links.iter().next().expect("a link");
    assert_eq!(
        link.span_context.span_id(),
        interrupted.span_context.span_id()
    );
    assert!(link.attributes.iter().any(
        |kv| kv.key.as_str() == semconv::PHASEO_LINK_KIND && kv.value.as_str() == "interrupted"
    ));
    let calls = named(&spans, "execute_tool get_status");
    let last = calls.last().unwrap();
    assert_eq!(last.parent_span_id, recovery.span_context.span_id());
    assert_eq!(text(last, semconv::PHASEO_CALL_OUTCOME), "in_doubt");
    assert_eq!(text(last, semconv::PHASEO_PAUSE_KIND), "outcome_unknown");
}

/// A worker's metrics: how long each run waited to be claimed, how each run it held ended, and,
/// with `queue_metrics` on, the store's queue counts as gauges (an agent it does not serve too).
#[tokio::test(flavor = "current_thread")]
async fn workers_report_claim_waits_their_runs_and_the_queue() {
    let captured = capture();
    let runs = Runs::new(MemoryStore::new());
    let agent = Agent::builder("release")
        .model(ByPosition(vec![ModelResponse::text("Done.")]))
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for input in ["one", "two"] {
        ids.push(
            runs.enqueue("release", input, EnqueueOptions::new())
                .await
                .unwrap(),
        );
    }
    runs.enqueue("billing", "unserved", EnqueueOptions::new())
        .await
        .unwrap();
    let worker = Worker::new(runs.clone())
        .agent(agent)
        .queue_metrics(Duration::from_millis(20));
    let serving = tokio::spawn(worker.run());
    for _ in 0..500 {
        let mut done = true;
        for id in &ids {
            done &= runs.load(id).await.unwrap().status == StoredStatus::Completed;
        }
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Past one report of the queue after both completed.
    tokio::time::sleep(Duration::from_millis(100)).await;
    serving.abort();

    // A queued run that a worker begins is a new run, not a resumption.
    let spans = captured.spans();
    let begun = named(&spans, "invoke_agent release");
    assert_eq!(begun.len(), 2);
    for span in begun {
        assert_eq!(
            attr(span, semconv::PHASEO_RUN_RESUMED),
            Some(&opentelemetry::Value::Bool(false))
        );
        assert!(span.links.is_empty());
    }
    let waits = captured.points(semconv::PHASEO_WORKER_CLAIM_WAIT);
    assert_eq!(waits.iter().map(|p| p.count).sum::<u64>(), 2);
    assert_eq!(waits[0].attributes[semconv::GEN_AI_AGENT_NAME], "release");
    let held = captured.points(semconv::PHASEO_WORKER_RUNS);
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(
        held[0].attributes[semconv::PHASEO_WORKER_OUTCOME],
        "completed"
    );
    assert_eq!(held[0].count, 2);
    let gauge = captured.points(semconv::PHASEO_QUEUE_RUNS);
    let runs_in = |agent: &str, state: &str| {
        gauge
            .iter()
            .find(|p| {
                p.attributes[semconv::GEN_AI_AGENT_NAME] == agent
                    && p.attributes[semconv::PHASEO_QUEUE_STATE] == state
            })
            .map(|p| p.count)
    };
    assert_eq!(runs_in("release", "completed"), Some(2));
    assert_eq!(runs_in("release", "ready"), Some(0));
    assert_eq!(runs_in("billing", "ready"), Some(1));
    let oldest = captured.points(semconv::PHASEO_QUEUE_OLDEST_READY);
    let billing = oldest
        .iter()
        .find(|p| p.attributes[semconv::GEN_AI_AGENT_NAME] == "billing")
        .expect("the unserved agent's oldest ready run");
    assert!(billing.sum > 0.0, "{billing:?}");
}
