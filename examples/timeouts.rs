//! Timeouts: a per-tool `.timeout(..)` and the agent's `.default_timeout(..)`. At the deadline the
//! call is reported at once as a tool error (`{"error": "Tool x timed out after Nms"}`, returned to
//! the model under the default error policy), the tool's future is dropped, its cancellation token
//! (`ctx.cancellation_token()`) fires, and the run goes on. Shown with:
//!
//! - an async tool that honours the token (its spawned background job stops when it fires);
//! - an async tool that ignores the token (it is stopped anyway: its future is dropped);
//! - a blocking tool (`Tool::new` runs on Tokio's blocking pool) that overruns: it is reported at the
//!   deadline, but nothing can stop its thread, which runs to its end; a blocking tool that checks
//!   `ctx.is_cancelled()` in its loop stops early instead;
//! - time spent queued behind the concurrency limit does not count towards a call's timeout.
//!
//! Run it with `cargo run --example timeouts` (about one second). The model is scripted, so it runs
//! offline.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use phaseo_agent::{Agent, AgentError, Event, ScriptedModel, Tool, ToolCall};
use serde_json::{Value, json};

/// A clock started at the run and a log of what happened when, shared by the tools and the printer.
#[derive(Clone)]
struct Log {
    t0: Instant,
    marks: Arc<Mutex<Vec<(String, u128)>>>,
}

impl Log {
    fn new() -> Self {
        Log {
            t0: Instant::now(),
            marks: Arc::default(),
        }
    }

    fn ms(&self) -> u128 {
        self.t0.elapsed().as_millis()
    }

    /// Prints a line stamped with the time since the run started, and remembers it under `key`.
    fn mark(&self, key: &str, what: &str) {
        let ms = self.ms();
        println!("   [{ms:>4} ms] {what}");
        self.lock().push((key.to_owned(), ms));
    }

    /// When `key` was marked, if it was.
    fn at(&self, key: &str) -> Option<u128> {
        self.lock()
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, ms)| *ms)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, u128)>> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Marks the moment the future holding it is dropped.
struct OnDrop(Log, &'static str, &'static str);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.mark(self.1, self.2);
    }
}

fn no_parameters() -> Value {
    json!({ "type": "object", "properties": {} })
}

fn tools(log: &Log) -> Vec<Tool> {
    // Finishes well inside the agent's default timeout.
    let quick = Tool::new(
        "quick",
        "Answer quickly",
        no_parameters(),
        |_input, _ctx| async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(json!({ "answer": 42 }))
        },
    );

    // Honours the token: the real work runs in a spawned task (as an upload or a child process
    // would), which outlives the tool's future, so it listens to the token to know when to stop.
    let upload_log = log.clone();
    let upload = Tool::new(
        "upload",
        "Upload a large file",
        no_parameters(),
        move |_input, ctx| {
            let log = upload_log.clone();
            async move {
                let token = ctx.cancellation_token().clone();
                let job = tokio::spawn(async move {
                    tokio::select! {
                        () = token.cancelled() => {
                            log.mark("upload.job", "upload: its background job saw the token fire, and stopped");
                            Err(AgentError::tool("upload cancelled"))
                        }
                        () = tokio::time::sleep(Duration::from_secs(10)) => Ok(json!({ "uploaded": true })),
                    }
                });
                job.await.map_err(AgentError::tool)?
            }
        },
    )
    .timeout(Duration::from_millis(100));

    // Ignores the token, and is stopped anyway: at the deadline its future is dropped, so it never
    // gets past its `.await`. (No `.timeout`: the agent's default applies.)
    let stubborn_log = log.clone();
    let stubborn = Tool::new(
        "stubborn",
        "Wait for something that never comes",
        no_parameters(),
        move |_input, _ctx| {
            let guard = OnDrop(
                stubborn_log.clone(),
                "stubborn.dropped",
                "stubborn: its future was dropped",
            );
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(json!("unreachable"))
            }
        },
    );

    // A synchronous tool runs on Tokio's blocking pool. At the deadline the call is reported and the
    // run goes on, but Rust cannot stop a thread from outside: this one runs to its end, and its
    // result is thrown away.
    let crunch_log = log.clone();
    let crunch = Tool::new(
        "crunch",
        "Crunch numbers without looking at the clock",
        no_parameters(),
        move |_input, _ctx| {
            std::thread::sleep(Duration::from_millis(600));
            crunch_log.mark(
                "crunch.thread_done",
                "crunch: its thread finished its work (nobody is waiting for the result)",
            );
            Ok(json!({ "crunched": true }))
        },
    )
    .timeout(Duration::from_millis(100));

    // The same, but it checks `ctx.is_cancelled()` between steps, so it stops soon after the deadline.
    let careful_log = log.clone();
    let careful = Tool::new(
        "crunch_careful",
        "Crunch numbers, checking for cancellation between steps",
        no_parameters(),
        move |_input, ctx| {
            for _step in 0..1_000 {
                if ctx.is_cancelled() {
                    careful_log.mark(
                        "careful.stopped",
                        "crunch_careful: saw ctx.is_cancelled() between steps, and stopped",
                    );
                    return Err(AgentError::tool("cancelled"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(json!({ "crunched": true }))
        },
    )
    .timeout(Duration::from_millis(150));

    vec![quick, upload, stubborn, crunch, careful]
}

#[tokio::main]
async fn main() -> Result<(), AgentError> {
    println!(
        "== 1. Five calls in one turn, run at once; timeouts 100 ms, 150 ms, and 200 ms by default"
    );
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "quick", json!({})),
            ToolCall::new("call_2", "upload", json!({})),
            ToolCall::new("call_3", "stubborn", json!({})),
            ToolCall::new("call_4", "crunch", json!({})),
            ToolCall::new("call_5", "crunch_careful", json!({})),
        ])
        .text("Only the quick answer came back; the rest timed out.");
    let log = Log::new();
    let agent = Agent::builder("ops")
        .model(model)
        .tools(tools(&log))
        .default_timeout(Duration::from_millis(200))
        .tool_concurrency(5)
        .build()?;

    let mut results = Vec::new();
    let mut events = agent.run("Do all the things.").stream();
    while let Some(event) = events.next().await {
        match event {
            Event::ToolCalled { call, .. } => {
                log.mark(
                    &format!("called.{}", call.id),
                    &format!("{} started", call.name),
                );
            }
            Event::ToolResult {
                call_id,
                tool,
                content,
                ..
            } => {
                log.mark(
                    &format!("done.{call_id}"),
                    &format!("{tool} result: {content}"),
                );
                results.push((call_id, content));
            }
            Event::ToolError {
                call_id,
                tool,
                content,
                ..
            } => {
                let content = content.unwrap_or_default();
                log.mark(
                    &format!("done.{call_id}"),
                    &format!("{tool} error:  {content}"),
                );
                results.push((call_id, content));
            }
            Event::Completed { output, .. } => {
                log.mark("completed", &format!("run completed: {output}"))
            }
            Event::Failed { error, .. } => log.mark("failed", &format!("run failed: {error}")),
            _ => {}
        }
    }

    println!("   waiting for crunch's thread, which nothing can stop ...");
    let waited = Instant::now();
    while log.at("crunch.thread_done").is_none() && waited.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // What the model saw, exactly.
    let content = |id: &str| {
        results
            .iter()
            .find(|(call_id, _)| call_id == id)
            .map(|(_, content)| content.clone())
            .unwrap_or_default()
    };
    assert_eq!(content("call_1"), r#"{"answer":42}"#);
    assert_eq!(
        content("call_2"),
        r#"{"error":"Tool upload timed out after 100ms"}"#
    );
    assert_eq!(
        content("call_3"),
        r#"{"error":"Tool stubborn timed out after 200ms"}"#
    );
    assert_eq!(
        content("call_4"),
        r#"{"error":"Tool crunch timed out after 100ms"}"#
    );
    assert_eq!(
        content("call_5"),
        r#"{"error":"Tool crunch_careful timed out after 150ms"}"#
    );

    // When it happened: each timeout reported at its deadline, not when the tool got round to ending.
    let at = |key: &str| {
        log.at(key)
            .unwrap_or_else(|| panic!("`{key}` never happened"))
    };
    let slack = 150; // scheduling noise on a busy machine
    for (call, deadline) in [
        ("call_2", 100),
        ("call_3", 200),
        ("call_4", 100),
        ("call_5", 150),
    ] {
        let reported = at(&format!("done.{call}"));
        assert!(
            (deadline..deadline + slack).contains(&reported),
            "{call} was reported at {reported} ms; its deadline was {deadline} ms"
        );
    }
    assert!(
        at("upload.job") <= at("done.call_2") + slack,
        "the token fired at the deadline"
    );
    assert!(
        at("stubborn.dropped") <= at("done.call_3") + slack,
        "the future was dropped at the deadline"
    );
    assert!(
        at("careful.stopped") <= at("done.call_5") + slack,
        "the careful tool stopped soon after"
    );
    assert!(
        at("completed") < at("crunch.thread_done"),
        "the run completed without waiting for the blocking thread"
    );
    assert!(at("crunch.thread_done") >= 600);

    println!(
        "\n== 2. Queued time does not count: two 150 ms calls, a 200 ms timeout, one at a time"
    );
    let model = ScriptedModel::new()
        .tool_calls([
            ToolCall::new("call_1", "report", json!({})),
            ToolCall::new("call_2", "report", json!({})),
        ])
        .text("Both reports are ready.");
    let report = Tool::new(
        "report",
        "Build a report",
        no_parameters(),
        |_input, _ctx| async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok(json!({ "report": "ready" }))
        },
    )
    .timeout(Duration::from_millis(200));
    let agent = Agent::builder("reports")
        .model(model)
        .tool(report)
        .build()?;
    let started = Instant::now();
    let done = agent.run("Build two reports.").tool_concurrency(1).await?;
    let elapsed = started.elapsed().as_millis();
    for step in done.state.steps() {
        println!("   {} {}: {}", step.call_id, step.tool, step.content);
    }
    println!(
        "   both succeeded in {elapsed} ms: the second call's 200 ms started when it ran, not when it was queued"
    );
    assert!(done.state.steps().iter().all(|s| !s.is_error));
    assert!(elapsed >= 300, "the calls ran one after the other");
    assert_eq!(done.output(), Some("Both reports are ready."));

    println!("\nAll checks passed.");
    Ok(())
}
